"""Inspect AI logs: the real .eval and .json files, and broken copies."""
from __future__ import annotations

import json
import zipfile

import pytest

import rolloutlab as rl

EVAL = "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"
BROWSER = "2025-05-12T20-27-36-04-00_browser.json"


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
    tokens = {f"popularity:{s['id']}": sum(u["input_tokens"] for u in s["model_usage"].values()) for s in samples}
    assert dict(con.execute("SELECT sample_id, input_tokens FROM rollouts").fetchall()) == tokens
    assert rl.runs(con).run.tolist() == ["openai/gpt-4o-mini"]


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
    from rolloutlab.ingest.inspectlog import score_value

    assert [score_value(v) for v in ("C", "P", "I", "N", "c", 0.25, True, "0.75", "x", None)] == \
        [1.0, 0.5, 0.0, 0.0, 1.0, 0.25, 1.0, 0.75, None, None]
