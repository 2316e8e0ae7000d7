"""Identity: a rollout is one row whatever file brings it; a run is one (label, evaluation, step, split)."""
from __future__ import annotations

import json

import pytest

import rolloutlab as rl
from conftest import write_jsonl


def records(run="job1", steps=(1, 2, 3), samples=5, attempts=2, split="train", **extra):
    """What a training job writes: the same samples at every step, attempts numbered from 0."""
    return [{"run": run, "step": step, "split": split, "sample_id": f"s{s}", "attempt": a,
             "score": round((((step or 0) * 7 + s * 3 + a) % 10) / 10, 1), **extra}
            for step in steps for s in range(samples) for a in range(attempts)]


def read_adds_up(result) -> bool:
    return bool((result.records == result.loaded + result.duplicates + result.rejected).all())


def test_a_training_run_with_steps_keeps_every_step(con, tmp_path):
    path = write_jsonl(tmp_path / "job1.jsonl", records())
    result = rl.ingest(con, path)
    assert result.loc[0, ["records", "loaded", "duplicates", "rejected"]].tolist() == [30, 30, 0, 0]
    assert result.runs[0] == ["job1-step1", "job1-step2", "job1-step3"]
    runs = rl.runs(con).set_index("run")
    assert runs.loc[["job1-step1", "job1-step2", "job1-step3"], "step"].tolist() == [1, 2, 3]
    assert set(runs.label) == {"job1"} and set(runs.rollouts) == {10}
    # every step's attempts as the producer numbered them
    assert con.execute("SELECT count(*) FROM rollouts WHERE attempt <> attempt_raw").fetchone() == (0,)
    steps = rl.by_step(con)
    assert steps.step.tolist() == [1, 2, 3]
    want = [sum(r["score"] for r in records() if r["step"] == step) / 10 for step in (1, 2, 3)]
    assert steps.mean_score.tolist() == pytest.approx(want)
    # the label names all its runs where a view takes several, and must name one where it takes one
    assert rl.summary(con, "job1").run.tolist() == ["job1-step1", "job1-step2", "job1-step3"]
    with pytest.raises(rl.UnknownRunError, match=r"'job1' is a label of 3 runs \(job1-step1, job1-step2, job1-step3\)"):
        rl.check(con, "job1")


def test_train_and_valid_under_one_label_are_two_runs_and_leak(con, tmp_path):
    rows = records(steps=(None,), split="train") + records(steps=(None,), split="valid")
    for r in rows:
        r["prompt"] = f"question {r['sample_id']}"
    result = rl.ingest(con, write_jsonl(tmp_path / "job.jsonl", rows))
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [20, 20, 0]
    assert sorted(rl.runs(con).run) == ["job1-train", "job1-valid"]
    leak = rl.check(con, "job1-valid").set_index("check").loc["split_leakage"]
    assert leak.status == "fail" and leak.value == 10  # 5 sample ids + 5 prompts in both splits


def test_names_follow_the_keys_loaded(con, tmp_path):
    one = write_jsonl(tmp_path / "step1.jsonl", records(steps=(1,)))
    rl.ingest(con, one)
    assert rl.runs(con).run.tolist() == ["job1"]  # one step: the label is the run
    two = write_jsonl(tmp_path / "step2.jsonl", records(steps=(2,)))
    result = rl.ingest(con, two)
    assert result.runs[0] == ["job1-step2"]
    assert rl.runs(con).run.tolist() == ["job1-step1", "job1-step2"]  # the first run renamed, its rollouts moved
    assert con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'job1-step1'").fetchone() == (10,)
    two.write_text("")  # its records gone: the label is one run again
    rl.ingest(con, two)
    assert rl.runs(con).run.tolist() == ["job1"]
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM rollouts").fetchone() == (10, 1)


