"""The stakeholder report: content, escaping, self-containment; opened in headless Chromium."""
from __future__ import annotations

import re

import pytest

import rolloutlab as rl
from conftest import rollout

EVIL = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"


@pytest.fixture
def report_db(load, con):
    records = []
    for i in range(12):
        for j in range(3):
            records.append(rollout("base", f"s{i}", float((i + j) % 2), ["search"] * 6, latency=20.0 + i, step=None))
            records.append(rollout("cand", f"s{i}", 1.0 if i != 5 else 0.0, ["search"] * 2, latency=8.0 + i,
                                   step=10, answer=EVIL if i == 5 else "42"))
    load(records)
    return con


def test_content_escaping_and_self_containment(report_db, tmp_path):
    html = rl.build_report(report_db, "base", "cand", n_boot=200, progress=False)
    cmp = rl.compare(report_db, "base", "cand", n_boot=200).set_index("metric")
    score = cmp.loc["score"]
    assert f"{score.base:.3g} → {score.candidate:.3g}" in html  # 3 significant digits: 0.5 → 0.917
    assert f"{cmp.attrs['wins']} / {cmp.attrs['ties']} / {cmp.attrs['losses']}" in html
    assert "6 → 2" in html  # tool calls per rollout
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    # outside plotly.js itself (whose logo link is no request), nothing points to the network
    page_only = html.replace(html[html.index("<script"):html.index("</script>") + 9], "", 1)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page_only), "no external resources"
    for section in ("headline", "readiness", "variance", "tool-calls", "latency", "per-sample", "train-next", "graders",
                    "calibration", "suspects", "how-it-fails", "capacity", "cost", "training", "trainer", "methods"):
        assert f"<section id='{section}'>" in html and f"<a href='#{section}'>" in html  # in the contents
    assert "could not be built" not in html
    assert f"<p class='sub'>rolloutlab {rl.__version__} · generated" in html
    path = rl.write_report(report_db, "base", "cand", tmp_path / "r.html", n_boot=100, progress=False)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_opens_offline_in_chromium(browser, report_db, tmp_path):
    path = rl.write_report(report_db, "base", "cand", tmp_path / "report.html", n_boot=200, progress=False)
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector(".plotly .main-svg", timeout=20_000)
    assert errors == []
    assert all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests
    text = page.inner_text("#headline")
    score = rl.compare(report_db, "base", "cand", n_boot=200).set_index("metric").loc["score"]
    assert f"{score.base:.3g} → {score.candidate:.3g}" in text
    assert page.evaluate("window.__pwned") is None  # the injected script never ran
    assert "<script>window.__pwned=1</script>" in page.inner_text("#per-sample")  # shown as text
    assert page.locator(".plotly").count() >= 4
    page.screenshot(path=str(tmp_path / "report.png"))
    page.close()


def test_trainer_section(report_db):
    from conftest import FIXTURES

    assert "No trainer metrics loaded" in rl.build_report(report_db, "base", "cand", n_boot=50, progress=False)
    rl.ingest(report_db, FIXTURES / "openai-finetune")
    html = rl.build_report(report_db, "base", "cand", n_boot=50, progress=False)
    section = html[html.index("<section id='trainer'>"):]
    section = section[:section.index("</section>")]
    assert "What the trainer reported" in section and "ftjob-abc123" in section and "plotly-graph-div" in section
    assert re.search(r"sample.parse.error", section)  # the job's grader error metric is drawn (named by plots)


