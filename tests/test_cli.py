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
    assert "17 records, 2 loaded, 15 rejected" in out
    assert f"{BAD}:2: field 'score' must be a number" in out
    assert out.count(f"{BAD}:") == 5 + 1  # the file line plus the first five reasons
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
    assert len(rows) == 15 and rows[-1]["line_no"] == 18
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
    assert f"{BAD}: failed" in out and f"{BAD}: could not be loaded (KeyError: 'surprise')" in out
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
    assert [(r["run"], r["rollouts"]) for r in runs] == [("base", 3), ("step10", 1)]


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
    assert [r["tool"] for r in rows][0] == "(all)" and {r["tool"] for r in rows} == {"(all)", "search", "list", "cat"}
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
    assert score_line.rstrip().endswith("*")
    assert main(["compare", "--db", str(db_path), "--base", "b", "--candidate", "c", "--json", "--n-boot", "100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["samples"] == {"shared": 10, "base_only": 0, "candidate_only": 1, "unscored": 0}
    assert doc["win_tie_loss"] == {"wins": 10, "ties": 0, "losses": 0}
    score = next(m for m in doc["metrics"] if m["metric"] == "score")
    assert (score["base"], score["candidate"], score["diff"], score["significant"]) == (0.0, 1.0, 1.0, True)
    assert [m["metric"] for m in doc["metrics"]][-2:] == ["latency_p50", "latency_p95"]


def test_audit(tmp_path, capsys):
    from rolloutlab import synth

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
    score = next(line for line in out.splitlines() if line.strip().startswith("score")).split()
    # paired over 39 samples: 0.256 -> 1; no sign-flip of 29 gains reaches them: p = 1/2001 reads < 0.001
    assert score[1:4] == [f"{10 / 39:.3g}", "1", f"+{29 / 39:.3g}"] and score[-3:] == ["<", "0.001", "*"]
    tokens_line = next(line for line in out.splitlines() if line.strip().startswith("tokens_per_rollout")).split()
    assert tokens_line[1:4] == ["40,041", "6,001", f"{6_001 - tokens:,.0f}"] and not scientific.search(out)

    assert main(["capacity", "--db", str(db_path), "--run", "obs"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.split()[:1] == ["(all)"]).split()
    assert line[1:3] == ["5", f"{5 / 3:.3g}"]  # calls, calls per rollout: 1.67, not 1.667
