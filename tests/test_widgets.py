"""Explorer logic: filters, paging, sorting, selection, compare mode, escaping; and the widget."""
from __future__ import annotations

import pytest

import rolloutlab as rl
from rolloutlab import widgets as wd
from conftest import rollout

EVIL = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"


@pytest.fixture
def con_x(load):
    records = [rollout("base", f"s{i}", i / 10, ["search"] * (i % 5), answer=f"answer {i}", latency=float(i))
               for i in range(10)]
    records += [rollout("cand", f"s{i}", 1.0, ["search"]) for i in range(3)]
    records.append(rollout("base", "evil", 1.0, ["cat", "cat"], answer=EVIL, rollout_id="r-evil", turns=[0, 0]))
    records.append(rollout("base", "s1", None, ["search"], status="infra_error", answer=None))
    return load(records)


def test_filters(con_x):
    f = wd.Filters(runs=("base",))
    rows, total = wd.page(con_x, f)
    assert total == 12 and len(rows) == 12
    assert wd.page(con_x, wd.Filters(runs=("base", "cand")))[1] == 15
    assert wd.page(con_x, wd.Filters(runs=("base",), score_min=0.5, score_max=0.8))[1] == 4  # 0.5 .. 0.8
    assert wd.page(con_x, wd.Filters(runs=("base",), statuses=("infra_error",)))[1] == 1
    assert wd.page(con_x, wd.Filters(runs=("base",), calls_min=4, calls_max=4))[1] == 2  # s4, s9
    assert wd.page(con_x, wd.Filters(runs=("base",), search="ANSWER 7"))[0].sample_id.tolist() == ["s7"]
    assert wd.page(con_x, wd.Filters(runs=("base",), search="R-EVIL"))[0].sample_id.tolist() == ["evil"]
    assert wd.page(con_x, wd.Filters(runs=("base",), search="'); DROP TABLE rollouts; --"))[1] == 0
    assert con_x.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 15


def test_paging_and_sorting(con_x):
    f = wd.Filters(runs=("base",), page_size=5, sort="latency", descending=True)
    first, total = wd.page(con_x, f)
    assert total == 12 and first.latency_s.tolist() == [9.0, 8.0, 7.0, 6.0, 5.0]
    third, _ = wd.page(con_x, wd.Filters(runs=("base",), page_size=5, sort="latency", descending=True, page=2))
    assert len(third) == 2
    with pytest.raises(ValueError, match="sort by one of"):
        wd.page_sql(wd.Filters(sort="score; DROP TABLE rollouts"))


def test_missing_values_render_empty(con_x):
    rows, total = wd.page(con_x, wd.Filters(runs=("base",), statuses=("infra_error",)))
    assert rows.final_answer.isna().all()
    assert "<td></td></tr>" in wd.table_html(rows, total, wd.Filters())
    assert "final answer: <code class='rl-answer'></code>" in wd.trajectory_html(wd.trajectory(con_x, rows.rollout_id[0]))


def test_table_and_trajectory_escape_log_text(con_x):
    rows, total = wd.page(con_x, wd.Filters(runs=("base",), search="evil"))
    out = wd.table_html(rows, total, wd.Filters(runs=("base",)))
    assert "<script>" not in out and "&lt;script&gt;window.__pwned=1" in out
    assert "1 rollouts match · page 1 of 1" in out
    t = wd.trajectory(con_x, "r-evil")
    page = wd.trajectory_html(t)
    assert "<script>" not in page and "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "2 tool calls in 1 turns" in page


def test_timeline_puts_parallel_calls_side_by_side():
    import pandas as pd
    calls = pd.DataFrame({"tool": ["a", "b<i>", "c"], "turn_idx": [0, 0, 1], "status": ["ok", "ok", "error"],
                          "latency_s": [1.0, 1.0, 1.0], "error": [None, None, "HTTP 503"],
                          "started_at": pd.to_datetime(["2025-01-01 00:00:00", "2025-01-01 00:00:00",
                                                        "2025-01-01 00:00:02"]),
                          "ended_at": pd.to_datetime(["2025-01-01 00:00:01", "2025-01-01 00:00:01",
                                                      "2025-01-01 00:00:03"])})
    out = wd.timeline_html(calls, width=300)
    assert out.count("class='rl-bar'") == 3
    assert "top:0px" in out and "top:6px" in out and "top:24px" in out  # lanes within turn 0, then turn 1
    assert "background:#D55E00" in out and "HTTP 503" in out
    assert "b&lt;i&gt;" in out and "<i>" not in out
    assert "0 → 3.0 s" in out
    untimed = calls.assign(started_at=pd.NaT, ended_at=pd.NaT)
    assert "no timestamps in this format" in wd.timeline_html(untimed)


def test_compare_mode_shows_attempts_per_run(con_x):
    rows = wd.attempts(con_x, "s1", ["base", "cand"])
    assert rows.run.tolist() == ["base", "base", "cand"]
    out = wd.attempts_html(rows, ["base", "cand"])
    assert out.count("<div class='rl-col'>") == 2


def test_widget_builds_and_follows_a_filter_change(con_x):
    app = rl.explore(con_x)
    filters, table, _, picker_row, detail = app.children
    assert "15 rollouts match" in table.value
    search = filters.children[3]
    search.value = "answer 3"
    assert "1 rollouts match" in table.value
    filters.children[1].value = (0.5, 1.0)  # the score slider
    assert "0 rollouts match" in table.value
    filters.children[1].value = (0.0, 1.0)
    pick = picker_row.children[0]
    assert len(pick.options) == 1
    pick.value = pick.options[0][1]
    assert "final answer: <code class='rl-answer'>answer 3</code>" in detail.value
    picker_row.children[1].value = True  # compare mode
    assert "rl-compare" in detail.value