def test_the_same_rollouts_from_copies_load_once_and_other_files_stay_apart(con, tmp_path):
    lines = records(steps=(1,))
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = write_jsonl(tmp_path / "a" / "job.jsonl", lines[:6])
    snapshot = write_jsonl(tmp_path / "b" / "job.jsonl", lines[3:])  # the same log elsewhere: lines 4-6 again
    result = rl.ingest(con, [first, snapshot])
    assert result[["records", "loaded", "duplicates", "rejected"]].values.tolist() == [[6, 6, 0, 0], [7, 4, 3, 0]]
    assert read_adds_up(result)
    assert con.execute("SELECT count(*) FROM rollouts").fetchone() == (10,)
    assert any("3 record(s) are rollouts already loaded from" in r for r in result.reasons[1])
    assert con.execute("SELECT count(*) FROM rejects").fetchone() == (0,)
    # four seeds of a run, one file each, identical records (attempt 0, 0/1 scores, nothing else):
    # different rollouts of different files, never merged (records that name no evaluation are
    # scoped by their file's name)
    rows = [[{"run": "s", "sample_id": f"q{j}", "attempt": 0, "score": float((i + j) % 3 == 0)} for j in range(3)]
            for i in range(4)]
    rows[3] = rows[0][::-1]  # seed 3 holds seed 0's very records (in another order: another file)
    seeds = [write_jsonl(tmp_path / f"seed{i}.jsonl", r) for i, r in enumerate(rows)]
    result = rl.ingest(con, seeds)
    assert result.loaded.tolist() == [3, 3, 3, 3] and result.duplicates.sum() == 0
    assert rl.summary(con, "s")[["rollouts", "attempts_max"]].values.tolist() == [[12, 4]]


def test_identical_lines_of_one_file_are_different_rollouts(con, tmp_path):
    # a deterministic agent: two attempts that hold exactly the same, no attempt numbers given
    same = {"run": "det", "sample_id": "s1", "score": 1.0, "final_answer": "4"}
    result = rl.ingest(con, write_jsonl(tmp_path / "det.jsonl", [same, same, same]))
    assert result.loc[0, ["loaded", "duplicates"]].tolist() == [3, 0]
    ids = [r[0] for r in con.execute("SELECT rollout_id FROM rollouts ORDER BY attempt").fetchall()]
    assert len(set(ids)) == 3 and ids[1] == ids[0] + ".1" and ids[2] == ids[0] + ".2"
    assert [r[0] for r in con.execute("SELECT attempt FROM rollouts ORDER BY attempt").fetchall()] == [0, 1, 2]
    # the same file again under another name, byte for byte: nothing new
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((tmp_path / "det.jsonl").read_bytes())
    assert rl.ingest(con, copy).action.tolist() == ["unchanged"]


def test_attempt_numbers_that_collide_across_files_are_renumbered_never_rejected(con, tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"run": "r", "sample_id": "s1", "attempt": 0, "score": 1.0}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"run": "r", "sample_id": "s1", "attempt": 0, "score": 0.0},
                                           {"run": "r", "sample_id": "s1", "attempt": 0, "score": 0.5}])
    result = rl.ingest(con, [a, b])
    assert result.loaded.tolist() == [1, 2] and result.rejected.tolist() == [0, 0]
    got = con.execute("SELECT score, attempt, attempt_raw FROM rollouts ORDER BY attempt").fetchall()
    assert got == [(1.0, 0, 0), (0.0, 1, 0), (0.5, 2, 0)]


