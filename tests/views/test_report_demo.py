"""The report on the demo's own data, as a stakeholder reads it: a verdict that names every reason
not to trust it (with the numbers rl.audit / rl.check / rl.summary return), readiness of both runs,
views that pick their runs (no side run in the training curves, the step the demo printed), the
same tables from a second `make demo`, a page that fits 800 px, and clean PDF pages (headless
Chromium: the browser's own print, and `rolloutlab report --pdf`)."""
from __future__ import annotations

import contextlib
import html as htmllib
import io
import re
from types import SimpleNamespace

import pytest

import rolloutlab as rl
from rolloutlab import cli, config
from rolloutlab.text import fmt

BASE, CANDIDATE = "base", "step10"
# A4 between 12 mm margins, in CSS px (96 per inch): what a printed page holds
A4_CONTENT_PX = int((210 - 2 * 12) / 25.4 * 96)


def run_demo(db, out, report) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(["demo", "--db", str(db), "--out", str(out), "--report", str(report)]) == 0
    return printed.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    db, out, report = root / "demo.duckdb", root / "logs", root / "demo-report.html"
    printed = run_demo(db, out, report)
    return SimpleNamespace(db=db, out=out, report=report, html=report.read_text(encoding="utf-8"), printed=printed)


@pytest.fixture
def con(demo):
    connection = rl.connect(demo.db, read_only=True)
    yield connection
    connection.close()


def section(page: str, name: str) -> str:
    part = page[page.index(f"<section id='{name}'>"):]
    return part[:part.index("</section>")]


