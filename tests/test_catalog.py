"""What is loaded: runs, sources, rejects."""
from __future__ import annotations

import rolloutlab as rl
from conftest import FIXTURES


def test_runs_counts(con):
    rl.ingest(con, [FIXTURES / "native" / "good.jsonl", FIXTURES / "native" / "bad.jsonl"])
    df = rl.runs(con).set_index("run")
    assert df.loc["base", ["rollouts", "samples", "infra_errors"]].tolist() == [5, 4, 1]
    # base has rows from both files: 0 + 15 rejects in its sources
    assert df.loc["base", "rejected_in_sources"] == 15
    assert df.loc["step10", ["rollouts", "samples", "rejected_in_sources", "step"]].tolist() == [1, 1, 0, 10]
    assert list(df.index) == ["base", "step10"]  # step-less first


def test_sources_and_rejects(con):
    rl.ingest(con, FIXTURES / "native" / "bad.jsonl")
    src = rl.sources(con)
    assert src.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["native", 17, 2, 15]
    rej = rl.rejects(con)
    assert len(rej) == 15 and rej.line_no.tolist()[:3] == [2, 3, 4]
    assert rl.rejects(con, source_id=99).empty