def test_a_file_replaced_gives_its_rollouts_back_to_the_file_that_repeated_them(con, tmp_path):
    lines = records(steps=(1,))
    (tmp_path / "live").mkdir(), (tmp_path / "backup").mkdir()
    a = write_jsonl(tmp_path / "live" / "job.jsonl", lines)
    b = write_jsonl(tmp_path / "backup" / "job.jsonl", lines[:4])  # a snapshot of a's start
    rl.ingest(con, [a, b])
    assert rl.sources(con).duplicates.tolist() == [0, 4]
    write_jsonl(a, records(run="other", steps=(1,)))  # a now holds something else
    result = rl.ingest(con, a)
    assert result.action.tolist() == ["replaced", "replaced"]  # b read again: it holds 4 of job1's rollouts
    assert "read again" in result.reasons[1][0]
    assert dict(con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY 1").fetchall()) == {"job1": 4, "other": 10}
    assert rl.sources(con).set_index("path").loc[str(b.resolve()), ["loaded", "duplicates"]].tolist() == [4, 0]


def test_merge_and_rename_are_kept_across_reingest(con, tmp_path):
    def evaluation(name, created, ids):
        return [{"run": "m/t", "run_meta": {"evaluation": name, "tag": created}, "sample_id": f"q{i}", "attempt": 0,
                 "score": i % 2} for i in ids]
    a = write_jsonl(tmp_path / "a.jsonl", evaluation("E1", "2025-01-01T00:00:00", range(3)))
    b = write_jsonl(tmp_path / "b.jsonl", evaluation("E2", "2025-01-02T00:00:00", range(2, 5)))
    rl.ingest(con, [a, b])
    assert sorted(rl.runs(con).run) == ["m/t@2025-01-01T00:00:00", "m/t@2025-01-02T00:00:00"]
    assert rl.merge_runs(con, ["m/t"], "m/t (both)") == "m/t (both)"  # a label names all its runs
    assert rl.runs(con).run.tolist() == ["m/t (both)"]
    # q2 held attempt 0 twice: the second is attempt 1, its producer's number kept
    assert con.execute("SELECT attempt, attempt_raw FROM rollouts WHERE sample_id = 'q2' ORDER BY attempt").fetchall() \
        == [(0, 0), (1, 0)]
    write_jsonl(b, evaluation("E2", "2025-01-02T00:00:00", range(2, 6)))  # b grew... as a rewrite
    rl.ingest(con, b)
    assert rl.runs(con).run.tolist() == ["m/t (both)"]
    assert rl.runs(con).rollouts.tolist() == [7]
    assert rl.rename_run(con, "m/t (both)", "final") == "final"
    rl.ingest(con, write_jsonl(tmp_path / "c.jsonl", evaluation("E1", "2025-01-01T00:00:00", range(7, 9))))
    assert rl.runs(con).run.tolist() == ["final"] and rl.runs(con).rollouts.tolist() == [9]


def test_merges_that_make_no_run_are_refused(con, db_path, tmp_path):
    rl.ingest(con, write_jsonl(tmp_path / "job.jsonl", records()))
    with pytest.raises(rl.RunNameError, match="different steps or splits"):
        rl.merge_runs(con, ["job1-step1", "job1-step2"], "both")
    # a record that named no step is a run of its own; it may join the run of the step it belongs to
    rl.ingest(con, write_jsonl(tmp_path / "late.jsonl", [{"run": "job1", "split": "train", "sample_id": "s9",
                                                           "status": "infra_error"}]))
    assert rl.runs(con).run.tolist() == ["job1", "job1-step1", "job1-step2", "job1-step3"]  # job1: no step
    rl.merge_runs(con, ["job1", "job1-step3"], "job1-step3")
    assert rl.runs(con).set_index("run").loc["job1-step3", ["step", "rollouts"]].tolist() == [3, 11]
    rl.ingest(con, write_jsonl(tmp_path / "other.jsonl", records(run="other", steps=(1,))))
    with pytest.raises(rl.RunNameError, match="exists already: to make the two one run, merge them"):
        rl.rename_run(con, "other", "job1-step1")
    with pytest.raises(rl.RunNameError, match="cannot name a run"):
        rl.rename_run(con, "other", " spaced ")
    con.close()
    with rl.connect(db_path, read_only=True) as reader, pytest.raises(rl.StoreError, match="needs it open for writing"):
        rl.rename_run(reader, "other", "renamed")


def test_every_file_adds_up(con, tmp_path):
    """read = loaded + duplicates + rejected, and no reject says 'duplicate'."""
    good = write_jsonl(tmp_path / "good.jsonl", records())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(records()[0]) + "\n{not json\n" + json.dumps({**records()[1], "score": "x"}) + "\n")
    result = rl.ingest(con, [good, bad])
    assert read_adds_up(result)
    # bad.jsonl's first line is good.jsonl's first record, in a file of another name: its own rollout
    assert result[["loaded", "duplicates", "rejected"]].values.tolist() == [[30, 0, 0], [1, 0, 2]]
    assert con.execute("SELECT count(*) FROM rejects WHERE reason ILIKE '%duplicate%'").fetchone() == (0,)


