"""Many small files: a folder of Inspect logs of 10 samples each, one log per eval run, as teams
keep them — ingested whole in one call, then again unchanged; and a folder of 10,000 such logs in
one call, for its peak memory (flat in the number of files: a batch of files stages outside the
ingest's transaction).

    python bench/many_files.py [--files 1500] [--large-files 10000] [--out bench/out]

The logs are copies of a real 10-sample Inspect log (inspect_ai's own test log in
../shared/data/real/inspect, else the 3x2 fixture written by inspect_ai), each made another eval
run (its own task_id, run_id, creation time and sample uuids), so every file is a run of its own,
as in a real folder. Each step runs in its own child process (its peak memory is its own); the
large folder's ingest shows its progress bar (on stderr).
"""
from __future__ import annotations

import json
import sys
import time
import zipfile
from pathlib import Path

from common import machine, run_child, size_parser

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "real" / "inspect" / "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"
FIXTURE = ROOT / "tests" / "fixtures" / "inspect" / "revenue-zstd.eval"

INGEST = """
import sys, rolloutlab as rl
con = rl.connect(sys.argv[2])
r = rl.ingest(con, sys.argv[1], progress=sys.argv[3] == 'show')
con.close()
assert (r.records == r.loaded + r.duplicates + r.rejected).all()
print(len(r), int(r.records.sum()), int(r.loaded.sum()), int(r.duplicates.sum()), int(r.rejected.sum()),
      r.action.value_counts().to_dict())
"""


def write_logs(folder: Path, files: int) -> Path:
    """``files`` eval logs in ``folder``, each another run of the source log."""
    sys.path.insert(0, str(ROOT / "lib"))
    from rolloutlab.ingest.ziparchive import Archive

    source = REAL if REAL.exists() else FIXTURE
    with Archive(source) as zf:
        members = {name: zf.read(name) for name in zf.names()}
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        task_id = f"Bench{i:06d}TaskId{i:010d}"
        with zipfile.ZipFile(folder / f"2026-01-01T00-00-00_task_{task_id}.eval", "w", zipfile.ZIP_DEFLATED) as out:
            for name, data in members.items():
                doc = json.loads(data)
                if name in ("header.json", "_journal/start.json") and isinstance(doc.get("eval"), dict):
                    doc["eval"].update(task_id=task_id, run_id=f"run{i}",
                                       created=f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}")
                elif name.startswith("samples/") and isinstance(doc, dict):
                    doc["uuid"] = f"{task_id}-{doc.get('id')}-{doc.get('epoch')}"
                out.writestr(name, json.dumps(doc))
    return source


def folder_of(out: Path, files: int) -> Path:
    folder = out / f"many-{files}"
    if not folder.exists():
        t0 = time.perf_counter()
        source = write_logs(folder, files)
        print(f"wrote {files} logs (copies of {source.name}) in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return folder


def main() -> None:
    ap = size_parser()
    ap.add_argument("--files", type=int, default=1500)
    ap.add_argument("--large-files", type=int, default=10_000, help="0: skip the large folder")
    args = ap.parse_args()
    folder = folder_of(args.out, args.files)
    db = args.out / "many.duckdb"
    db.unlink(missing_ok=True)
    steps = {"first ingest": run_child(INGEST, str(folder), str(db), "quiet"),
             "again, unchanged": run_child(INGEST, str(folder), str(db), "quiet")}
    large = None
    if args.large_files:
        large = folder_of(args.out, args.large_files)
        db.unlink(missing_ok=True)
        steps[f"{args.large_files:,} logs in one call (progress shown)"] = run_child(INGEST, str(large), str(db), "show")
        db.unlink(missing_ok=True)
    print(f"\nInspect logs of 10 samples, one folder each; {machine()}\n")
    print("| step | files | seconds | ms per file | peak memory (MB) | files, records, loaded, duplicates, rejected, "
          "actions |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (seconds, peak, out) in steps.items():
        files = args.large_files if name.startswith(f"{args.large_files:,}") else args.files
        print(f"| {name} | {files:,} | {seconds:.1f} | {seconds / files * 1000:.1f} | {peak:,.0f} | {out} |")


if __name__ == "__main__":
    main()
