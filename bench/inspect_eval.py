"""Ingest of an Inspect AI .eval written by inspect_ai itself, against inspect_ai's own reader.

    python bench/inspect_eval.py [--samples 10000] [--out bench/out]

inspect_ai is not a dependency of rolloutlab: this script installs it (pinned) into a venv of its
own under ``--out``, and with it (1) writes the log — a task whose mock model looks a company up
with a tool, then answers, scored by ``match`` — as the current release writes it (zstd members),
and (2) times ``inspect_ai.analysis.samples_df()``, which reads sample summaries only, on that
file. rolloutlab's complete ingest (samples, scores, messages, tool calls) is timed on the same
file; each in its own process, with its peak memory.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common import print_children, run_child, size_parser

INSPECT_AI = "inspect_ai==0.3.285"

WRITE = '''
import sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

N, LOGS = int(sys.argv[1]), sys.argv[2]
WORDS = "revenue net income margin fiscal quarter report filed segment growth operating cash flow guidance".split()


@tool
def search():
    async def execute(query: str) -> str:
        """Search the filings.

        Args:
            query: what to look for
        """
        k = sum(map(ord, query))
        return " ".join(WORDS[(k * j) % len(WORDS)] for j in range(300 + k % 500))
    return execute


def outputs():
    i = 0
    while True:  # usage given: the mock would count tokens with a tokenizer it downloads
        call = ModelOutput.for_tool_call("mockllm/model", "search", {"query": f"company {i} revenue"})
        call.usage = ModelUsage(input_tokens=900 + i % 50, output_tokens=40, total_tokens=940 + i % 50)
        yield call
        answer = ModelOutput.from_content("mockllm/model", "$28.9M" if i % 3 else "$17.7M")
        answer.usage = ModelUsage(input_tokens=1900 + i % 50, output_tokens=20, total_tokens=1920 + i % 50)
        yield answer
        i += 1


task = Task(dataset=[Sample(id=i, input=f"What was company {i}'s revenue in 2021?", target="$28.9M") for i in range(N)],
            solver=[use_tools(search()), generate()], scorer=match(), name="finqa")
eval(task, model=get_model("mockllm/model", custom_outputs=outputs()), log_dir=LOGS, log_format="eval",
     max_samples=1, display="none")
'''

SAMPLES_DF = "import sys; from inspect_ai.analysis import samples_df; print(len(samples_df(sys.argv[1])))"

INGEST = ("import sys, rolloutlab as rl; c = rl.connect(sys.argv[2]); r = rl.ingest(c, sys.argv[1], progress=False);"
          "print(int(r.loaded.sum()), c.execute('SELECT count(*) FROM tool_calls').fetchone()[0],"
          " c.execute('SELECT count(*) FROM messages').fetchone()[0])")


def inspect_python(out: Path) -> Path:
    """A venv of its own with inspect_ai (installed once)."""
    venv = out / "inspect-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # samples_df needs pandas and pyarrow, which inspect_ai leaves optional
        subprocess.run([str(python), "-m", "pip", "install", "-q", INSPECT_AI, "pandas", "pyarrow"], check=True)
    return python


def main() -> None:
    args = size_parser(samples=10_000).parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    python = inspect_python(args.out)
    logs = args.out / f"inspect-{args.samples}"
    if not any(logs.glob("*.eval")):
        subprocess.run([str(python), "-c", WRITE, str(args.samples), str(logs)], check=True)
    path = next(logs.glob("*.eval"))
    db = args.out / "inspect.duckdb"
    db.unlink(missing_ok=True)
    rows = {
        "rolloutlab ingest (complete: samples, scores, messages, tool calls)": run_child(INGEST, str(path), str(db)),
        f"{INSPECT_AI} samples_df() (sample summaries only)": run_child(SAMPLES_DF, str(path), python=str(python)),
    }
    print(f"file: {path.stat().st_size / 1e6:.0f} MB, {args.samples:,} samples, written by {INSPECT_AI}\n")
    print_children(rows, "rows (ingest: rollouts, tool calls, messages)")


if __name__ == "__main__":
    main()
