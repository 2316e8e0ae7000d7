"""Ingest of Inspect AI .eval logs written by inspect_ai itself, against inspect_ai's own reader.

    python bench/inspect_eval.py [--samples 10000] [--shapes light,heavy] [--repeat 1] [--out bench/out]
    python bench/inspect_eval.py --large [--large-samples 200000]   # the large heavy log, ~2.6 GB

inspect_ai is not a dependency of rolloutlab: this script installs it (pinned) into a venv of its
own under ``--out``, writes the logs with it, and times ``inspect_ai.analysis.samples_df()``, which
reads sample summaries only, on each file; rolloutlab's complete ingest (samples, scores, messages,
tool calls) is timed on the same file, each in its own process, with its peak memory, side by side
(``--repeat``: that many pairs, alternating). Two shapes:

- ``light``: a task whose mock model looks a company up with a tool, then answers, scored by
  ``match`` (one call, ~3 KB a sample), run by ``inspect_ai.eval`` itself;
- ``heavy``: the real browser-agent sample of inspect_ai's own test logs (``shared/data/real``:
  4 tool calls, tool outputs of 1.7-7 KB, the full event transcript, 341 KB of JSON) replicated,
  each copy with its own id, uuid, score and time, written by inspect_ai's own ``EvalRecorder``
  (zstd members, journal, summaries, header). The sample is serialized by inspect_ai once and its
  ids set in the bytes of each copy: serializing 200,000 transcripts would take an hour.

Every file: loaded + rejected = the samples the zip holds. ``--large`` runs the large heavy log
(progress shown on a terminal) and stops ``samples_df()`` after ``--df-timeout`` seconds.
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

from common import machine

from rolloutlab import config

INSPECT_AI = "inspect_ai==0.3.285"
BROWSER = "2025-05-12T20-27-36-04-00_browser.json"  # inspect_ai's tests/analysis/test_logs

WRITE_LIGHT = '''
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

WRITE_HEAVY = '''
import asyncio, sys
import shortuuid
from inspect_ai._util.json import to_json_safe
from inspect_ai.log import read_eval_log, read_eval_log_sample
from inspect_ai.log._recorders import eval as recorder_module
from inspect_ai.log._recorders.eval import EvalRecorder, _BufferedSample

N, LOGS, REAL = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ID, UUID, TIME, SCORE = 987654321, "UuidPlaceholder0000000", 12345.5, "ScorePlaceholder"
FLUSH = 100  # samples per flush (one journal summary file each)


class Serialized:
    """A sample inspect_ai serialized already (the template, its ids set in its bytes)."""
    def __init__(self, id, epoch, body):
        self.id, self.epoch, self.body = id, epoch, body


def serialize(data, *args, **kwargs):
    return data.body if isinstance(data, Serialized) else to_json_safe(data, *args, **kwargs)


recorder_module.to_json_safe = serialize  # the recorder writes a Serialized sample's bytes as they are


async def main():
    log = read_eval_log(REAL)
    [sample] = log.samples
    [(scorer, score)] = sample.scores.items()
    template = sample.model_copy(update={"id": ID, "uuid": UUID, "total_time": TIME,
                                         "scores": {scorer: score.model_copy(update={"value": SCORE})}})
    body = to_json_safe(template, indent=None)
    tokens = [str(ID).encode(), UUID.encode(), str(TIME).encode(), SCORE.encode()]
    assert all(body.count(t) == 1 for t in tokens), "a placeholder is not unique in the sample"
    order = sorted(range(len(tokens)), key=lambda k: body.index(tokens[k]))
    pieces, at = [], 0
    for k in order:
        start = body.index(tokens[k])
        pieces.append(body[at:start])
        at = start + len(tokens[k])
    pieces.append(body[at:])
    summary = template.summary()
    task_id = shortuuid.uuid()
    ev = log.eval.model_copy(update={"task_id": task_id, "run_id": shortuuid.uuid()})
    recorder = EvalRecorder(LOGS)
    location = f"{LOGS}/{ev.created.replace(':', '-')}_{ev.task}_{task_id}.eval"
    await recorder.log_init(ev, location, clean=True)
    await recorder.log_start(ev, log.plan)
    zlog = recorder.data[recorder._log_file_key(ev)]
    for i in range(N):
        sid, uuid, value, total = i + 1, shortuuid.uuid(), "C" if i % 4 else "I", 40.0 + i % 17
        values = [str(sid).encode(), uuid.encode(), str(total).encode(), value.encode()]
        parts = [pieces[0]]
        for k, piece in zip(order, pieces[1:]):
            parts += [values[k], piece]
        scores = {scorer: summary.scores[scorer].model_copy(update={"value": value})}
        zlog._samples.append(_BufferedSample(sample=Serialized(sid, 1, b"".join(parts)), summary=summary.model_copy(
            update={"id": sid, "uuid": uuid, "total_time": total, "scores": scores})))
        if (i + 1) % FLUSH == 0:
            await zlog.write_buffered_samples()
        if (i + 1) % 10_000 == 0:
            print(f"{i + 1:,} samples written", file=sys.stderr, flush=True)
    await recorder.log_finish(ev, "success", log.stats, log.results, log.reductions)
    back = read_eval_log_sample(location, N, 1)  # inspect_ai reads a copy back as it wrote it
    assert (back.id, back.total_time, len(back.events)) == (N, 40.0 + (N - 1) % 17, len(sample.events)), back.id

asyncio.run(main())
'''

SAMPLES_DF = "import sys; from inspect_ai.analysis import samples_df; print(len(samples_df(sys.argv[1])))"

INGEST = """
import sys, rolloutlab as rl
c = rl.connect(sys.argv[2])
r = rl.ingest(c, sys.argv[1], progress=None if sys.argv[3] == 'show' else False)
rows = [c.execute(f'SELECT count(*) FROM {t}').fetchone()[0] for t in ('rollouts', 'tool_calls', 'messages')]
print(int(r.records.sum()), int(r.loaded.sum()), int(r.rejected.sum()), *rows)
"""


def inspect_python(out: Path) -> Path:
    """A venv of its own with inspect_ai (installed once)."""
    venv = out / "inspect-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # samples_df needs pandas and pyarrow, which inspect_ai leaves optional
        subprocess.run([str(python), "-m", "pip", "install", "-q", INSPECT_AI, "pandas", "pyarrow"], check=True)
    return python


def write_log(python: Path, shape: str, samples: int, out: Path) -> Path:
    """The log of this shape and size, written once with inspect_ai."""
    logs = out / (f"inspect-{samples}" if shape == "light" else f"inspect-{shape}-{samples}")
    if not any(logs.glob("*.eval")):
        print(f"writing the {shape} log of {samples:,} samples with {INSPECT_AI} ...", file=sys.stderr, flush=True)
        if shape == "light":
            subprocess.run([str(python), "-c", WRITE_LIGHT, str(samples), str(logs)], check=True)
        else:
            real = config.real_data_dir() / "inspect" / BROWSER
            subprocess.run([str(python), "-c", WRITE_HEAVY, str(samples), str(logs), str(real)], check=True)
    return next(logs.glob("*.eval"))


def run_limited(code: str, *args: str, python: str | None = None, timeout: float | None = None):
    """(wall seconds, peak MB, stdout, finished) of ``python -c code args``; stopped after ``timeout``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python or sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    stopped = threading.Event()

    def stop():
        stopped.set()
        proc.kill()
    timer = threading.Timer(timeout, stop) if timeout else None
    if timer:
        timer.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if timer:
        timer.cancel()
    if not stopped.is_set() and os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child failed ({os.waitstatus_to_exitcode(status)}): {code}")
    return seconds, usage.ru_maxrss / 1024, out.strip(), not stopped.is_set()