def test_graders_and_suspects_sections(load, con):
    """Both sections from planted synthetic data; an injected answer is escaped."""
    from rolloutlab.demo import synth

    records, planted = synth.generate_judged(samples=60, attempts=3, seed=2, hack_rate=0.05)
    evil = next(r for r in records if planted.get(r["rollout_id"]) == "grader_injection")
    evil["final_answer"] = EVIL + synth.INJECTION
    load(records)
    html = rl.build_report(con, "base", "step10", n_boot=100, progress=False)
    graders = html[html.index("<section id='graders'>"):]
    graders = graders[:graders.index("</section>")]
    per_grader = rl.compare(con, "base", "step10", n_boot=100).set_index("metric")
    for name in ("judge", "answer"):  # the per-grader table: each grader's change, 3 significant digits
        row = per_grader.loc[f"grader:{name}"]
        assert f"<td class='w'>{name}</td><td class='n'>{row.base:.3g}</td>" in graders
        assert f"{row['diff']:+.3g}" in graders
    assert graders.count("plotly-graph-div") == 2  # the per-grader bars and where graders disagree
    suspects = html[html.index("<section id='suspects'>"):]
    suspects = suspects[:suspects.index("</section>")]
    n = len(rl.audit(con, "step10", base="base"))
    assert f"{n} suspect rollouts" in suspects and "grader_injection" in suspects
    assert "explorer (notebook 01-explore" in suspects and "notebook 04" not in suspects  # 04 is latency
    assert "<script>window.__pwned" not in suspects and "&lt;script&gt;window.__pwned=1" in suspects


def test_capacity_section(load, con):
    from test_capacity import OBSERVED

    records = [dict(r, run=run, tool_calls=[dict(c, tool="<b>cat</b>" if c["tool"] == "cat" else c["tool"])
                                            for c in r["tool_calls"]])
               for run in ("base", "cand") for r in OBSERVED]
    load(records)
    html = rl.build_report(con, "base", "cand", n_boot=50, progress=False, batch_size=30, compute_multiplier=2)
    section = html[html.index("<section id='capacity'>"):]
    section = section[:section.index("</section>")]
    assert "30 × 2 = 60 rollouts" in section
    assert "<td class='n'>40</td>" in section and "<td class='n'>20</td>" in section  # projected peaks (test_capacity)
    assert "<b>cat</b>" not in section and "&lt;b&gt;cat&lt;/b&gt;" in section


def test_runs_without_shared_samples_are_named(load, con, db_path, tmp_path, capsys):
    """Two runs on different samples have nothing to pair: the report says so, naming both runs,
    instead of blaming one run for having no counted rollouts."""
    from rolloutlab import cli

    load([rollout("a<b>", f"s{i}", float(i % 2), ["search"]) for i in range(4)]
         + [rollout("other", f"t{i}", float(i % 2), ["search"]) for i in range(3)])
    with pytest.raises(ValueError) as err:
        rl.build_report(con, "a<b>", "other", n_boot=50, progress=False)
    message = str(err.value)
    assert "a<b> and other share no samples" in message and "4 samples only in a<b>, 3 only in other" in message
    assert "evaluated on the same samples" in message and "no counted rollouts" not in message
    con.close()
    code = cli.main(["report", "--db", str(db_path), "--base", "a<b>", "--candidate", "other",
                     "-o", str(tmp_path / "r.html"), "--n-boot", "50"])
    assert code == cli.EXIT_USAGE and not (tmp_path / "r.html").exists()
    assert "a<b> and other share no samples" in capsys.readouterr().err


def test_shared_samples_none_scored_in_both(load, con):
    """Shared samples whose rollouts in one run were all infra errors: nothing scored to pair."""
    load([rollout("a", f"s{i}", 1.0, ["search"]) for i in range(3)]
         + [rollout("b", f"s{i}", None, ["search"], status="infra_error") for i in range(3)])
    with pytest.raises(ValueError, match=r"a and b share 3 samples, but none has a counted rollout in both runs"):
        rl.build_report(con, "a", "b", n_boot=50, progress=False)


