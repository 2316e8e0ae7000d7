"""verifiers vf-eval folders: files written by verifiers 0.3.1 itself (a venv of its own, against
a stub model server on loopback), read back against verifiers' own reader and its own pass@k; the
real folders of public repositories ($ROLLOUTLAB_CORPUS: verifiers) in every layout."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import rolloutlab as rl
from conftest import producer_python, write_jsonl

# vf-eval's own writer: a ToolEnv of 2 examples x 3 rollouts against a stub OpenAI server on
# 127.0.0.1 (the model calls `add`, then answers 4 or 5 by turns); rewards 1 / -1, a zero-weight metric.
WRITE_WITH_VERIFIERS = r'''
import json, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

class Stub(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msgs = body["messages"]
        if msgs[-1].get("role") == "user":
            msg = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(msgs)}", "type": "function",
                   "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 2})}}]}
            reason = "tool_calls"
        else:
            msg = {"role": "assistant", "content": "The answer is \\boxed{%s}" % ("4" if len(msgs) % 2 == 0 else "5")}
            reason = "stop"
        data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                           "model": body["model"], "choices": [{"index": 0, "message": msg, "finish_reason": reason}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
threading.Thread(target=server.serve_forever, daemon=True).start()

import verifiers as vf
from datasets import Dataset
from verifiers.types import ClientConfig

def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

async def correct(completion, answer, **kw) -> float:
    return 1.0 if answer in str(completion[-1]["content"]) else -1.0

rubric = vf.Rubric(funcs=[correct])
dataset = Dataset.from_list([{"question": "What is 2+2?", "answer": "4", "info": {"src": "a"}},
                             {"question": "What is 2+3?", "answer": "5", "info": {"src": "b"}}])
env = vf.ToolEnv(dataset=dataset, tools=[add], rubric=rubric, system_prompt="Use tools.", max_turns=4)
os.environ["STUB_KEY"] = "x"
client = ClientConfig(api_key_var="STUB_KEY", api_base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                      max_retries=0)
env.evaluate_sync(client=client, model="stub-model", num_examples=2, rollouts_per_example=3, save_results=True,
                  results_path=Path(sys.argv[1]))
server.shutdown()
'''

# verifiers' own reader of a results folder (verifiers.utils.save_utils.load_outputs)
READ_WITH_VERIFIERS = r'''
import json, sys
from pathlib import Path
from verifiers.utils.save_utils import load_outputs
rows = load_outputs(Path(sys.argv[1]))
print(json.dumps([{"example_id": r.get("example_id"), "reward": r.get("reward"), "metrics": r.get("metrics")}
                  for r in rows], default=str))
'''


def _run(python, script: str, *args) -> str:
    done = subprocess.run([str(python), "-c", script, *map(str, args)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def vf_python():
    return producer_python("verifiers")


@pytest.fixture(scope="module")
def written(vf_python, tmp_path_factory):
    """A vf-eval folder written by verifiers 0.3.1 (layout D)."""
    folder = tmp_path_factory.mktemp("vf") / "outputs" / "evals" / "toy--stub-model" / "a1b2c3d4"
    _run(vf_python, WRITE_WITH_VERIFIERS, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["metadata.json", "results.jsonl"]
    return folder


def test_a_folder_verifiers_wrote_loads_every_row_as_written(written, con):
    rows = [json.loads(x) for x in (written / "results.jsonl").read_text().splitlines()]
    meta = json.loads((written / "metadata.json").read_text())
    result = rl.ingest(con, written)
    assert sorted(zip(result.format, result.action)) == [("verifiers", "empty"), ("verifiers", "loaded")]
    assert result.rejected.sum() == 0
    [run] = rl.runs(con).to_dict("records")
    # env_id is "" when the environment was built in Python: the env of the folder's name
    assert run["run"] == "stub-model/toy" and run["model"] == "stub-model" and run["evaluation"] == "a1b2c3d4"
    assert run["reported_score"] == meta["avg_reward"] and run["pass_threshold"] == meta["pass_threshold"] == 0.5
    got = con.execute("SELECT sample_id, attempt, score, latency_s, n_tool_calls, n_turns, input_tokens, output_tokens, "
                      "status, stop_reason_raw, rollout_id FROM rollouts ORDER BY source_line").fetchall()
    seen: dict[str, int] = {}
    for row, (sample, attempt, score, latency, calls, turns, tin, tout, status, stop, rid) in zip(rows, got):
        assert sample == str(row["example_id"]) and attempt == seen.get(sample, 0)  # the n-th row of its example
        seen[sample] = attempt + 1
        assert score == row["reward"] and latency == pytest.approx(row["timing"]["total"])
        assert (calls, turns) == (1, 1) and (tin, tout) == (int(row["token_usage"]["input_tokens"]),
                                                           int(row["token_usage"]["output_tokens"]))
        assert (status, stop) == ("ok", row["stop_condition"])
        grades = dict(con.execute("SELECT grader, score FROM grades WHERE rollout_id = ?", [rid]).fetchall())
        assert grades == row["metrics"]  # every rubric metric a grade
        [(start, end, tool)] = con.execute("SELECT epoch(started_at), epoch(ended_at), tool FROM tool_calls "
                                           "WHERE rollout_id = ?", [rid]).fetchall()
        span = row["timing"]["env"]["spans"][0]  # the environment step that ran the call
        assert tool == "add" and start == pytest.approx(span["start"], abs=1e-5) and end == pytest.approx(span["end"], abs=1e-5)
    assert len(got) == len(rows) == 6


def test_pass_at_k_equals_verifiers_own_at_its_pass_threshold(written, con):
    """vf-eval's metadata holds its own pass@k (PassAtKMetric: reward >= pass_threshold, the
    unbiased estimator): an independent computation of the same numbers."""
    meta = json.loads((written / "metadata.json").read_text())
    rl.ingest(con, written)
    row = rl.summary(con, ks=(1, 2)).iloc[0]
    assert row.pass_threshold == 0.5 and row.reward_floor == -1.0  # rewards of 1 and -1
    assert row.pass_at_1 == pytest.approx(meta["pass_at_k"]["1"]) and row.pass_at_2 == pytest.approx(meta["pass_at_k"]["2"])
    assert row.pass_hat_2 == pytest.approx(meta["pass_all_k"]["2"])


def test_rows_equal_verifiers_own_reader(written, vf_python, con):
    theirs = json.loads(_run(vf_python, READ_WITH_VERIFIERS, written).strip().splitlines()[-1])
    rl.ingest(con, written)
    ours = con.execute("SELECT r.sample_id, r.score, r.rollout_id FROM rollouts r ORDER BY source_line").fetchall()
    assert len(ours) == len(theirs)
    for t, (sample, score, rid) in zip(theirs, ours):
        grades = dict(con.execute("SELECT grader, score FROM grades WHERE rollout_id = ?", [rid]).fetchall())
        assert (sample, score, grades) == (str(t["example_id"]), t["reward"], t["metrics"])


# --- layouts A and B, hand-written after the real files (fields as they hold them) ----------------

def _folder(tmp_path, rows, meta, name="wiki-search--org--m-1", run_id="0badf00d") -> Path:
    folder = tmp_path / "outputs" / "evals" / name / run_id
    folder.mkdir(parents=True)
    write_jsonl(folder / "results.jsonl", rows)
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


def _call(call_id, name, args) -> str:  # as vf-eval 0.1.x wrote a call: JSON text, OpenAI-shaped
    return json.dumps({"id": call_id, "function": {"arguments": json.dumps(args), "name": name}, "type": "function"})


def test_older_layouts_pair_results_by_order_and_keep_flat_metrics(tmp_path, con):
    completion = [{"content": "", "role": "assistant", "tool_calls": [_call("c1", "search", {"q": "a"}),
                                                                      _call("c2", "read", {"p": 1})]},
                  {"content": "found a", "role": "tool", "tool_calls": None},  # no tool_call_id: the first call's
                  {"content": "Traceback ... Error", "role": "tool", "tool_calls": None},
                  {"content": "It is B.", "role": "assistant"}]
    row = {"id": 7, "prompt": [{"content": "Q?", "role": "user"}], "completion": completion, "task": "default",
           "generation_ms": 1500.0, "scoring_ms": 500.0, "total_ms": 2000.0, "info": {"oai_tools": []},
           "answer": "B", "reward": -0.5, "judge_reward": -0.5, "total_tool_calls": 2.0}
    folder = _folder(tmp_path, [row, {**row, "reward": 1.0, "judge_reward": 1.0}],
                     {"env": "wiki-search", "model": "org/m-1", "num_examples": 1, "rollouts_per_example": 2,
                      "avg_reward": 0.9})
    assert rl.ingest(con, folder).rejected.sum() == 0
    run = rl.runs(con).iloc[0]
    assert (run.run, run.reported_score, run.mean_score) == ("org/m-1/wiki-search", 0.9, 0.25)
    calls = con.execute("SELECT tool, turn_idx, output_chars, arguments FROM tool_calls t JOIN rollouts r "
                        "USING (rollout_id) WHERE r.attempt = 0 ORDER BY call_idx").fetchall()
    assert [(c[0], c[1], c[2]) for c in calls] == [("search", 0, 7), ("read", 0, 19)]
    assert json.loads(calls[0][3]) == {"q": "a"}
    got = con.execute("SELECT attempt, score, latency_s, final_answer FROM rollouts ORDER BY attempt").fetchall()
    assert got == [(0, -0.5, 2.0, "It is B."), (1, 1.0, 2.0, "It is B.")]
    grades = con.execute("SELECT DISTINCT grader FROM grades ORDER BY 1").fetchall()
    assert grades == [("judge_reward",), ("total_tool_calls",)]  # the rubric's keys; not timings, not answer


def test_a_broken_row_is_a_reject_naming_its_field(tmp_path, con):
    good = {"example_id": 0, "prompt": [{"role": "user", "content": "q"}], "completion": [], "reward": 1.0,
            "total_ms": 10.0}
    folder = _folder(tmp_path, [good, {**good, "reward": "high"}, {**good, "example_id": None},
                                {**good, "completion": [{"role": "assistant", "tool_calls": ["{not json"]}]}],
                     {"env_id": "e", "model": "m", "rollouts_per_example": 1})
    result = rl.ingest(con, folder)
    assert result.rejected.sum() == 3 and result.loaded.sum() == 1
    reasons = [r for rs in result.reasons for r in rs if ":" in r and "line" in r]
    assert any("field 'reward' must be a number" in r for r in reasons)
    assert any("missing required field 'example_id'" in r for r in reasons)
    assert any("tool_calls[0]' must be a tool call as JSON" in r for r in reasons)


# --- the real folders of public repositories ($ROLLOUTLAB_CORPUS: verifiers) ----------------------

@pytest.fixture
def corpus() -> Path:
    roots = [Path(p) / "verifiers" for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    found = next((r for r in roots if r.is_dir()), None)
    if found is None:
        pytest.skip("no verifiers/ in $ROLLOUTLAB_CORPUS (vf-eval folders of public repositories, kept out of the repo)")
    return found


def test_real_vf_eval_folders_of_every_layout(corpus, con):
    result = rl.ingest(con, corpus)
    assert (result.action != "failed").all() and result.rejected.sum() == 0
    runs = rl.runs(con).set_index("run")
    # PrimeIntellect's wordle run: its metadata says 0.0, its rows average 1.1991 (rewards above 1)
    wordle = runs.loc["gpt-4.1-mini/wordle"]
    assert wordle.reported_score == 0.0 and wordle.mean_score == pytest.approx(1.1991, abs=1e-4)
    # the gsm8k run that never ran: 150 empty completions in no time, never the model's 0
    assert con.execute("SELECT count(*), count(*) FILTER (WHERE status = 'infra_error') FROM rollouts "
                       "WHERE run_id = 'gpt-4.1-mini/gsm8k'").fetchone() == (150, 150)
    # layout A (math_python, "id"): 5 examples x 3 attempts
    assert con.execute("SELECT count(DISTINCT sample_id), max(attempt) FROM rollouts "
                       "WHERE run_id = 'gpt-4.1-mini/math-python'").fetchone() == (5, 2)
    # every call found: the rubric's own count of them, where it keeps one
    assert con.execute("""SELECT count(*) FROM rollouts r JOIN grades g ON g.rollout_id = r.rollout_id
                          AND g.grader = 'total_tool_calls' WHERE r.n_tool_calls <> g.score""").fetchone() == (0,)
    # the base checkpoint against its RL-tuned one on the same 100 prompts
    base, tuned = "qwen/qwen3-4b-instruct-2507/wiki-search", "willcb/qwen3-4b-wiki-search/wiki-search"
    deltas = rl.sample_deltas(con, base, tuned)
    assert len(deltas) == 100 and (deltas.score_diff > 0).sum() == 36 and (deltas.score_diff < 0).sum() == 2
    means = rl.summary(con, [base, tuned]).set_index("run").tool_calls_mean
    assert (means[base], means[tuned]) == (pytest.approx(2.73), pytest.approx(3.88))


def test_real_folders_equal_verifiers_own_reader(corpus, vf_python, con):
    """Layouts B (example_id) as verifiers 0.3.1's load_outputs reads them: every row, its
    example, reward and metrics (layout A has 'id', which its reader skips)."""
    folders = sorted(p.parent for p in corpus.rglob("results.jsonl")
                     if '"example_id"' in p.read_text()[:4096])
    assert folders
    rl.ingest(con, corpus)
    for folder in folders:
        theirs = json.loads(_run(vf_python, READ_WITH_VERIFIERS, folder).strip().splitlines()[-1])
        ours = con.execute("SELECT r.sample_id, r.score, r.status FROM rollouts r JOIN sources s USING (source_id) "
                           "WHERE s.path = ? ORDER BY r.source_line", [str((folder / "results.jsonl").resolve())]
                           ).fetchall()
        assert len(ours) == len(theirs), folder
        for t, (sample, score, status) in zip(theirs, ours):
            assert sample == str(t["example_id"]) and (status != "ok" or score == t["reward"]), folder


def test_layout_c_timing_errors_and_truncation(tmp_path, con):
    """Layout C (verifiers 0.1.9 - 0.1.12, after its save_utils): metrics as an object, timing in
    milliseconds under `timing`, the harness's error, is_truncated, stop_condition, token_usage."""
    base = {"example_id": 3, "task": "default", "prompt": [{"role": "user", "content": "Q?"}],
            "completion": [{"role": "assistant", "content": "A."}], "answer": "A", "info": {},
            "timing": {"generation_ms": 900.0, "scoring_ms": 100.0, "total_ms": 1000.0},
            "is_completed": True, "is_truncated": False, "stop_condition": "no_tools_called", "error": None,
            "metrics": {"correct": 1.0, "num_turns": 1.0}, "token_usage": {"input_tokens": 12.0, "output_tokens": 3.0},
            "reward": 1.0, "correct": 1.0, "num_turns": 1.0}
    rows = [base,
            {**base, "reward": 0.0, "metrics": {"correct": 0.0, "num_turns": 4.0}, "is_truncated": True,
             "stop_condition": "max_turns_reached"},
            {**base, "reward": 0.0, "error": {"error": "ModelError", "message": "Connection reset by peer"},
             "is_completed": False, "stop_condition": "has_error"}]
    folder = _folder(tmp_path, rows, {"env_id": "qa", "model": "m", "rollouts_per_example": 3, "avg_reward": 0.33,
                                      "pass_threshold": 0.5, "version_info": {"vf_version": "0.1.12"}},
                     name="qa--m", run_id="c0ffee00")
    assert rl.ingest(con, folder).rejected.sum() == 0
    got = con.execute("SELECT attempt, status, score, latency_s, input_tokens, stop_reason_raw, error FROM rollouts "
                      "ORDER BY attempt").fetchall()
    assert got[0] == (0, "ok", 1.0, 1.0, 12, "no_tools_called", None)
    assert got[1][:3] == (1, "truncated", 0.0) and got[1][5] == "max_turns_reached"
    assert got[2][:3] == (2, "infra_error", None) and got[2][6] == "ModelError: Connection reset by peer"
    grades = con.execute("SELECT grader, g.score FROM grades g JOIN rollouts r USING (rollout_id) WHERE r.attempt = 1 "
                         "ORDER BY 1").fetchall()
    assert grades == [("correct", 0.0), ("num_turns", 4.0)]  # from `metrics`, not the flat copies twice
    assert rl.runs(con).pass_threshold.tolist() == [0.5]