def text(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", fragment))


def caveat_lines(headline: str) -> dict[str, tuple[str, str, list[str]]]:
    """topic -> (class, text, link targets) of each line under the verdict."""
    return {topic: (cls, text(body), re.findall(r"href='#([^']+)'", body))
            for cls, topic, body in re.findall(r"<li class='(\w+)' data-topic='([^']+)'>(.*?)</li>", headline)}


def test_the_verdict_names_every_reason_not_to_trust_it(demo, con):
    headline = section(demo.html, "headline")
    lines = caveat_lines(headline)
    suspects = rl.audit(con, CANDIDATE, base=BASE)
    n, injected = len(suspects), sum("grader_injection" in list(c) for c in suspects.checks)
    assert n > 0 and injected > 0  # the demo plants reward hacks, some of them notes to the grader

    # the headline never says "better" bare: the suspects come first, with their number
    verdict = text(re.search(r"<p class='verdict'>(.*?)</p>", headline).group(1))
    # ... and whether "better" survives them: the same test with them left out and counted as failures
    from rolloutlab.analysis.compare import compare_without

    without = compare_without(con, BASE, CANDIDATE, suspects.rollout_id).set_index("treated_as")
    left, failed = without.loc["left out"], without.loc["counted as failures"]
    assert left.significant and left["diff"] > 0 and not failed.significant  # the planted hacks carry the gain
    assert verdict.startswith(f"{CANDIDATE} is better than {BASE}, if the {n} audit suspects are honest: with them "
                              f"counted as failures, the difference is {fmt.unit_diff(failed['diff'], 'score')} "
                              f"(95% CI {fmt.unit_interval(failed.ci_low, failed.ci_high, 'score')}), no clear "
                              "change; read them first")
    cls, line, links = lines["audit"]
    assert cls == "concern" and f"{n} reward-hacking suspects among {CANDIDATE}'s rollouts" in line
    assert (f"with them left out, {fmt.unit_diff(left['diff'], 'score')} (95% CI "
            f"{fmt.unit_interval(left.ci_low, left.ci_high, 'score')})") in line
    assert f"grader_injection {injected}" in line and f"{injected} of them talk to the grader" in line
    assert "Note to the grader" in line and links == ["suspects"]

    # each warning or failure of the candidate's readiness, with its value, links to its row
    checks = rl.check(con, CANDIDATE)
    own_topic = {"graders", "infra_errors", "ungraded", "power"}  # weighed in lines of their own
    flagged = checks[checks.status.isin(["warn", "fail"]) & ~checks.check.isin(own_topic)]
    assert len(flagged) >= 1 and "suspicious_scores" in set(flagged.check)
    assert {t for t in lines if t.startswith("readiness:")} == {f"readiness:{c}" for c in flagged.check}
    shares = {"signal_share", "saturation", "infra_errors", "ungraded", "rejected_records", "long_tail", "tool_budget"}
    for r in flagged.itertuples():
        cls, line, links = lines[f"readiness:{r.check}"]
        value = (f"{100 * r.value:.1f}%".replace(".0%", "%") if r.check in shares else
                 f"{r.value:,.0f}" if float(r.value).is_integer() else f"{r.value:.3g}")
        assert cls == "concern" and f"{r.check} {r.status}s ({value})" in line and r.advice in line
        assert links == [f"readiness-{r.check}"]

    # grader disagreement: the pair that disagrees most, counted as rl.grader_stats counts it
    pairs = rl.grader_stats(con, CANDIDATE).attrs["pairs"]
    worst = pairs.loc[pairs.disagree_share.idxmax()]
    cls, line, links = lines["graders"]
    graders_status = checks.set_index("check").loc["graders", "status"]
    assert cls == ("concern" if graders_status in ("warn", "fail") else "ok") and links == ["graders"]
    assert (f"{worst.grader_a} vs {worst.grader_b}, {worst.n_disagree} of {worst.rollouts} "
            f"({100 * worst.disagree_share:.1f}%)") in line

    # infra errors and truncation, per run, as rl.summary counts them
    counts = rl.summary(con, [BASE, CANDIDATE]).set_index("run")
    _, infra, _ = lines["infra"]
    _, truncated, _ = lines["truncation"]
    for run in (BASE, CANDIDATE):
        c = counts.loc[run]
        assert f"{int(c.n_infra_error + c.n_ungraded)} of {int(c.rollouts)}" in infra
        assert f"{int(c.n_truncated)} of {int(c.rollouts)}" in truncated
    assert lines["truncation"][0] == ("concern" if (counts.n_truncated / counts.rollouts).max() > 0.01 else "ok")

    # every link under the verdict leads to an element of the report
    ids = set(re.findall(r"\bid='([^']+)'", demo.html))
    targets = [t for _, _, links in lines.values() for t in links]
    assert targets and set(targets) <= ids, set(targets) - ids


def test_readiness_of_both_runs_side_by_side(demo, con):
    readiness = section(demo.html, "readiness")
    assert re.search(rf"<th>check</th><th>{BASE}</th><th>{CANDIDATE}</th>", readiness)
    checks = {run: rl.check(con, run).set_index("check") for run in (BASE, CANDIDATE)}
    for name in checks[BASE].index:
        row = re.search(rf"<tr id='readiness-{name}'>(.*?)</tr>", readiness).group(1)
        statuses = re.findall(r"<td class='st (\w+)'>", row)
        if name == "power":  # the report states one detectable difference: the headline's (see below)
            assert statuses == ["skip", "skip"] and "the headline says it" in text(row)
            continue
        assert statuses == [checks[BASE].loc[name, "status"], checks[CANDIDATE].loc[name, "status"]], name
    # the candidate's suspicious scores warn while the base's pass: today's report hid that
    row = text(re.search(r"<tr id='readiness-suspicious_scores'>(.*?)</tr>", readiness).group(1))
    assert f"warn{checks[CANDIDATE].loc['suspicious_scores', 'value']:.0f}" in row.replace(" ", "")


def test_each_view_picks_the_runs_it_is_about(demo, con):
    side = config.DEMO_SERVER_RUN
    runs = dict(con.execute("SELECT run_id, step FROM runs").fetchall())
    assert side in runs and runs[side] is None  # the capture: a side run without a step

    # training curves: the runs with a step, and the base; never the side run, never "(no split)"
    training = section(demo.html, "training")
    note, figure = training.split("</p>", 1)
    steps = sorted({s for s in runs.values() if s is not None})
    stepped = [r for r, s in runs.items() if s is not None]
    assert (f"{len(steps)} checkpoints by training step ({', '.join(map(str, steps))}) in {len(stepped)} runs"
            in text(note))
    def drawn(run):  # a run label as a whole word in the figure's data (its hover text)
        return re.search(rf"(?<![\w-]){re.escape(run)}(?![\w-])", figure) is not None

    assert "(no split)" not in figure and not drawn(side)
    assert drawn(BASE) and all(drawn(r) for r in stepped)

    # endpoint load: the step the demo printed, not the build-hour default
    b, k = map(int, re.search(r"a step of (\d+) x (\d+) = ", demo.printed).groups())
    assert f"a training step of {b} × {k} = {b * k:,} rollouts" in text(section(demo.html, "capacity"))

    # provenance: the files of the two compared runs, not the capture or the training logs
    sources = text(section(demo.html, "methods").split("<h3>Sources</h3>")[1])
    assert f"{BASE}.jsonl" in sources and f"{CANDIDATE}.jsonl" in sources
    assert "endpoint-events.jsonl" not in sources and "tool-events-0.jsonl" not in sources


def test_a_second_demo_prints_the_same_tables(demo, tmp_path):
    """The capture run of the first demo is no row of the second one's tables: each demo prints
    the runs its own files loaded, each labelled for what it is."""
    again = run_demo(demo.db, demo.out, tmp_path / "again.html")

    def tables(printed):
        return printed[printed.index("runs of the demo"):printed.index(f"readiness of {BASE}:")]

    assert tables(again) == tables(demo.printed)
    assert not re.search(rf"\b{re.escape(config.DEMO_SERVER_RUN)}\b", tables(again))
    assert "training rollouts at step 10" in tables(again) and "evaluation of the base checkpoint" in tables(again)
    assert f"side run {config.DEMO_SERVER_RUN}: " in again


# --- in the browser ------------------------------------------------------------------------------

def open_report(browser, url: str, width: int):
    page = browser.new_page(viewport={"width": width, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector(".plotly .main-svg", timeout=30_000)
    return page, errors


OVERFLOW = """(width) => ({
  scroll: document.documentElement.scrollWidth,
  wider: [...document.querySelectorAll('section, table, .card, .verdict, ul.caveats, .js-plotly-plot, svg.main-svg')]
    .filter(e => e.getBoundingClientRect().right > width + 0.5)
    .map(e => (e.closest('section') || {}).id + ' ' + e.tagName + ' ' + Math.round(e.getBoundingClientRect().right))
})"""


def test_the_report_fits_800_px(browser, demo):
    page, errors = open_report(browser, demo.report.as_uri(), 800)
    measured = page.evaluate(OVERFLOW, 800)
    page.close()
    assert errors == []
    assert measured["scroll"] <= 800 and measured["wider"] == [], measured


def test_printing_gives_clean_pages(browser, demo, tmp_path):
    """"Save as PDF" from a wide window: the browser lays the page out at the paper's width without
    resizing the window, and fires beforeprint; figures must then fit the page, folded text open,
    controls hidden. Then the PDF itself (Playwright's page.pdf is Chromium's print)."""
    page, errors = open_report(browser, demo.report.as_uri(), 1200)
    widest = "Math.max(...[...document.querySelectorAll('svg.main-svg')].map(s => s.getBoundingClientRect().width))"
    assert page.evaluate(widest) > A4_CONTENT_PX  # drawn for the wide window
    # as when printing: no resize reaches the page (a capture listener on the target runs first)
    page.evaluate("window.addEventListener('resize', e => e.stopImmediatePropagation(), true)")
    page.emulate_media(media="print")
    page.set_viewport_size({"width": A4_CONTENT_PX, "height": 1000})
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    measured = page.evaluate(OVERFLOW, A4_CONTENT_PX)
    assert measured["scroll"] <= A4_CONTENT_PX and measured["wider"] == [], measured
    hidden = page.evaluate("""() => ({
      modebars: [...document.querySelectorAll('.modebar-container')].filter(m => getComputedStyle(m).display !== 'none').length,
      closed: document.querySelectorAll('details:not([open])').length,
      figures: document.querySelectorAll('.js-plotly-plot').length})""")
    assert hidden["modebars"] == 0 and hidden["closed"] == 0 and hidden["figures"] >= 8, hidden

    page.evaluate("window.dispatchEvent(new Event('afterprint'))")
    page.emulate_media(media="screen")
    page.set_viewport_size({"width": 1200, "height": 1000})
    page.evaluate("window.addEventListener('beforeprint', () => window.__widths = [...document.querySelectorAll("
                  "'svg.main-svg')].map(s => s.getBoundingClientRect().width))")
    pdf = page.pdf(format="A4", margin={side: "12mm" for side in ("top", "right", "bottom", "left")})
    widths = page.evaluate("window.__widths")
    page.close()
    assert errors == []
    assert widths and max(widths) <= A4_CONTENT_PX, max(widths)  # what Chromium printed
    boxes = re.findall(rb"/MediaBox\s*\[0 0 ([\d.]+) ([\d.]+)\]", pdf)
    assert pdf.startswith(b"%PDF") and len(boxes) >= 6  # pages
    assert {(round(float(w)), round(float(h))) for w, h in boxes} == {(596, 843)}  # A4 in points
    (tmp_path / "printed.pdf").write_bytes(pdf)


def test_report_pdf_command(browser, demo, tmp_path, capsys):
    """`rolloutlab report --pdf` prints with headless Chromium (the flags the tests use): the page
    it prints draws its figures for the paper (#print) before Chromium prints it."""
    from conftest import CHROMIUM_ARGS
    from rolloutlab.views import report

    assert report.CHROMIUM_ARGS == CHROMIUM_ARGS
    out = tmp_path / "report.html"
    assert cli.main(["report", "--db", str(demo.db), "--base", BASE, "--candidate", CANDIDATE, "-o", str(out),
                     "--n-boot", "200", "--pdf"]) == 0
    pdf = tmp_path / "report.pdf"
    assert f"wrote {pdf}" in capsys.readouterr().out
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", data)) >= 6
    page, errors = open_report(browser, out.as_uri() + "#print", 1200)
    page.wait_for_load_state("load")
    widths = page.evaluate("[...document.querySelectorAll('svg.main-svg')].map(s => s.getBoundingClientRect().width)")
    closed = page.evaluate("document.querySelectorAll('details:not([open])').length")
    page.close()
    assert errors == [] and max(widths) <= A4_CONTENT_PX and closed == 0


def test_one_detectable_difference_in_the_report(demo, con):
    """The report states which differences the comparison could detect once, from the two runs'
    observed correlation, for the verdict's test: no second number from a run alone at an assumed
    correlation, no target nobody set."""
    page = text(demo.html)
    stated = set(re.findall(r"could detect differences of ±([\d.]+) or larger", page))
    a = rl.power(con, BASE, CANDIDATE).attrs
    assert stated == {f"{a['mde']:.3g}".rstrip("0")}, stated
    assert "correlation 0.84, observed" in page and "assumed correlation" not in page
    assert "you hope for" not in page and "Planned for the verdict's test: score tested alone" in page


def test_the_two_means_carry_their_names(demo, con, capsys):
    """summary's mean over rollouts and compare's mean of per-sample means: each named wherever it
    is shown (CLI summary and compare, the demo's lines, the report), each from one function
    (compare's score on the demo's fully shared samples is summary's mean_of_sample_means)."""
    from rolloutlab.analysis.compare import MEAN_OF_SAMPLE_MEANS, MEAN_OVER_ROLLOUTS

    counts = rl.summary(con, [BASE]).iloc[0]
    score = rl.compare(con, BASE, CANDIDATE, n_boot=200).set_index("metric").loc["score"]
    assert score.base == pytest.approx(counts.mean_of_sample_means) and score.base != counts.mean_score
    assert cli.main(["summary", "--db", str(demo.db), "--run", BASE]) == 0
    printed = capsys.readouterr().out
    assert re.search(rf"mean_score \({MEAN_OVER_ROLLOUTS}\) +{counts.mean_score:.3f}", printed)
    assert re.search(rf"mean_of_sample_means \({MEAN_OF_SAMPLE_MEANS}: compare's score\) +"
                     rf"{counts.mean_of_sample_means:.3f}", printed)
    assert cli.main(["compare", "--db", str(demo.db), "--base", BASE, "--candidate", CANDIDATE, "--n-boot", "200"]) == 0
    assert re.search(rf"score \({MEAN_OF_SAMPLE_MEANS}\) +{score.base:.3f}", capsys.readouterr().out)
    assert f"score ({MEAN_OF_SAMPLE_MEANS}) {score.base:.3f}" in demo.printed
    assert f"Score ({MEAN_OF_SAMPLE_MEANS}) {score.base:.3f} → " in text(section(demo.html, "headline"))


def test_one_cost_in_every_view(demo, con, capsys):
    """What a rollout and a solved sample cost: rl.cost's number (logs, else tokens × the dated
    prices) in summary, compare, the CLI and the report — the demo's step10 logs no cost, so a view
    that read only logged costs would show none."""
    from rolloutlab.text import fmt

    cost = rl.cost(con, [BASE, CANDIDATE]).set_index("run")
    assert cost.loc[CANDIDATE, "cost_source"] == "prices" and cost.loc[CANDIDATE, "cost_per_rollout"] > 0
    summary = rl.summary(con, [BASE, CANDIDATE]).set_index("run")
    cmp = rl.compare(con, BASE, CANDIDATE, n_boot=200).set_index("metric")
    for run, side in ((BASE, "base"), (CANDIDATE, "candidate")):
        per_rollout, per_solved = cost.loc[run, "cost_per_rollout"], cost.loc[run, "cost_per_solved"]
        assert summary.loc[run, "cost_mean"] == pytest.approx(per_rollout, rel=1e-12)
        assert cmp.loc["cost_per_rollout", side] == pytest.approx(per_rollout, rel=1e-12)
        assert cmp.loc["cost_per_solved", side] == pytest.approx(per_solved, rel=1e-12)
    shown = [fmt.dollars(cost.loc[r, "cost_per_rollout"]) for r in (BASE, CANDIDATE)]
    assert cli.main(["compare", "--db", str(demo.db), "--base", BASE, "--candidate", CANDIDATE, "--n-boot", "200"]) == 0
    assert re.search(r"cost_per_rollout +" + r" +".join(map(re.escape, shown)), capsys.readouterr().out)
    assert cli.main(["summary", "--db", str(demo.db), "--run", BASE, "--run", CANDIDATE]) == 0
    assert re.search(r"cost_mean +" + r" +".join(map(re.escape, shown)), capsys.readouterr().out)
    report = text(section(demo.html, "cost"))
    assert all(s in report for s in shown)


def test_every_interval_of_compare_holds_its_estimate(con):
    df = rl.compare(con, "base", "step10", n_boot=200)
    tested = df[df.method == "clustered t"].dropna(subset=["ci_low", "ci_high"])
    assert len(tested) > 10
    bad = tested[(tested["diff"] < tested.ci_low - 1e-12) | (tested["diff"] > tested.ci_high + 1e-12)]
    assert bad.empty, bad[["metric", "diff", "ci_low", "ci_high"]]


def test_a_missing_value_reads_as_a_dash(demo):
    """#35: one rendering of a missing value in the report, and no raw floats in its tables."""
    text = re.sub(r"<style.*?</style>|<script.*?</script>|<svg.*?</svg>|data:image[^\"']*", "", demo.html, flags=re.S)
    assert not re.findall(r"\bNaN\b|&lt;NA&gt;|\bNone\b|\bnan\b", text)
    assert not [m for m in re.findall(r">\s*-?([\d,]*\.\d+)\s*<", text)
                if len(m.replace(".", "").replace(",", "").lstrip("0")) > 4]
    assert "tool_budget = —" in text  # a threshold nobody set


def test_the_page_and_its_pdf_read_the_same_numbers(demo, con, browser, tmp_path):
    """#35: the shared numbers read off the report as Chromium shows it and off the PDF it prints
    (pypdf's text): the headline score of each run (mean of sample means), the detectable
    difference, each run's cost per rollout, the capacity sentence — each from its one function."""
    import unicodedata

    import pypdf

    from rolloutlab.analysis.compare import MEAN_OF_SAMPLE_MEANS

    score = rl.compare(con, BASE, CANDIDATE, n_boot=200).set_index("metric").loc["score"]
    cost = rl.cost(con, [BASE, CANDIDATE]).set_index("run")
    mde = rl.power(con, BASE, CANDIDATE).attrs["mde"]
    capacity = rl.capacity_change(con, BASE, CANDIDATE, **config.DEMO_PLANNED_STEP).attrs["sentence"]  # the demo's step
    shared = [f"Score ({MEAN_OF_SAMPLE_MEANS}) {score.base:.3f} → {score.candidate:.3f}",
              f"could detect differences of ±{mde:.3g}".rstrip("0"),
              *(fmt.dollars(cost.loc[r, "cost_per_rollout"]) for r in (BASE, CANDIDATE)),
              capacity]
    page, errors = open_report(browser, demo.report.as_uri(), 1200)
    shown = " ".join(page.inner_text("body").split())
    pdf = tmp_path / "report.pdf"
    page.emulate_media(media="print")
    pdf.write_bytes(page.pdf(format="A4"))
    page.close()
    # NFKC: the PDF's fonts print "ff" as one ligature
    printed = unicodedata.normalize("NFKC", " ".join(p.extract_text() for p in pypdf.PdfReader(pdf).pages))
    assert errors == []
    for number in shared:
        assert " ".join(number.split()) in shown, number
        # a line may break anywhere in print: compared without spaces
        assert "".join(number.split()) in "".join(printed.split()), number
