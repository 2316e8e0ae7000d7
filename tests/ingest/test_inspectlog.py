"""Inspect AI logs: the real .eval and .json files, and broken copies."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import rolloutlab as rl
from hypothesis import given
from hypothesis import strategies as st

from rolloutlab import config
from mutations import SETTINGS, assert_ingest_survives, mutated_document, mutated_zip
from conftest import FIXTURES, producer_python

EVAL = "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"
# written by inspect_ai 0.3.285 itself (tests/fixtures/README.md): every member zstd-compressed
ZSTD_EVAL = FIXTURES / "inspect" / "revenue-zstd.eval"
BROWSER = "2025-05-12T20-27-36-04-00_browser.json"

REAL = pytest.mark.skipif(not config.real_data_dir().is_dir(), reason="real logs not found (../shared/data/real)")


def test_real_eval_file(real_dir, con):
    path = real_dir / "inspect" / EVAL
    assert rl.detect_format(path) == "inspect"
    with zipfile.ZipFile(path) as zf:
        samples = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
    result = rl.ingest(con, path)
    assert result.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["inspect", 10, 10, 0]
    letters = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
    want = {f"popularity:{s['id']}": letters[s["scores"]["match"]["value"]] for s in samples}
    got = dict(con.execute("SELECT sample_id, score FROM rollouts").fetchall())
    assert got == want
    tokens = {f"popularity:{s['id']}": sum(u["input_tokens"] + (u.get("input_tokens_cache_read") or 0)
                                           + (u.get("input_tokens_cache_write") or 0)
                                           for u in s["model_usage"].values()) for s in samples}
    assert dict(con.execute("SELECT sample_id, input_tokens FROM rollouts").fetchall()) == tokens
    assert rl.runs(con).run.tolist() == ["openai/gpt-4o-mini/popularity"]


def test_real_json_with_tool_calls(real_dir, con):
    path = real_dir / "inspect" / BROWSER
    log = json.loads(path.read_text())
    rl.ingest(con, path)
    [s] = log["samples"]
    row = con.execute("SELECT n_tool_calls, n_turns, latency_s, score FROM rollouts").fetchone()
    n_calls = sum(len(m.get("tool_calls") or []) for m in s["messages"] if m["role"] == "assistant")
    assert row == (n_calls, sum(1 for m in s["messages"] if m["role"] == "assistant" and m.get("tool_calls")),
                   pytest.approx(s["total_time"]), 1.0)
    tools = [r[0] for r in con.execute("SELECT tool FROM tool_calls ORDER BY call_idx").fetchall()]
    assert tools[0] == "web_browser_go"


def test_zstd_eval_from_a_current_inspect_ai(con):
    """3 samples x 2 epochs of a mock model that looks a revenue up, then answers; scorers match
    and includes. Expected values from the script that wrote the file (answers alternate)."""
    with zipfile.ZipFile(ZSTD_EVAL) as zf:
        assert {i.compress_type for i in zf.infolist()} == {93}
    assert rl.detect_format(ZSTD_EVAL) == "inspect"
    result = rl.ingest(con, ZSTD_EVAL)
    assert result.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["inspect", 6, 6, 0]
    rows = con.execute("""SELECT sample_id, attempt, score, final_answer, n_tool_calls, n_turns, input_tokens,
                                 output_tokens FROM rollouts ORDER BY attempt, sample_id""").fetchall()
    # output i of the mock: a lookup call (input 50 + i, output 10), then an answer (input 80 + i, output 5)
    want = []
    for i, (attempt, sample) in enumerate((a, s) for a in (0, 1) for s in ("q0", "q1", "q2")):
        right = i % 2 == 0
        want.append((f"revenue:{sample}", attempt, 1.0 if right else 0.0, "$28.9M" if right else "$17.7M",
                     1, 1, 130 + 2 * i, 15))
    assert rows == want
    grades = con.execute("SELECT grader, count(*), sum(score) FROM grades GROUP BY grader ORDER BY grader").fetchall()
    assert grades == [("includes", 6, 3.0), ("match", 6, 3.0)]
    calls = con.execute("SELECT DISTINCT tool, arguments->>'company' FROM tool_calls ORDER BY 2").fetchall()
    assert calls == [("lookup", "co0"), ("lookup", "co1"), ("lookup", "co2")]
    assert rl.runs(con).run.tolist() == ["mockllm/model/revenue"]


def test_corrupt_zstd_sample_is_rejected_and_the_rest_loads(con, tmp_path):
    raw = bytearray(ZSTD_EVAL.read_bytes())
    with zipfile.ZipFile(ZSTD_EVAL) as zf:
        info = zf.getinfo("samples/q1_epoch_1.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw[start + 20: start + 40] = b"\x00" * 20
    broken = tmp_path / "broken.eval"
    broken.write_bytes(bytes(raw))
    result = rl.ingest(con, broken)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [6, 5, 1]
    reason = con.execute("SELECT reason FROM rejects").fetchone()[0]
    assert reason.startswith("sample q1 epoch 1: samples/q1_epoch_1.json in the zip is unreadable (MemberError")


def test_every_real_file_loads(real_dir, con):
    result = rl.ingest(con, real_dir / "inspect")
    assert (result.format == "inspect").all() and (result.rejected == 0).all()
    assert result.loaded.sum() == 10 + 1 + 3 + 3


def _copy_eval(real_dir, tmp_path, mutate):
    src = real_dir / "inspect" / EVAL
    dst = tmp_path / "copy.eval"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = mutate(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)
    return dst


def test_eval_with_a_corrupt_and_a_missing_sample(real_dir, con, tmp_path):
    def mutate(name, data):
        if name == "samples/3_epoch_1.json":
            return data[: len(data) // 2]  # corrupt
        if name == "samples/7_epoch_1.json":
            return None  # missing, though summaries.json lists it
        return data
    result = rl.ingest(con, _copy_eval(real_dir, tmp_path, mutate))
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [10, 8, 2]
    reasons = [r[0] for r in con.execute("SELECT reason FROM rejects ORDER BY line_no").fetchall()]
    assert reasons[0].startswith("sample 3 epoch 1: samples/3_epoch_1.json in the zip is unreadable (JSONDecodeError")
    assert reasons[1] == "sample 7 epoch 1: listed in summaries.json but missing from the zip"


def test_unreadable_scores_and_truncated_json(real_dir, con, tmp_path):
    log = json.loads((real_dir / "inspect" / "2025-05-12T20-28-13-04-00_popularity.json").read_text())
    log["samples"][1]["scores"] = {"match": {"value": "maybe"}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(log))
    result = rl.ingest(con, bad)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [3, 2, 1]
    assert con.execute("SELECT reason FROM rejects").fetchone()[0] == (
        "sample 2 epoch 1: scores that are neither letters (C, P, I, N) nor numbers: match=\"maybe\"")
    text = json.dumps(log, indent=1)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"reductions"') - 200] if '"reductions"' in text else text[:-500])
    result = rl.ingest(con, cut, format="inspect")
    assert result.loc[0, "rejected"] >= 1
    assert "invalid JSON at line" in con.execute(
        "SELECT reason FROM rejects WHERE source_id = ? ORDER BY line_no DESC", [int(result.source_id[0])]).fetchone()[0]


def test_score_values():
    from rolloutlab.ingest.formats.inspectlog import score_value

    assert [score_value(v) for v in ("C", "P", "I", "N", "c", 0.25, True, "0.75", "x", None)] == \
        [1.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0, 0.75, None, None]


@REAL
@given(data=st.data())
@SETTINGS
def test_mutated_real_json_logs_never_crash(data):
    doc = json.loads((config.real_data_dir() / "inspect" / "2025-05-12T20-28-13-04-00_popularity.json").read_text())
    assert_ingest_survives(data.draw(mutated_document(doc)), "log.json", "inspect")


@pytest.mark.parametrize("which", ["real deflate", "zstd fixture"])
@given(data=st.data())
@SETTINGS
def test_mutated_eval_zips_never_crash(which, data):
    path = ZSTD_EVAL if which == "zstd fixture" else config.real_data_dir() / "inspect" / EVAL
    if not path.exists():
        pytest.skip(f"real logs not found at {config.real_data_dir()}")
    from rolloutlab.ingest.ziparchive import Archive

    with Archive(path) as archive:
        members = {n: json.loads(archive.read(n)) for n in archive.names() if n.endswith(".json")}
    assert_ingest_survives(data.draw(mutated_zip(members)), "log.eval", "inspect")


def test_eval_samples_are_streamed_a_batch_at_a_time(con, monkeypatch):
    # Members are read as the batches load, never all at once: with batches of 2, the first batch
    # loads after 2 of the 6 samples were read.
    from rolloutlab.ingest import convert
    from rolloutlab.ingest.ziparchive import Archive

    reads, read_at_load = [], []
    real_read, real_load = Archive.read, convert.native.load
    monkeypatch.setattr(Archive, "read", lambda self, name: (reads.append(name), real_read(self, name))[1])
    monkeypatch.setattr(convert.native, "load", lambda ctx: (read_at_load.append(
        sum(n.startswith("samples/") for n in reads)), real_load(ctx))[1])
    monkeypatch.setattr(config, "CONVERT_BATCH_RECORDS", 2)
    assert rl.ingest(con, ZSTD_EVAL).loaded.tolist() == [6]
    assert read_at_load == [2, 4, 6]


# ---- separate eval runs of one task never collide (issue 24, point 1) -------------------------

def _another_run(real_dir, path, task_id="OtherRunTaskId0000000", created="2025-02-11T15:17:00-05:00"):
    """A copy of the real scored log as another eval of the same task: its own task_id, run_id and
    creation time, and no scores (inspect_ai's tests/scorer/logs hold such an unscored twin)."""
    with zipfile.ZipFile(real_dir / "inspect" / EVAL) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            data = json.loads(src.read(name))
            if name in ("header.json", "_journal/start.json"):
                data["eval"].update(task_id=task_id, run_id="OtherRun", created=created)
                data.pop("results", None)
            elif name.startswith("samples/"):
                data["scores"] = {}
            dst.writestr(name, json.dumps(data))
    return path


@pytest.mark.parametrize("scored_first", [True, False])
def test_two_eval_runs_of_one_task_are_two_runs(real_dir, con, tmp_path, scored_first):
    scored, unscored = real_dir / "inspect" / EVAL, _another_run(real_dir, tmp_path / "unscored.eval")
    files = [scored, unscored] if scored_first else [unscored, scored]
    result = rl.ingest(con, files)
    assert result.loaded.tolist() == [10, 10] and result.rejected.tolist() == [0, 0]
    # one label, two evaluations: each a run named by when it started, whichever loaded first
    scored_run, unscored_run = ("openai/gpt-4o-mini/popularity@2025-02-11T15:18:04",
                                "openai/gpt-4o-mini/popularity@2025-02-11T15:17:00")
    assert sorted(rl.runs(con).run) == sorted([scored_run, unscored_run])
    assert set(rl.runs(con).label) == {"openai/gpt-4o-mini/popularity"}
    summary = rl.summary(con).set_index("run")
    assert summary.loc[scored_run, "mean_score"] == pytest.approx(0.8)  # the log's own accuracy (header.json)
    assert summary.loc[unscored_run, "n_ungraded"] == 10
    dup = con.execute("SELECT count(*) FROM (SELECT run_id, sample_id, attempt FROM rollouts GROUP BY ALL "
                      "HAVING count(*) > 1)").fetchone()[0]
    assert dup == 0


def test_the_same_eval_in_a_json_and_an_eval_loads_once_and_says_so(real_dir, con, tmp_path):
    with zipfile.ZipFile(real_dir / "inspect" / EVAL) as zf:
        header = json.loads(zf.read("header.json"))
        samples = [json.loads(zf.read(n)) for n in zf.namelist() if n.startswith("samples/")]
    as_json = tmp_path / "same-eval.json"
    as_json.write_text(json.dumps({**header, "samples": samples}))
    result = rl.ingest(con, [real_dir / "inspect" / EVAL, as_json])
    # the twin's samples are the same rollouts: duplicates, loaded once, never rejects
    assert result.loaded.tolist() == [10, 0] and result.duplicates.tolist() == [0, 10]
    assert result.rejected.tolist() == [0, 0]
    note = result.reasons[1][0]
    assert "10 record(s) are rollouts already loaded from" in note and EVAL in note
    runs = rl.runs(con)
    assert runs.run.tolist() == ["openai/gpt-4o-mini/popularity"]
    assert runs[["rollouts", "files", "duplicates_in_sources", "rejected_in_sources"]].values.tolist() == [[10, 2, 10, 0]]
    assert con.execute("SELECT count(*) FROM rejects").fetchone() == (0,)


def test_a_sample_error_is_the_harness_not_the_model_and_a_limit_truncates(con, tmp_path):
    log = {"version": 2, "status": "error", "eval": {"task": "t", "model": "m", "task_id": "T1"}, "plan": {},
           "samples": [
               {"id": 1, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {},
                "scores": {"match": {"value": "I"}},
                "error": {"message": "RuntimeError: sandbox container exited", "traceback": "..."}},
               {"id": 2, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {},
                "scores": {"match": {"value": "I"}}, "limit": {"type": "message", "limit": 30}},
               {"id": 3, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {"completion": "a"},
                "scores": {"match": {"value": "C"}}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    rl.ingest(con, path)
    rows = con.execute("SELECT sample_id, status, stop_reason, stop_reason_raw, error FROM rollouts ORDER BY 1").fetchall()
    assert rows == [("t:1", "infra_error", "unknown", None, "RuntimeError: sandbox container exited"),
                    ("t:2", "truncated", "turn_limit", "limit: message", None), ("t:3", "ok", "unknown", None, None)]
    s = rl.summary(con).iloc[0]
    assert (s.n_excluded, s.mean_score) == (1, pytest.approx(0.5))  # the crash left out, counted


def test_cached_input_tokens_and_logged_cost(con, tmp_path):
    # inspect_ai's input_tokens leave out cache reads and writes (its OpenAI reader subtracts
    # prompt_tokens_details.cached_tokens); ours count them, the reads as cached_input_tokens.
    usage = {"openai/gpt-4o": {"input_tokens": 100, "output_tokens": 20, "input_tokens_cache_read": 900,
                               "input_tokens_cache_write": 50, "total_cost": 0.004},
             "openai/gpt-4o-mini": {"input_tokens": 10, "output_tokens": 5, "total_cost": 0.0001}}
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "openai/gpt-4o", "task_id": "T1"},
           "plan": {}, "samples": [
               {"id": 1, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {"completion": "a"},
                "scores": {"match": {"value": "C"}}, "model_usage": usage},
               {"id": 2, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {"completion": "a"},
                "scores": {"match": {"value": "C"}},
                "model_usage": {"openai/gpt-4o": {"input_tokens": 7, "output_tokens": 1}}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    rl.ingest(con, path)
    rows = con.execute("SELECT sample_id, input_tokens, cached_input_tokens, output_tokens, cost_usd "
                       "FROM rollouts ORDER BY 1").fetchall()
    assert rows[0][:4] == ("t:1", 100 + 900 + 50 + 10, 900, 25) and rows[0][4] == pytest.approx(0.0041)
    assert rows[1] == ("t:2", 7, None, 1, None)  # no cache reads logged: unknown, not 0; no cost logged


def test_tool_results_without_calls_keep_their_timeout(con, tmp_path):
    # inspect_ai's tests/log/test_eval_log/log_tool_call_error.json keeps 11 tool results and no calls
    messages = [{"role": "user", "content": "list files"}] + [
        {"role": "tool", "tool_call_id": f"call_{i}", "function": "bash", "content": "",
         "error": {"type": kind, "message": "..."}} for i, kind in enumerate(("parsing", "timeout", "permission"))]
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "m", "task_id": "T1"}, "plan": {},
           "samples": [{"id": 1, "epoch": 1, "input": "q", "target": "a", "messages": messages, "output": {}}]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    rl.ingest(con, path)
    assert con.execute("SELECT tool, status, error FROM tool_calls ORDER BY call_idx").fetchall() == [
        ("bash", "error", "parsing: ..."), ("bash", "error", "timeout: ..."), ("bash", "error", "permission: ...")]
    assert con.execute("SELECT n_tool_calls FROM rollouts").fetchone() == (3,)


# ---- against inspect_ai's own reader (issue 24: differential tests) --------------------------

READ_WITH_INSPECT = r'''
import json, sys
from inspect_ai.log import read_eval_log
out = []
for path in sys.argv[1:]:
    log = read_eval_log(path)
    for s in log.samples or []:
        calls = sum(len(m.tool_calls or []) for m in s.messages if m.role == "assistant")
        scores = {k: v.value for k, v in (s.scores or {}).items()}
        out.append({"file": path, "task": log.eval.task, "id": str(s.id), "epoch": s.epoch, "scores": scores,
                    "calls": calls, "input_tokens": sum(u.input_tokens + (u.input_tokens_cache_read or 0)
                                                     + (u.input_tokens_cache_write or 0) for u in s.model_usage.values()),
                    "output_tokens": sum(u.output_tokens for u in s.model_usage.values()), "error": s.error is not None})
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def inspect_python():
    """A venv of its own with inspect_ai (config.PRODUCER_PACKAGES), built once."""
    return producer_python("inspect_ai")


def test_every_inspect_log_matches_inspect_ais_own_reader(inspect_python, real_dir, con):
    import subprocess

    files = sorted((real_dir / "inspect").iterdir()) + [ZSTD_EVAL]
    theirs = json.loads(subprocess.run([str(inspect_python), "-c", READ_WITH_INSPECT, *map(str, files)],
                                       capture_output=True, text=True, check=True).stdout)
    rl.ingest(con, files, progress=False)
    ours = {(r[0], r[1], r[2]): r[3:] for r in con.execute(
        "SELECT s.path, sample_id, attempt, rollout_id, n_tool_calls, input_tokens, output_tokens, status "
        "FROM rollouts JOIN sources s USING (source_id)").fetchall()}
    grades = {}
    for rollout_id, grader, score in con.execute("SELECT rollout_id, grader, score FROM grades").fetchall():
        grades.setdefault(rollout_id, {})[grader] = score
    assert len(ours) == len(theirs)  # every sample x epoch, once
    letters = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
    for s in theirs:
        key = (str(Path(s["file"]).resolve()), f"{s['task']}:{s['id']}", s["epoch"] - 1)
        rollout_id, calls, tokens_in, tokens_out, status = ours[key]
        assert (calls, tokens_in or 0, tokens_out or 0) == (s["calls"], s["input_tokens"], s["output_tokens"]), s
        want = {k: letters.get(v, v) if not isinstance(v, bool) else float(v) for k, v in s["scores"].items()
                if not isinstance(v, dict)}
        assert {k: v for k, v in grades.get(rollout_id, {}).items() if k in want} == want, s
        assert (status == "infra_error") == s["error"], s


def test_runs_follow_the_evaluation_not_the_order(real_dir, con, tmp_path):
    # Without eval_id, an evaluation is its run_id, task_id and created together (as inspect_ai's
    # reader derives eval_id): A's two shards are one run, B another, whatever the order.
    def log(task_id, created, ids, name):
        samples = [{"id": i, "epoch": 1, "input": "q", "target": "a", "messages": [], "output": {},
                    "scores": {"match": {"value": "C"}}} for i in ids]
        path = tmp_path / name
        path.write_text(json.dumps({"version": 2, "status": "success", "plan": {}, "samples": samples,
                                    "eval": {"task": "t", "model": "m", "task_id": task_id, "created": created}}))
        return path
    b = log("B", "2025-01-01T00:00:00", [1, 2, 3], "b.json")
    a1, a2 = log("A", "2025-02-02T00:00:00", [1, 2, 3], "a1.json"), log("A", "2025-02-02T00:00:00", [4, 5, 6], "a2.json")
    rl.ingest(con, [a2, b, a1])
    runs = dict(con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY 1").fetchall())
    assert runs == {"m/t@2025-01-01T00:00:00": 3, "m/t@2025-02-02T00:00:00": 6}
    # b replaced with another evaluation's content: its run follows the file; B's run is gone, and
    # the two evaluations that share a start time are told apart by their ids
    b.write_text(a1.read_text().replace('"task_id": "A"', '"task_id": "C"'))
    rl.ingest(con, b)
    runs = dict(con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY 1").fetchall())
    assert sorted(runs.values()) == [3, 6] and all(r.startswith("m/t@2025-02-02T00:00:00~") for r in runs)
    assert con.execute("SELECT count(DISTINCT evaluation) FROM run_keys WHERE label = 'm/t'").fetchone() == (2,)


def test_an_odd_member_name_is_one_sample_not_the_whole_log(real_dir, con, tmp_path):
    # '²' is a digit to str.isdigit but not to int(): the log still loads, that sample included
    with zipfile.ZipFile(real_dir / "inspect" / EVAL) as src, zipfile.ZipFile(tmp_path / "odd.eval", "w") as dst:
        for name in src.namelist():
            dst.writestr(name.replace("samples/1_epoch_1", "samples/\u00b2_epoch_1"), src.read(name))
    result = rl.ingest(con, tmp_path / "odd.eval", format="inspect")
    assert result[["action", "records", "loaded"]].values.tolist() == [["loaded", 11, 10]]  # + summaries' sample 1


# ---- decoding a member without its transcript (issue 30) --------------------------------------

def _samples_of(path) -> dict[str, bytes]:
    from rolloutlab.ingest.ziparchive import Archive

    with Archive(path) as archive:
        return {n: archive.read(n) for n in archive.names() if n.startswith("samples/")}


@pytest.mark.parametrize("which", ["zstd fixture", "real deflate"])
def test_a_member_decodes_as_json_loads_reads_it_less_the_transcript(which):
    from rolloutlab.ingest.formats.inspectlog import EventTiming, SampleFields, decode_sample

    path = ZSTD_EVAL if which == "zstd fixture" else config.real_data_dir() / "inspect" / EVAL
    if not path.exists():
        pytest.skip(f"real logs not found at {config.real_data_dir()}")
    for name, data in _samples_of(path).items():
        whole = json.loads(data)
        decoded = decode_sample(data)
        timing = EventTiming.__struct_fields__  # of the transcript, only what times its events
        expected = {k: v for k, v in whole.items() if k in SampleFields.__struct_fields__}
        expected["events"] = [{k: e.get(k) for k in timing} for e in whole["events"]]
        assert decoded == expected, name
        assert "messages" in decoded and any(e["event"] == "model" for e in decoded["events"])


@pytest.mark.parametrize("data", [
    b'{"id": 1, "epoch": 1, "events": [NaN, -Infinity], "total_time": Infinity}',  # JSON msgspec refuses
    b'{"id": 1, "total_time": 1e400}',
    b'{"id": 123456789012345678901234567890, "target": "\\ud800"}',
    b'{"id": 1, "id": 2, "scores": {"a": {"value": "C"}, "a": {"value": "I"}}}',  # repeated keys: the last
    b'[{"id": 1}]',  # not an object: sample_item rejects it
    b'{"epoch": 2, "store": {"x": [1, 2]}, "attachments": {}}',  # nothing but skipped fields and an epoch
])
def test_a_member_msgspec_refuses_or_finds_odd_reads_as_json_loads_reads_it(data):
    from rolloutlab.ingest.formats.inspectlog import SampleFields, decode_sample

    whole = json.loads(data)
    want = {k: v for k, v in whole.items() if k in SampleFields.__struct_fields__} if isinstance(whole, dict) else whole
    assert repr(decode_sample(data)) == repr(want)  # repr: NaN is not equal to itself


@pytest.mark.parametrize("data", [b'{"id": 1', b'{"id": "\xff"}', b'{"id": 1} x', b'{"events": ' + b"[" * 100_000])
def test_an_unreadable_member_raises_what_json_loads_raises(data):
    from rolloutlab.ingest.formats.inspectlog import decode_sample

    with pytest.raises((ValueError, RecursionError)) as theirs:
        json.loads(data)
    with pytest.raises(type(theirs.value)):
        decode_sample(data)


def test_summaries_past_the_zip_limits_are_read_from_the_journal(con, tmp_path, monkeypatch):
    # 200,000 samples of a browser agent make a summaries.json of 530 MB, past the member cap: the
    # journal's summaries (one file per flush) still tell a sample missing from the zip
    members = {}
    from rolloutlab.ingest.ziparchive import Archive

    with Archive(ZSTD_EVAL) as archive:
        members = {n: archive.read(n) for n in archive.names()}
    members["summaries.json"] += b" " * 60_000  # still its JSON, now past the cap below
    del members["samples/q2_epoch_2.json"]
    path = tmp_path / "big-summaries.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    monkeypatch.setenv("ROLLOUTLAB_ZIP_MEMBER_MAX_BYTES", str(40_000))
    result = rl.ingest(con, path)
    assert result[["records", "loaded", "rejected"]].values.tolist() == [[6, 5, 1]]
    assert con.execute("SELECT reason FROM rejects").fetchone()[0] == \
        "sample q2 epoch 2: listed in the journal's summaries but missing from the zip"
    assert any("summaries.json is unreadable (MemberError" in r and "from its journal (3 summary files)" in r
               for r in result.reasons[0])
    # no journal either: nothing to tell, and the note says so
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            if not name.startswith("_journal/summaries/"):
                zf.writestr(name, data)
    result = rl.ingest(con, path)
    assert result[["action", "records", "loaded", "rejected"]].values.tolist() == [["replaced", 5, 5, 0]]
    assert any("samples missing from the zip cannot be told" in r for r in result.reasons[0])


def test_a_large_log_shows_a_bar_of_samples_while_ingest_shows_its_bar(monkeypatch):
    import io

    from tqdm.auto import tqdm

    from rolloutlab.ingest.formats import inspectlog

    monkeypatch.delenv("CI", raising=False)
    large = inspectlog.INSPECT_PROGRESS_MIN_SAMPLES
    assert not inspectlog._progress_shown(large)  # no ingest bar (progress=False, or not a terminal)
    with tqdm(total=1, desc="ingest", disable=True):
        assert not inspectlog._progress_shown(large)
    with tqdm(total=1, desc="ingest", file=io.StringIO(), disable=False):
        assert inspectlog._progress_shown(large)
        assert not inspectlog._progress_shown(large - 1)  # a small log: the bar of files says enough
        monkeypatch.setenv("CI", "true")
        assert not inspectlog._progress_shown(large)  # quiet in CI


# ---- identity (issue 33): evaluations, not task ids; tool timing from events -----------------

WRITE_SHARED_TASK_ID = r'''
import json, sys
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
out = sys.argv[1]


def answers(right):  # offline: usage given, so mockllm counts no tokens (no tokenizer download)
    def generate(input, tools, tool_choice, config):
        i = int(input[-1].text.split()[2].split("+")[0])
        output = ModelOutput.from_content(model="mockllm", content=str(2 * i) if right(i) else "0")
        output.usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
        return output
    return generate


task = Task(dataset=[Sample(input=f"What is {i}+{i}?", target=str(2 * i), id=i) for i in range(1, 6)],
            scorer=match(), name="arith")
models = [get_model("mockllm/a", custom_outputs=answers(lambda i: True)),
          get_model("mockllm/b", custom_outputs=answers(lambda i: i % 2 == 0))]
logs = [inspect_eval(task, model=m, log_dir=out + "/raw", display="none")[0] for m in models]
for i, log in enumerate(logs):  # as vitals writes them: one task_id for both, no sample uuid
    log.eval.task_id = logs[0].eval.task_id
    for s in log.samples:
        s.uuid = None
    write_eval_log(log, f"{out}/eval-{i}.json", format="json")
print(json.dumps([{"model": l.eval.model, "status": l.status,
                   "scores": [v.value for s in l.samples for v in s.scores.values()]} for l in logs]))
'''


def test_evaluations_that_share_a_task_id_never_merge(inspect_python, con, tmp_path):
    """Logs written by inspect_ai itself, two models, one task_id, no sample uuids (what vitals
    writes): two runs, every sample of each, nothing rejected; the same logs again add nothing."""
    import subprocess

    done = subprocess.run([str(inspect_python), "-c", WRITE_SHARED_TASK_ID, str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t["status"] for t in theirs] == ["success", "success"] and [len(t["scores"]) for t in theirs] == [5, 5]
    paths = [tmp_path / "eval-0.json", tmp_path / "eval-1.json"]
    result = rl.ingest(con, paths)
    assert result[["records", "loaded", "duplicates", "rejected"]].values.tolist() == [[5, 5, 0, 0], [5, 5, 0, 0]]
    runs = rl.runs(con).set_index("run")
    assert sorted(runs.index) == ["mockllm/a/arith", "mockllm/b/arith"]
    letters = {"C": 1.0, "I": 0.0}
    for t, want in zip(theirs, (1.0, 0.4)):  # b answers 2 of 5 right
        mean = sum(letters[v] for v in t["scores"]) / len(t["scores"])
        assert mean == want and runs.loc[f"{t['model']}/arith", "mean_score"] == pytest.approx(want)
        assert runs.loc[f"{t['model']}/arith", "reported_score"] == pytest.approx(want)  # the header's accuracy
    # a copy of one log under another name with its eval_id taken out (older logs have none): the
    # evaluation is then its run_id, task_id and created, which still tell it from the other model's
    doc = json.loads(paths[1].read_text())
    doc["eval"].pop("eval_id")
    (tmp_path / "copy.json").write_text(json.dumps(doc))
    again = rl.ingest(con, tmp_path / "copy.json")
    # another evaluation id (derived, not the eval_id): a run of its own beside b's, never a's
    assert again[["loaded", "duplicates", "rejected"]].values.tolist() == [[5, 0, 0]]
    runs = rl.runs(con)
    assert runs.groupby("label").size().to_dict() == {"mockllm/a/arith": 1, "mockllm/b/arith": 2}
    assert runs.set_index("run").loc["mockllm/a/arith", "rollouts"] == 5


def test_tool_calls_are_timed_by_the_transcripts_tool_events(real_dir, con):
    rl.ingest(con, real_dir / "inspect" / BROWSER)
    got = [r[0] for r in con.execute("SELECT latency_s FROM tool_calls ORDER BY call_idx").fetchall()]
    doc = json.loads((real_dir / "inspect" / BROWSER).read_text())
    want = [e["working_time"] for s in doc["samples"] for e in s["events"] if e["event"] == "tool"]
    assert len(want) == 4 and got == pytest.approx(want)
    starts = con.execute("SELECT count(started_at), count(ended_at) FROM tool_calls").fetchone()
    assert starts == (4, 4)


def test_a_placeholder_working_time_is_not_a_latency(con, tmp_path):
    # vitals writes working_time 100000 and no completed time: unknown, never 100000 s
    call = {"id": "c1", "function": "search", "arguments": {"q": "x"}}
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "m", "eval_id": "E"}, "plan": {},
           "samples": [{"id": 1, "epoch": 1, "input": "q", "target": "a", "output": {}, "scores": {"s": {"value": "C"}},
                        "messages": [{"role": "assistant", "content": "", "tool_calls": [call]},
                                     {"role": "tool", "tool_call_id": "c1", "content": "found"}],
                        "events": [{"event": "tool", "id": "c1", "timestamp": "2025-04-10T16:15:36-05:00",
                                    "working_start": 100000, "working_time": 100000}]}]}
    path = tmp_path / "vitals-like.json"
    path.write_text(json.dumps(log))
    rl.ingest(con, path)
    assert con.execute("SELECT latency_s, started_at FROM tool_calls").fetchone()[0] is None


def test_an_r_writers_boxed_scalars_and_empty_arrays_load(con, tmp_path):
    """vitals (jsonlite) boxes every scalar in a one-element array and writes {} as []."""
    log = {"version": [2], "status": ["success"], "plan": {"steps": []},
           "eval": {"task": ["An R Eval"], "model": ["claude-x"], "task_id": ["T"], "run_id": ["R"],
                    "created": ["2025-03-01T12:57:40-06:00"], "model_args": [], "config": []},
           "results": {"scores": [{"name": ["model_graded_qa"], "metrics": {"accuracy": {"value": [50]}}}]},
           "samples": [{"id": [i], "epoch": [1], "input": ["q"], "target": ["a"], "messages": [], "output": [],
                        "model_usage": [], "scores": {"model_graded_qa": {"value": [v]}}}
                       for i, v in ((1, "C"), (2, "P"), (3, "I"), (4, "C"))]}
    path = tmp_path / "boxed.json"
    path.write_text(json.dumps(log))
    result = rl.ingest(con, path)
    assert result[["records", "loaded", "rejected"]].values.tolist() == [[4, 4, 0]]
    run = rl.runs(con).iloc[0]
    assert (run.run, run.model) == ("claude-x/An R Eval", "claude-x")
    assert run.mean_score == pytest.approx(0.625) and run.reported_score == 50  # a producer's percent, kept


def test_a_placeholder_model_or_task_never_names_a_run(con, tmp_path):
    log = {"version": 2, "status": "success", "plan": {},
           "eval": {"task": "...", "model": "...", "task_id": "...", "run_id": "..."},
           "samples": [{"id": 1, "epoch": 4, "input": "q", "target": "a", "messages": [], "output": {}}]}
    path = tmp_path / "log_tool_call_error.json"
    path.write_text(json.dumps(log))
    rl.ingest(con, path)
    assert rl.runs(con)[["run", "model"]].values.tolist() == [["log_tool_call_error", None]]


def test_a_trainers_step_and_split_folders_are_runs_of_one_label(con, tmp_path):
    """inspect_rl writes one log per step and split, in folders named 003_rollout, 002_val."""
    def log(folder, score):
        path = tmp_path / "run" / folder / "log.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"version": 2, "status": "success", "plan": {},
                                    "eval": {"task": "task", "model": "trl/gemma", "eval_id": folder},
                                    "samples": [{"id": 1, "epoch": 1, "input": "q", "target": "a", "messages": [],
                                                 "output": {}, "scores": {"reward": {"value": score}}}]}))
    for folder, score in (("000_val", -190.25), ("001_rollout", -135.0), ("002_rollout", -383.0), ("002_val", -208.75)):
        log(folder, score)
    rl.ingest(con, tmp_path / "run")
    steps = rl.by_step(con, "trl/gemma/task")
    assert steps[["split", "step", "mean_score"]].values.tolist() == [
        ["train", 1, -135.0], ["train", 2, -383.0], ["valid", 0, -190.25], ["valid", 2, -208.75]]


def test_a_real_rl_runs_steps_and_splits_match_its_train_log(con):
    """UKGovernmentBEIS/inspect_rl's example run ($ROLLOUTLAB_CORPUS: inspect-rl-steps): 9 zstd
    .eval logs in NNN_rollout / NNN_val folders; the step means its own train.log prints."""
    import os

    roots = [Path(p) / "inspect-rl-steps" for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    folder = next((r for r in roots if r.is_dir()), None)
    if folder is None:
        pytest.skip("no inspect-rl-steps/ in $ROLLOUTLAB_CORPUS (real files from other repositories)")
    rl.ingest(con, sorted(folder.rglob("*.eval")))
    got = {(r.split, r.step): r.mean_score for r in rl.by_step(con).itertuples()}
    assert got == {("train", 1): -135.0, ("train", 2): -383.0, ("train", 3): -287.5, ("train", 4): -177.5,
                   ("train", 5): -240.75, ("valid", 0): -190.25, ("valid", 2): -208.75, ("valid", 4): -226.25,
                   ("valid", 5): -225.75}