def _imports(module: str) -> set[str]:
    """What a module of the package imports, as 'module' or 'module:name' (relative: leading dots)."""
    import ast
    from pathlib import Path

    import rolloutlab

    tree = ast.parse((Path(rolloutlab.__file__).parent / module).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found |= {base} | {f"{base}:{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_report_needs_no_widgets_and_no_package_init():
    """The report takes its escaper from htmltext and its version from version: it needs no widget
    module, and no module imports the package it belongs to (a cycle while the package loads)."""
    from pathlib import Path

    from rolloutlab.text import htmltext
    from rolloutlab.views import report, widgets
    from rolloutlab import version

    imports = _imports("views/report/build.py")
    assert "...text.htmltext:esc" in imports and "...version:__version__" in imports
    sections = set().union(*(_imports(f"views/report/{p.name}") for p in Path(report.__file__).parent.glob("*.py")))
    assert not any(i.startswith("..widgets") for i in sections) and "...:__version__" not in sections
    assert report.page._e is htmltext.esc is widgets.esc
    assert rl.__version__ == version.__version__ == "0.1.0"
    # one escaper: the explorer and the plotly figures use the same one
    assert "..text.htmltext:esc" in _imports("views/widgets.py")
    assert "...text.htmltext:esc" in _imports("views/plots/interactive.py")
    assert "html" not in _imports("views/plots/interactive.py")


def test_no_module_imports_from_its_package_init():
    """``from . import x`` names a module, never a name the package's __init__ defines (the
    version, say): __init__ imports those modules, so that would be an import cycle."""
    import ast
    from pathlib import Path

    import rolloutlab

    root = Path(rolloutlab.__file__).parent
    wrong = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level and node.module is None:
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                wrong += [f"{path.relative_to(root)}: {a.name}" for a in node.names
                          if not ((package / f"{a.name}.py").exists() or (package / a.name / "__init__.py").exists())]
    assert wrong == []


def _verdict_case(ci_low, ci_high, concerns=(), without=None):
    """A compare row and verdict rows for verdict_sentence: ``concerns`` as (topic, condition);
    ``without``: compare_without's rows as (treated_as, diff, ci_low, ci_high, significant)."""
    import pandas as pd

    from rolloutlab.views import report

    # compare's primary row: its CI inverts its test, so it excludes 0 exactly when it is significant
    cmp = pd.DataFrame([{"metric": "score", "base": 0.5, "candidate": 0.6, "diff": (ci_low + ci_high) / 2,
                         "ci_low": ci_low, "ci_high": ci_high, "p_value": 0.0004 if ci_low > 0 or ci_high < 0 else 0.2,
                         "significant": ci_low > 0 or ci_high < 0, "unit": "score"}])
    cmp.attrs.update(primary="score", alpha=0.05, ci=0.95)
    rows = [dict(topic=t, concern=True, count=1, line="", condition=c, section="", section_title="")
            for t, c in concerns]
    rows.append(dict(topic="infra", concern=False, count=0, line="", condition="", section="", section_title=""))
    df = pd.DataFrame(rows, columns=report.VERDICT_COLUMNS)
    if without is not None:
        df.attrs["without_suspects"] = pd.DataFrame(
            [dict(treated_as=t, diff=d, ci_low=lo, ci_high=hi, significant=sig, unit="score") for t, d, lo, hi, sig in without])
    return report.verdict_sentence(cmp, df, "b", "c")


def test_the_verdict_in_words():
    """"better" only where the primary metric (the score) is significant, and never bare when anything
    argues against it. The score says which mean it is."""
    clean = _verdict_case(0.05, 0.15)
    assert clean["verdict"] == ("c is better than b: nothing else the workbench checks argues against it. "
                                "Score (mean of per-sample means) 0.5 → 0.6: +0.1, 95% CI [+0.05, +0.15], p < 0.001.")
    audited = _verdict_case(0.05, 0.15, [("audit", "the 7 audit suspects are honest"), ("truncation", "x")])
    assert audited["verdict"].startswith("c is better than b, if the 7 audit suspects are honest: read them first "
                                         "(1 more caveat below).")
    warned = _verdict_case(0.05, 0.15, [("readiness:power", "c's power warning does not bias the score")])
    assert warned["rest"] == ", if c's power warning does not bias the score: read the caveats below first."
    unclear = _verdict_case(-0.02, 0.15, [("audit", "the 7 audit suspects are honest")])
    assert unclear["verdict"].startswith("No clear difference between c and b (p > 0.05: the 95% CI includes 0); "
                                         "read the 1 caveat below before concluding.")
    survives = _verdict_case(0.05, 0.15, [("audit", "the 7 audit suspects are honest")],
                             without=[("left out", 0.09, 0.04, 0.14, True), ("counted as failures", 0.06, 0.01, 0.11, True)])
    assert survives["rest"] == ", even with its 1 audit suspects left out or counted as failures."
    falls = _verdict_case(0.05, 0.15, [("audit", "the 7 audit suspects are honest")],
                          without=[("left out", 0.09, 0.04, 0.14, True), ("counted as failures", 0.01, -0.03, 0.05, False)])
    assert falls["rest"] == (", if the 7 audit suspects are honest: with them counted as failures, the difference is "
                             "+0.01 (95% CI [-0.03, +0.05]), no clear change; read them first.")
    worse = _verdict_case(-0.15, -0.05, [("audit", "a"), ("coverage", "b")])
    assert worse["direction"] == "worse" and worse["rest"] == "; 2 caveats below may explain part of it."
    assert (clean["concerns"], audited["concerns"], worse["concerns"]) == (0, 2, 2)


def test_a_run_against_itself_is_refused(report_db, db_path, tmp_path, capsys):
    from rolloutlab import cli
    from rolloutlab.views import report

    with pytest.raises(ValueError, match="base and candidate are the same run"):
        report.verdict(report_db, "base", "base")
    with pytest.raises(ValueError, match="base and candidate are the same run"):
        rl.build_report(report_db, "base", "base", n_boot=50, progress=False)
    report_db.close()
    out = tmp_path / "self.html"
    code = cli.main(["report", "--db", str(db_path), "--base", "base", "--candidate", "base", "-o", str(out)])
    assert code == cli.EXIT_USAGE and not out.exists()
    assert "the same run (base)" in capsys.readouterr().err


def test_the_headline_names_its_caveats(report_db):
    """On a small run the readiness checks of the candidate warn: the verdict says so first."""
    html = rl.build_report(report_db, "base", "cand", n_boot=200, progress=False)
    headline = html[html.index("<section id='headline'>"):]
    headline = headline[:headline.index("</section>")]
    checks = rl.check(report_db, "cand")
    flagged = checks[checks.status.isin(["warn", "fail"])]
    assert "dataset_size" in set(flagged.check)  # 12 samples
    for name in flagged.check:
        if name == "power":  # the headline's own line states what this comparison can detect
            assert "data-topic='readiness:power'" not in headline and "id='power-line'" in headline
            continue
        assert f"<li class='concern' data-topic='readiness:{name}'>" in headline
        assert f"href='#readiness-{name}'" in headline and f"<tr id='readiness-{name}'>" in html
    verdict = re.search(r"<p class='verdict'>(.*?)</p>", headline).group(1)
    assert verdict.startswith("<strong>cand is better than base</strong>, if cand&#x27;s ")


def test_long_text_is_never_cut(load, con):
    """Audit reasons and final answers are shown whole, wrapped in a row of their own; a very long
    answer opens on a click. Nothing is cut with an ellipsis in a narrow column."""
    from rolloutlab.demo import synth

    records, planted = synth.generate_judged(samples=60, attempts=3, seed=2, hack_rate=0.05)
    evil = next(r for r in records if planted.get(r["rollout_id"]) == "grader_injection")
    long_answer = synth.INJECTION + " " + "and so on " * 80 + "the-very-end"
    evil["final_answer"] = long_answer
    load(records)
    html = rl.build_report(con, "base", "step10", n_boot=100, progress=False)
    suspects = html[html.index("<section id='suspects'>"):]
    suspects = suspects[:suspects.index("</section>")]
    top = rl.audit(con, "step10", base="base").head(10)
    assert evil["rollout_id"] in set(top.rollout_id)
    assert "the-very-end" in suspects and f"show all {len(long_answer):,} characters" in suspects
    for reason in top.reason:  # every reason whole, in the row under its suspect
        assert f"<span class='k'>why:</span><span class='long'>{reason.replace(chr(39), '&#x27;')}</span>" in suspects
    cells = re.findall(r"<td[^>]*>(.*?)</td>", suspects.split("<h3>")[1], flags=re.S)
    assert cells and not any("…" in c or "..." in c for c in cells)


def test_pdf_without_chromium_says_how_to_install_it(load, con, db_path, tmp_path, monkeypatch, capsys):
    from rolloutlab import cli

    load([rollout("a", f"s{i}", float(i % 2), ["search"]) for i in range(4)]
         + [rollout("b", f"s{i}", 1.0, ["search"]) for i in range(4)])
    con.close()
    monkeypatch.setenv("PATH", str(tmp_path / "no-browsers-here"))
    monkeypatch.delenv("ROLLOUTLAB_CHROMIUM", raising=False)
    out = tmp_path / "r.html"
    code = cli.main(["report", "--db", str(db_path), "--base", "a", "--candidate", "b", "-o", str(out), "--pdf"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE and not out.exists() and not out.with_suffix(".pdf").exists()
    assert "needs Chromium" in err and "apt-get install chromium" in err and "ROLLOUTLAB_CHROMIUM" in err
    monkeypatch.setenv("ROLLOUTLAB_CHROMIUM", str(tmp_path / "nope"))
    assert cli.main(["report", "--db", str(db_path), "--base", "a", "--candidate", "b", "-o", str(out),
                     "--pdf"]) == cli.EXIT_USAGE
    assert "$ROLLOUTLAB_CHROMIUM is" in capsys.readouterr().err and not out.exists()


def test_infra_errors_and_truncation_that_differ_are_caveats(load, con):
    """10 of 40 candidate rollouts failed on infrastructure, 4 were truncated: both are concerns,
    with each run's counts; the base has neither."""
    from rolloutlab.views import report

    records = [rollout("a", f"s{i}", float(i % 2), ["search"]) for i in range(40)]
    records += [rollout("b", f"s{i}", None if i < 10 else 1.0, ["search"],
                        status="infra_error" if i < 10 else "truncated" if i < 14 else "ok") for i in range(40)]
    load(records)
    v = report.verdict(con, "a", "b", n_boot=500).set_index("topic")
    assert bool(v.loc["infra", "concern"]) and bool(v.loc["truncation", "concern"])
    from scipy.stats import fisher_exact

    p = fisher_exact([[0, 40], [10, 30]]).pvalue  # 0.00103
    assert ("0 of 40 (0%) in a, 10 of 40 (25%) in b: the share differs between the runs (+25 pp, Fisher's exact "
            f"test p = {p:.2g}); readiness warns on b's infra_errors") in v.loc["infra", "line"]
    # the 10 samples whose every rollout of b failed are in neither score: said so
    assert bool(v.loc["coverage", "concern"]) and "10 by both but without a counted rollout" in v.loc["coverage", "line"]
    assert "0 of 40 (0%) in a, 4 of 40 (10%) in b" in v.loc["truncation", "line"]
    assert v.loc["infra", "section"] == v.loc["truncation", "section"] == "methods-rollouts"


def test_unknown_stop_words_are_named_in_the_truncation_caveat(load, con):
    """No rollout cut at a known limit, but 2 of 100 candidate rollouts stopped with a word no
    vocabulary knows: 2% may be cut, above TRUNCATED_WARN (1%) — a concern that names the word."""
    from rolloutlab.views import report

    records = [rollout("a", f"s{i}", float(i % 2), ["search"], stop_reason="stop") for i in range(100)]
    records += [rollout("b", f"s{i}", float(i % 2), ["search"], stop_reason="pause_turn_x" if i < 2 else "stop")
                for i in range(100)]
    load(records)
    assert report.TRUNCATED_WARN < 2 / 100
    line = report.verdict(con, "a", "b", n_boot=200).set_index("topic").loc["truncation"]
    assert bool(line.concern)
    assert line.line.startswith("Truncated rollouts (stopped by a turn, token or time limit, scored as they ended): "
                                "0 of 100 (0%) in a, 0 of 100 (0%) in b; counted as not cut, though their producer's "
                                "stop reason is one rolloutlab does not know: 2 in b ('pause_turn_x' (2))")


def _section(html: str, name: str) -> str:
    part = html[html.index(f"<section id='{name}'>"):]
    return part[:part.index("</section>")]


def test_what_to_train_on_next_and_power(report_db):
    """Curation counts per verdict (the keep count is curate's), its forecast, the signal along
    training (two checkpoints), the command that writes the files; the headline's power line."""
    from rolloutlab.analysis import curation
    from rolloutlab.analysis.power_analysis import detectable_sentence, power
    from rolloutlab.text.htmltext import esc

    html = rl.build_report(report_db, "base", "cand", n_boot=100, progress=False)
    section = _section(html, "train-next")
    assert "<h2>What to train on next</h2>" in section
    cur = curation.curate(report_db, "base")
    keep = int((cur.verdict == "keep").sum())
    assert keep == 12  # 1 or 2 of 3 attempts pass: every sample inside the band
    assert f"<td class='w'>keep</td><td class='n'>{keep}</td>" in section
    assert f"{keep} of {len(cur)} samples of base are worth training on next" in section
    for verdict in curation.VERDICTS:
        assert f"<td class='w'>{verdict}</td><td class='n'>{cur.attrs['counts'][verdict]}</td>" in section
    plan = curation.forecast(report_db, cur)
    best = plan[plan.recommended].iloc[0]
    assert f"With {int(best.k)} attempts per sample (the fewest that reach" in section
    assert "Learning signal along training" in section and section.count("plotly-graph-div") == 1
    assert "rolloutlab curate --run base --out DIR --to openai-rft|verl|trl|jsonl" in section
    headline = _section(html, "headline")
    sentence = detectable_sentence(power(report_db, "base", "cand"))
    assert "could detect differences of ±" in sentence and esc(sentence) in headline
    # no labels: how to make them
    calibration = _section(html, "calibration")
    assert "<h2>Graders against people's labels</h2>" in calibration
    assert "No rollout of base or cand is labelled" in calibration and "rolloutlab labels sample --run cand" in calibration
    assert "rl.label(con, rollout_id" in calibration


def test_how_it_fails_section(report_db):
    """The failure-mode diff's sentence leads; each mode with its change and one example, whose
    planted script in the final answer is shown as text."""
    from rolloutlab.analysis import failure_modes as failures
    from rolloutlab.text.htmltext import esc

    html = rl.build_report(report_db, "base", "cand", n_boot=200, progress=False)
    section = _section(html, "how-it-fails")
    assert "<h2>How it fails</h2>" in section and "plotly-graph-div" in section  # the dumbbell
    diff = failures.failure_modes_diff(report_db, "base", "cand", n_boot=200)
    assert f"<p class='verdict' id='failures-lead'>{esc(failures.diff_sentence(diff))}</p>" in section
    assert "removed F1" in failures.diff_sentence(diff)  # the base's half-failing samples pass in cand
    f1 = diff.set_index("mode").loc["F1"]
    assert f"<td class='n'>{f1.rate_diff * 100:+.3g} pp</td>" in section  # -50 pp
    assert f1.verdict == "fixed" and f1.p_adjusted <= 0.05
    assert "adjusted across the modes by Holm (family-wise error), to be at most 0.05" in section
    assert "blind to which run each failure came from" in section and "p (adjusted)" in section
    assert f"{f1.examples_base[0]} (base)" in section  # a fixed mode's example is the base's
    cand_mode = diff[diff.candidate_rollouts > 0].iloc[0]
    assert f"{cand_mode.examples_candidate[0]} (cand)" in section
    assert "<script>window.__pwned" not in section and "<img src=x" not in section
    assert "<span class='long'>&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=" in section


def test_cost_section(load, con):
    """Per run: dollars from logs and price table; a model without a price says "no price" (never
    $0, escaped); the frontier; the planned step's rollout cost, training fees not included."""
    import warnings

    from rolloutlab.text import fmt
    from rolloutlab.analysis.metrics.costs import cost, job_cost

    records = []
    for i in range(8):
        for j in range(2):
            usage = {"input_tokens": 1000 * (i + 1), "output_tokens": 200 + 10 * j}
            logged = {"cost_usd": 0.01 * (i + 1)} if i % 2 == 0 else {}
            records.append(rollout("base", f"s{i}", float((i + j) % 2), ["search"], model="gpt-4.1-mini",
                                   usage=usage, **logged))
            records.append(rollout("cand", f"s{i}", float(i % 3 != 0), ["search"], model="my-model <b>x</b>",
                                   usage=usage, step=5))
    load(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        html = rl.build_report(con, "base", "cand", n_boot=100, progress=False, batch_size=30, compute_multiplier=2)
    assert not [w for w in caught if "no price" in str(w.message)]  # said in the report instead
    section = _section(html, "cost")
    assert "<h2>Cost</h2>" in section and "plotly-graph-div" in section  # the frontier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = cost(con, ["base", "cand"]).set_index("run").loc["base"]
    assert (f"<td>logs and price table as of ") in section
    for v in (base.cost_per_rollout, base.cost_per_solved, base.cost_total):
        assert f"<td class='n'>{fmt.dollars(v)}</td>" in section
    cand_row = re.search(r"<tr><td class='w'>cand</td>.*?</tr>", section).group(0)
    assert cand_row.count("no price") == 4 and "$0" not in cand_row and "&lt;b&gt;x&lt;/b&gt;" in cand_row
    assert "<b>x</b>" not in section and "model my-model &lt;b&gt;x&lt;/b&gt; is not in the price table" in section
    step = job_cost(con, "base", samples=30, compute_multiplier=2, n_boot=100).set_index("scope").loc["step"]
    assert "30 × 2 = 60 rollouts" in section
    assert f"{fmt.dollars(step.cost_usd)} per step (95% CI {fmt.dollars(step.ci_low)}" in section
    assert "platform training fees not included" in section
    # beside the endpoint load
    assert html.index("<section id='capacity'>") < html.index("<section id='cost'>") < html.index("<section id='training'>")


def test_grader_calibration_section(report_db):
    """With labels on cand's rollouts: the calibration table of cand (labelled count, false
    passes), its findings; base has none."""
    from rolloutlab.analysis.calibration import findings, grader_calibration, report_table
    from rolloutlab.text.htmltext import esc

    ids = report_db.execute("SELECT rollout_id, score FROM rollouts WHERE run_id = 'cand' ORDER BY rollout_id").fetchall()
    for rid, score in ids[:10]:
        rl.label(report_db, rid, "fail" if score == 1.0 else "pass", note=EVIL, who="<i>me</i>")
    html = rl.build_report(report_db, "base", "cand", n_boot=100, progress=False)
    section = _section(html, "calibration")
    cal = grader_calibration(report_db, "cand")
    table = report_table(cal)
    assert "<h3>cand: 10 labelled rollouts</h3>" in section and "base</h3><p class='note'>No labelled rollout." in section
    row = table.iloc[0]
    assert f"<td class='n'>{row['labelled']}</td>" in section and esc(row["kappa"]) in section
    assert esc(row["corrected by labels (PPI)"]) in section
    said = findings(cal)
    assert said and all(esc(f) in section for f in said)  # the score passes what the labels fail
    assert "window.__pwned" not in section and "<i>me</i>" not in section


def test_a_failing_section_does_not_kill_the_report(report_db, monkeypatch):
    from rolloutlab.views import report

    def broken(*args, **kwargs):
        raise RuntimeError("price table <b>unreadable</b>")

    monkeypatch.setattr(report.build, "cost_html", broken)
    html = rl.build_report(report_db, "base", "cand", n_boot=50, progress=False)
    section = _section(html, "cost")
    assert "<h2>Cost</h2>" in section and "could not be built: RuntimeError: price table &lt;b&gt;unreadable" in section
    assert "<a href='#cost'>Cost</a> <span class='failed'>(failed)</span>" in html
    assert "<section id='training'>" in html and "<section id='methods'>" in html  # the rest is there
    assert html.count("could not be built") == 1
    with pytest.raises(ValueError):  # runs that are not there are still an error, not a report of failures
        rl.build_report(report_db, "base", "nope", n_boot=50, progress=False)


def test_a_check_s_share_reads_as_a_percentage_wherever_it_is_shown():
    """The report and `rolloutlab check` write a check's value by its kind (readiness.SHARE_CHECKS):
    the truncated share read 0.00502 before."""
    from rolloutlab.analysis.readiness import CHECKS, SHARE_CHECKS
    from rolloutlab.views.report import check_value

    assert check_value("truncation", 0.00502) == "0.5%" and check_value("signal_share", 0.355) == "35.5%"
    assert check_value("dataset_size", 1200) == "1,200" and check_value("power", float("nan")) == ""
    names = {c.__name__.removeprefix("check_") for c in CHECKS}
    assert SHARE_CHECKS <= names, SHARE_CHECKS - names
