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
    assert f"{score.base:.3f} → {score.candidate:.3f}" in html
    assert f"{cmp.attrs['wins']} / {cmp.attrs['ties']} / {cmp.attrs['losses']}" in html
    assert "6.0 → 2.0" in html  # tool calls per rollout
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    # outside plotly.js itself (whose logo link is no request), nothing points to the network
    page_only = html.replace(html[html.index("<script"):html.index("</script>") + 9], "", 1)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page_only), "no external resources"
    for section in ("headline", "readiness", "variance", "tool-calls", "latency", "per-sample", "training",
                    "methods"):
        assert f"<section id='{section}'>" in html
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
    assert f"{score.base:.3f} → {score.candidate:.3f}" in text
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
    assert "What the trainer reported" in section and "ftjob-abc123" in section and "sample_parse_error_mean" in section


def test_graders_and_suspects_sections(load, con):
    """Both sections from planted synthetic data; an injected answer is escaped."""
    from rolloutlab import synth

    records, planted = synth.generate_judged(samples=60, attempts=3, seed=2, hack_rate=0.05)
    evil = next(r for r in records if planted.get(r["rollout_id"]) == "grader_injection")
    evil["final_answer"] = EVIL + synth.INJECTION
    load(records)
    html = rl.build_report(con, "base", "step10", n_boot=100, progress=False)
    graders = html[html.index("<section id='graders'>"):]
    graders = graders[:graders.index("</section>")]
    assert "grader:judge" in graders and "grader:answer" in graders and "Where graders disagree" in graders
    suspects = html[html.index("<section id='suspects'>"):]
    suspects = suspects[:suspects.index("</section>")]
    n = len(rl.audit(con, "step10", base="base"))
    assert f"{n} suspect rollouts" in suspects and "grader_injection" in suspects
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
    assert "<td>40</td>" in section and "<td>20</td>" in section  # projected peaks (test_capacity)
    assert "<b>cat</b>" not in section and "&lt;b&gt;cat&lt;/b&gt;" in section