def test_a_replaced_file_never_takes_another_files_own_rollouts(con, tmp_path):
    x, y, z = ({"run": "r", "sample_id": s, "score": 1.0} for s in "xyz")
    (tmp_path / "d1").mkdir(), (tmp_path / "d2").mkdir()
    a = write_jsonl(tmp_path / "d1" / "log.jsonl", [x, y])
    b = write_jsonl(tmp_path / "d2" / "log.jsonl", [y, z])  # its y is a's y; its z its own
    rl.ingest(con, [a, b])
    assert rl.sources(con)[["loaded", "duplicates"]].values.tolist() == [[2, 0], [1, 1]]
    b.rename(tmp_path / "d2" / "moved.jsonl")
    write_jsonl(a, [x])  # a loses y
    result = rl.ingest(con, a)
    assert "no longer at its path" in result.reasons[1][0]
    assert sorted(r[0] for r in con.execute("SELECT sample_id FROM rollouts").fetchall()) == ["x", "z"]
    assert rl.sources(con)[["loaded", "duplicates"]].values.tolist() == [[1, 0], [1, 0]]


def test_merges_and_names_come_back_from_a_lake(con, tmp_path):
    def evaluation(name, ids):  # evaluations that give no tag: told apart by their ids
        return [{"run": "m/t", "run_meta": {"evaluation": f"eval-2025-06-01-{name}"}, "sample_id": f"q{i}",
                 "score": 1.0} for i in ids]
    rl.ingest(con, [write_jsonl(tmp_path / f"{n}.jsonl", evaluation(n, range(2))) for n in ("seed1", "seed2", "seed3")])
    runs = sorted(rl.runs(con).run)
    assert len(runs) == 3 and len({r.split("@")[1] for r in runs}) == 3  # three evaluations, three names
    rl.merge_runs(con, runs[:2], "m/t both")
    rl.rename_run(con, runs[2], "third")
    rl.export(con, tmp_path / "lake")
    back = rl.connect(tmp_path / "back.duckdb")
    rl.ingest(back, tmp_path / "lake")
    rl.ingest(back, write_jsonl(tmp_path / "later.jsonl", evaluation("seed1", range(5, 7))))
    assert rl.runs(back).set_index("run").rollouts.to_dict() == {"m/t both": 6, "third": 2}
    back.close()


@pytest.mark.parametrize("order", ["job first", "label first", "job grown"])
def test_a_label_keeps_its_own_name_whatever_loaded_first(con, tmp_path, order):
    job = write_jsonl(tmp_path / "job.jsonl", records(steps=(1, 2), samples=1, attempts=1))
    step1 = write_jsonl(tmp_path / "step1.jsonl", records(steps=(1,), samples=1, attempts=1))
    other = write_jsonl(tmp_path / "other.jsonl", [{"run": "job1-step1", "sample_id": "x", "score": 1.0}])
    if order == "job first":
        rl.ingest(con, [job, other])
    elif order == "label first":
        rl.ingest(con, [other, job])
    else:
        rl.ingest(con, [step1, other])
        step1.write_text(job.read_text())
        rl.ingest(con, step1)
    runs = rl.runs(con).set_index("run")
    assert runs.loc["job1-step1", "label"] == "job1-step1"  # the label's own name
    mine = runs[runs.label == "job1"].index.tolist()
    assert sorted(mine)[1] == "job1-step2" and mine[0].startswith("job1-step1~")
