"""What is loaded: runs, sources, rejects."""
from __future__ import annotations

import rolloutlab as rl
from conftest import FIXTURES


def test_runs_counts(con):
    rl.ingest(con, [FIXTURES / "native" / "good.jsonl", FIXTURES / "native" / "bad.jsonl"])
    df = rl.runs(con).set_index("run")
    # label 'base' holds records of split 'valid' (good.jsonl line 1) and records naming no split: two runs
    # bad.jsonl's line 8 reuses line 1's id for another rollout: one of base's 5
    assert df.loc["base", ["label", "rollouts", "samples", "infra_errors"]].tolist() == ["base", 5, 5, 1]
    assert df.loc["base-valid", ["label", "split", "rollouts", "samples"]].tolist() == ["base", "valid", 1, 1]
    # base has rows from both files: 0 + 14 rejects in its sources
    assert df.loc["base", ["files", "rejected_in_sources", "duplicates_in_sources"]].tolist() == [2, 14, 0]
    assert df.loc["step10", ["rollouts", "samples", "rejected_in_sources", "step"]].tolist() == [1, 1, 0, 10]
    assert list(df.index) == ["base", "base-valid", "step10"]  # step-less first
    groups = rl.runs(con, group=True).set_index("label")
    # the file that holds both runs of base counts once, and its 14 rejects once
    assert groups.loc["base", ["runs", "rollouts", "files", "rejected_in_sources"]].tolist() == [2, 6, 2, 14]
    assert list(groups.loc["base", "run_names"]) == ["base", "base-valid"]


def test_sources_and_rejects(con):
    rl.ingest(con, FIXTURES / "native" / "bad.jsonl")
    src = rl.sources(con)
    assert src.loc[0, ["format", "records", "loaded", "duplicates", "rejected"]].tolist() == ["native", 17, 3, 0, 14]
    rej = rl.rejects(con)
    assert len(rej) == 14 and rej.line_no.tolist()[:3] == [2, 3, 4]
    assert rl.rejects(con, source_id=99).empty
