"""Ingest of a 10,000-sample Inspect AI .eval (~130 MB), complete: samples, scores, messages, tool calls.

    python bench/inspect_eval.py [--samples 10000] [--out bench/out]

The log is synthetic, in Inspect's zip layout (header.json, summaries.json, samples/<id>_epoch_1.json),
built from rolloutlab's synthetic rollouts (messages with tool calls and tool outputs padded to
realistic sizes). When inspect_ai is installed, its samples_df() (summaries only) and
samples_df(full=True) are timed on the same file; otherwise the reference is DESIGN.md's
measurement on this machine (~6 s for samples_df, 141 s for full=True).
"""
from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path

from rolloutlab import synth

from common import print_children, run_child


WORDS = ("revenue net income margin fiscal quarter report filed segment growth operating cash flow "
         "guidance dividend share capital expenditure total assets liabilities equity").split()


def _text(chars: int, seed: int) -> str:
    """Tool output of about ``chars`` characters (capped at 6,000) that compresses like prose."""
    words, n, k = [], 0, seed
    while n < min(chars, 6000):
        k = (k * 1103515245 + 12345) & 0x7FFFFFFF
        w = WORDS[k % len(WORDS)] + (str(k % 997) if k % 3 == 0 else "")
        words.append(w)
        n += len(w) + 1
    return " ".join(words)


def inspect_sample(rec: dict, i: int) -> dict:
    messages = [{"role": "user", "content": rec["prompt"], "source": "input"}]
    for c in rec["tool_calls"]:
        messages.append({"id": f"m{i}-{c['call_id']}", "role": "assistant", "content": "", "source": "generate",
                         "tool_calls": [{"id": c["call_id"], "function": c["tool"], "arguments": c["arguments"]}]})
        messages.append({"id": f"t{i}-{c['call_id']}", "role": "tool", "tool_call_id": c["call_id"],
                         "content": _text(c["output_chars"], i), "function": c["tool"]})
    messages.append({"role": "assistant", "content": f"The answer is {rec['final_answer']}.", "source": "generate"})
    value = "C" if (rec["score"] or 0) >= 1 else ("P" if (rec["score"] or 0) > 0 else "I")
    return {"id": i, "epoch": 1, "input": rec["prompt"], "target": rec["reference"], "messages": messages,
            "output": {"model": "gpt-5-mini", "completion": f"The answer is {rec['final_answer']}."},
            "scores": {"match": {"value": value, "answer": rec["final_answer"]}},
            "model_usage": {"openai/gpt-5-mini": {"input_tokens": rec["usage"]["input_tokens"],
                                                   "output_tokens": rec["usage"]["output_tokens"]}},
            "total_time": rec["latency_s"], "working_time": rec["latency_s"], "uuid": rec["rollout_id"],
            "metadata": {}, "store": {}, "events": [], "attachments": {}}


def write_eval(path: Path, n: int) -> None:
    header = {"version": 2, "status": "success",
              "eval": {"task": "finqa", "model": "openai/gpt-5-mini", "created": "2025-12-09T10:00:00Z"}}
    summaries = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i, rec in enumerate(synth.generate(samples=n, attempts=1, checkpoints=("base",), seed=2,
                                               messages=False), start=1):
            if rec["status"] == "infra_error":
                rec["score"], rec["final_answer"] = 0.0, None
            zf.writestr(f"samples/{i}_epoch_1.json", json.dumps(inspect_sample(rec, i)))
            summaries.append({"id": i, "epoch": 1})
        zf.writestr("summaries.json", json.dumps(summaries))
        zf.writestr("header.json", json.dumps(header))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"finqa-{args.samples}.eval"
    if not path.exists():
        write_eval(path, args.samples)
    db = args.out / "inspect.duckdb"
    db.unlink(missing_ok=True)
    rows = {"rolloutlab ingest (complete)": run_child(
        "import sys, rolloutlab as rl; c = rl.connect(sys.argv[2]); r = rl.ingest(c, sys.argv[1], progress=False);"
        "print(int(r.loaded.sum()), c.execute('SELECT count(*) FROM tool_calls').fetchone()[0],"
        " c.execute('SELECT count(*) FROM messages').fetchone()[0])", str(path), str(db))}
    try:
        import inspect_ai  # noqa: F401
        rows["inspect_ai samples_df()"] = run_child(
            "import sys; from inspect_ai.analysis import samples_df; print(len(samples_df(sys.argv[1])))", str(path))
    except ImportError:
        pass
    print(f"file: {path.stat().st_size / 1e6:.0f} MB, {args.samples:,} samples\n")
    print_children(rows, "output")


if __name__ == "__main__":
    main()