def samples_in(path: Path) -> int:
    """The sample members the zip holds: what a complete ingest reads."""
    with zipfile.ZipFile(path) as zf:
        return sum(n.startswith("samples/") for n in zf.namelist())


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def compare(python: Path, path: Path, out: Path, repeat: int, progress: bool, df_timeout: float | None) -> list[str]:
    """Rows of the table for one file: each contender ``repeat`` times, alternating."""
    held = samples_in(path)
    rows = []
    for i in range(repeat):
        db = out / "inspect.duckdb"
        db.unlink(missing_ok=True)
        load = load_average()
        seconds, peak, printed, _ = run_limited(INGEST, str(path), str(db), "show" if progress else "quiet")
        records, loaded, rejected, rollouts, calls, messages = map(int, printed.split())
        assert loaded + rejected == records == held, (loaded, rejected, records, held)
        rows.append(f"| rolloutlab ingest, complete | {seconds:.2f} | {peak:,.0f} | {loaded:,} loaded + {rejected:,} "
                    f"rejected = {records:,} read; {calls:,} tool calls, {messages:,} messages | {load} |")
        load = load_average()
        seconds, peak, printed, finished = run_limited(SAMPLES_DF, str(path), python=str(python), timeout=df_timeout)
        rows.append(f"| {INSPECT_AI} `samples_df()`, summaries only | "
                    + (f"{seconds:.2f} | {peak:,.0f} | {int(printed):,} rows" if finished else
                       f"stopped at {seconds:.0f} (did not finish) | {peak:,.0f} (when stopped) | —")
                    + f" | {load} |")
        db.unlink(missing_ok=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--shapes", default="light,heavy", help="comma-separated: light, heavy")
    ap.add_argument("--repeat", type=int, default=1, help="pairs of runs per file, alternating")
    ap.add_argument("--large", action="store_true", help="the large heavy log instead (~2.6 GB at 200,000)")
    ap.add_argument("--large-samples", type=int, default=200_000)
    ap.add_argument("--df-timeout", type=float, default=600.0, help="seconds before samples_df() is stopped")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    python = inspect_python(args.out)
    runs = [("heavy", args.large_samples)] if args.large else [(s, args.samples) for s in args.shapes.split(",")]
    print(f"{datetime.date.today()}, {machine()}, load average before: {load_average()}\n")
    for shape, samples in runs:
        if shape == "heavy" and not (config.real_data_dir() / "inspect" / BROWSER).exists():
            print(f"heavy shape skipped: {BROWSER} not found under {config.real_data_dir()}\n")
            continue
        path = write_log(python, shape, samples, args.out)
        print(f"{shape}: {path.name}, {path.stat().st_size / 1e6:,.0f} MB, {samples:,} samples, written by {INSPECT_AI}\n")
        print("| contender | seconds | peak memory (MB) | rows | load average at start |")
        print("|---|---:|---:|---|---|")
        for row in compare(python, path, args.out, args.repeat, progress=args.large,
                           df_timeout=args.df_timeout if args.large else None):
            print(row, flush=True)
        print()


if __name__ == "__main__":
    main()
