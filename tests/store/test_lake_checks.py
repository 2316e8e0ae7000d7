"""The lake as untrusted input (issue 23): a manifest never reaches SQL as text, an export is one
snapshot, every read-back checks row counts and references, corrupt files are named, stale
staging folders go away, and lake paths are taken literally."""
import json
import shutil
import subprocess
import sys
import time

import duckdb
import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab.store import lake
from rolloutlab import store
from rolloutlab.demo import synth
from rolloutlab.cli import main
from rolloutlab.ingest import IngestError

LABELS = ("modèle-v2", "a/b c=d%", "ft:x/y", "10", "日本 run", "50%2F")  # "50%2F": decoded twice it would be "50/"


def odd_runs(path, labels=LABELS, broken=True):
    """Native rollouts with tool calls in runs whose labels a folder name cannot hold as they are
    (and a line that is not JSON: a reject)."""
    lines = []
    for i, label in enumerate(labels):
        for s in range(3):
            calls = [{"tool": "search", "turn": 0, "latency_s": 0.1, "output_chars": 10}] * (1 + (s + i) % 3)
            lines.append(json.dumps({"run": label, "sample_id": f"s{s}", "score": (s + i) % 2, "latency_s": 1.0 + s,
                                     "final_answer": "42", "tool_calls": calls}))
    path.write_text("\n".join(lines) + ("\n{broken\n" if broken else "\n"))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A database (closed) and its lake, built once: copy them before changing them."""
    root = tmp_path_factory.mktemp("built")
    paths, _ = synth.write_judged(root / "native", samples=4, attempts=2, messages=True, seed=3)
    con = rl.connect(root / "src.duckdb")
    rl.ingest(con, [*paths, odd_runs(root / "odd.jsonl")], progress=False)
    rl.export(con, root / "lake", progress=False)
    counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in lake.TABLES}
    con.close()
    return root / "src.duckdb", root / "lake", counts


@pytest.fixture
def lake_dir(built, tmp_path):
    shutil.copytree(built[1], tmp_path / "lake")
    return tmp_path / "lake"


@pytest.fixture
def db(built, tmp_path):
    shutil.copy(built[0], tmp_path / "src.duckdb")
    return tmp_path / "src.duckdb"


def edit_manifest(folder, change):
    path = folder / lake.MANIFEST
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta, default=str))


def parquet_count(path, glob=""):
    """Rows in the Parquet file ``path``, or in the files ``glob`` matches under the folder ``path``."""
    pattern = store.glob_literal(path) + glob
    return duckdb.execute("SELECT count(*) FROM read_parquet(?, hive_partitioning = false)", [pattern]).fetchone()[0]


# 1. the manifest is untrusted --------------------------------------------------------------------

INJECTION = "VARCHAR) AS x; COPY (SELECT 1) TO '{target}' (FORMAT csv); --"


def test_a_manifest_cannot_run_sql_through_connect_lake(lake_dir, tmp_path):
    pwned = tmp_path / "pwned"

    def craft(meta):
        meta["tables"]["messages"].update(rows=0, types=[INJECTION.format(target=pwned)] * 6)

    edit_manifest(lake_dir, craft)
    with pytest.raises(lake.LakeError, match=r"messages.*types.*export the lake again"):
        rl.connect_lake(lake_dir)
    assert not pwned.exists()


def test_a_manifest_cannot_run_sql_through_ingest(lake_dir, tmp_path):
    pwned = tmp_path / "pwned"
    inject = f"VARCHAR) AS \"rollout_id\") t WHERE false; COPY (SELECT 42) TO '{pwned}' (FORMAT csv); --"

    def craft(meta):
        meta["tables"]["tool_calls"].update(rows=0, columns=["rollout_id"], types=[inject])

    edit_manifest(lake_dir, craft)
    con = rl.connect(tmp_path / "back.duckdb")
    with pytest.raises(IngestError, match=r"tool_calls.*columns"):
        rl.ingest(con, lake_dir, progress=False)
    assert not pwned.exists() and con.execute("SELECT count(*) FROM sources").fetchone()[0] == 0
    con.close()


def _set(table, **fields):
    def change(meta):
        meta["tables"][table].update(fields)
    return change


def _types(table, i, value):
    def change(meta):
        meta["tables"][table]["types"][i] = value
    return change


def _columns(table, i, value):
    def change(meta):
        meta["tables"][table]["columns"][i] = value
    return change


@pytest.mark.parametrize("change, message", [
    (_set("runs", path="../other/runs.parquet"), r"runs.*path '\.\./other/runs\.parquet'.*'runs\.parquet'"),
    (_set("rollouts", path="../other/rollouts"), r"rollouts.*path"),
    (lambda m: m["tables"]["runs"].update(path=str(m["_other"] / "runs.parquet")), r"runs.*path"),
    (_set("runs", rows=-1), r"runs.*rows -1"),
    (_set("rollouts", rows="7"), r"rollouts.*rows '7'"),
    (_set("grades", rows=True), r"grades.*rows True"),
    (_set("runs", partition_by="run_id"), r"runs.*partition_by 'run_id'.*None"),
    (_set("rollouts", partition_by="label; DROP TABLE runs"), r"rollouts.*partition_by"),
    (_columns("rollouts", 1, "label"), r"rollouts.*columns"),
    (_types("rollouts", 0, "INTEGER"), r"rollouts.*types"),
    (lambda m: m["tables"].pop("grades"), r"grades.*missing"),
    (lambda m: m["tables"].update(evil=m["tables"]["runs"]), r"evil"),
    (lambda m: m.update(tables=["runs"]), r"tables"),
])
def test_every_manifest_field_is_checked(lake_dir, tmp_path, change, message):
    shutil.copytree(lake_dir, tmp_path / "other")

    def apply(meta):
        meta["_other"] = tmp_path / "other"
        change(meta)
        meta.pop("_other")

    edit_manifest(lake_dir, apply)
    with pytest.raises(lake.LakeError, match=message):
        rl.connect_lake(lake_dir)
    with pytest.raises(IngestError, match=message):
        rl.ingest(rl.connect(tmp_path / "back.duckdb"), lake_dir, progress=False)


def test_a_manifest_that_is_not_an_object_is_refused(lake_dir):
    (lake_dir / lake.MANIFEST).write_text("[1, 2]")
    with pytest.raises(lake.LakeError, match="not a rolloutlab lake manifest"):
        rl.connect_lake(lake_dir)


def test_a_lake_of_version_1_is_refused_with_what_to_do(lake_dir):
    """Version 1 kept run labels only in folder names (Spark decoded them wrongly)."""
    edit_manifest(lake_dir, lambda meta: meta.update(lake_version=1))
    with pytest.raises(lake.LakeError, match=r"lake version 1, this rolloutlab reads version 2: ingest it with the "
                                             r"release that wrote it .* export it again"):
        rl.connect_lake(lake_dir)


def test_the_schema_comes_from_the_store():
    con = duckdb.connect()
    for ddl in store.SCHEMA_DDL:
        con.execute(ddl)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert set(lake.TABLES) == tables - set(lake.INTERNAL_TABLES)
    for table in lake.TABLES:
        assert lake.canonical_schema()[table] == tuple(lake.table_schema(con, table))


# 2. one snapshot out, checked on the way back ----------------------------------------------------

def extra_file(tmp_path):
    """A file with new rollouts (with tool calls) of a new run, to ingest while an export runs."""
    return odd_runs(tmp_path / "late.jsonl", labels=("late-1", "late-2"), broken=False)


def assert_lake_is(folder, counts):
    """The lake holds exactly ``counts`` rows per table, and no row names a rollout it lacks."""
    for table in ("rollouts", "tool_calls", "sources"):
        n = parquet_count(folder / table, "/**/*.parquet") if table in lake.PARTITIONED else \
            parquet_count(folder / f"{table}.parquet")
        assert n == counts[table], table
    orphans = duckdb.execute(
        "SELECT count(*) FROM read_parquet(?) c WHERE c.rollout_id NOT IN (SELECT rollout_id FROM read_parquet(?))",
        [store.glob_literal(folder / "tool_calls") + "/**/*.parquet",
         store.glob_literal(folder / "rollouts") + "/**/*.parquet"]).fetchone()[0]
    assert orphans == 0


def test_export_reads_one_snapshot(db, tmp_path, monkeypatch, built):
    """Another connection commits an ingest after rollouts were written, before tool_calls: the
    lake is the state before it, whole."""
    counts = built[2]
    con = rl.connect(db)
    late = extra_file(tmp_path)
    original, fired = lake.export_query_sql, []

    def between_tables(table, columns):
        if table == "tool_calls" and not fired:
            fired.append(rl.ingest(con.cursor(), late, progress=False))  # its own transaction, committed
        return original(table, columns)

    monkeypatch.setattr(lake, "export_query_sql", between_tables)
    result = rl.export(con, tmp_path / "lake", progress=False).set_index("table")
    assert fired and fired[0].action[0] == "loaded"
    assert con.execute("SELECT count(*) FROM rollouts").fetchone()[0] > counts["rollouts"]  # the ingest did land
    assert_lake_is(tmp_path / "lake", counts)
    assert result.loc["tool_calls", "rows"] == counts["tool_calls"] and result.loc["sources", "rows"] == counts["sources"]
    # restored into a new database, the late file is new to it: nothing lost
    back = rl.connect(tmp_path / "back.duckdb")
    rl.ingest(back, tmp_path / "lake", progress=False)
    assert rl.ingest(back, late, progress=False).action[0] == "loaded"
    assert back.execute("SELECT count(*) FROM rollouts").fetchone()[0] == \
        con.execute("SELECT count(*) FROM rollouts").fetchone()[0]
    back.close()
    con.close()


def test_cli_export_holds_its_snapshot_while_a_writer_waits(db, tmp_path, monkeypatch, built):
    """`rolloutlab export` (a shared reader) and `rolloutlab ingest` in another process."""
    late = extra_file(tmp_path)
    original, writers = lake.export_query_sql, []

    def between_tables(table, columns):
        if table == "tool_calls" and not writers:
            writers.append(subprocess.Popen([sys.executable, "-m", "rolloutlab.cli", "ingest", "--db", str(db), str(late)],
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            waited = None
            deadline = time.monotonic() + 60
            while writers[0].poll() is None and time.monotonic() < deadline:
                if store.waiting_writer(db) is not None:
                    waited = waited or time.monotonic()
                    if time.monotonic() - waited > 3:  # it waits for us: long enough to have got in otherwise
                        break
                time.sleep(0.05)
        return original(table, columns)

    monkeypatch.setattr(lake, "export_query_sql", between_tables)
    assert main(["export", "--db", str(db), "--to", str(tmp_path / "lake")]) == 0
    out, err = writers[0].communicate(timeout=120)
    assert writers[0].returncode == 0, out + err
    assert_lake_is(tmp_path / "lake", built[2])
    after = rl.connect(db, read_only=True)
    assert after.execute("SELECT count(*) FROM rollouts").fetchone()[0] > built[2]["rollouts"]
    after.close()


def test_a_lake_missing_a_file_is_refused(lake_dir, tmp_path, built):
    gone = lake_dir / "rollouts" / "run_id=base" / "data_0.parquet"
    lost = parquet_count(gone)
    gone.unlink()
    n = built[2]["rollouts"]
    message = rf"rollouts has {n - lost} rows, its manifest says {n}"
    with pytest.raises(lake.LakeError, match=message):
        rl.connect_lake(lake_dir)
    back = rl.connect(tmp_path / "back.duckdb")
    with pytest.raises(IngestError, match=message):
        rl.ingest(back, lake_dir, progress=False)
    assert back.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 0
    back.close()
    # asked not to check, it opens (what is there)
    assert rl.connect_lake(lake_dir, verify=False).execute("SELECT count(*) FROM rollouts").fetchone()[0] == n - lost


def test_a_changed_row_count_is_refused(lake_dir, built):
    edit_manifest(lake_dir, _set("grades", rows=built[2]["grades"] + 1))
    with pytest.raises(lake.LakeError, match=rf"grades has {built[2]['grades']} rows, its manifest says"):
        rl.connect_lake(lake_dir)


def test_rows_that_name_what_the_lake_lacks_are_refused(lake_dir, tmp_path, built):
    # a rollouts file gone and the manifest count made to match: the tool calls of those rollouts are orphans
    gone = lake_dir / "rollouts" / "run_id=base" / "data_0.parquet"
    lost = parquet_count(gone)
    orphans = duckdb.execute("SELECT count(*) FROM read_parquet(?) WHERE run_id = 'base'",
                             [str(lake_dir / "tool_calls" / "**" / "*.parquet")]).fetchone()[0]
    assert orphans > 0
    gone.unlink()
    edit_manifest(lake_dir, _set("rollouts", rows=built[2]["rollouts"] - lost))
    with pytest.raises(lake.LakeError, match=rf"tool_calls has {orphans} rows whose rollout is not in rollouts"):
        rl.connect_lake(lake_dir)
    with pytest.raises(IngestError, match=rf"tool_calls has {orphans} rows whose rollout"):
        rl.ingest(rl.connect(tmp_path / "back.duckdb"), lake_dir, progress=False)


@pytest.mark.parametrize("table, where, message", [
    ("runs", "run_id <> 'base'", r"rollouts has \d+ rows whose run is not in runs \(e\.g\. 'base'\)"),
    ("sources", "path NOT LIKE '%odd.jsonl'", rf"rollouts has {3 * len(LABELS)} rows whose source is not in sources"),
])
def test_rollouts_need_their_run_and_source(lake_dir, table, where, message):
    file = lake_dir / f"{table}.parquet"
    con = duckdb.connect()
    con.execute(f"CREATE TABLE kept AS SELECT * FROM read_parquet(?) WHERE {where}", [str(file)])
    con.execute(f"COPY kept TO '{file}' (FORMAT parquet)")
    edit_manifest(lake_dir, _set(table, rows=con.execute("SELECT count(*) FROM kept").fetchone()[0]))
    with pytest.raises(lake.LakeError, match=message):
        rl.connect_lake(lake_dir)


TAMPERED = [  # (table, column, value written into one row, the reason users read)
    ("rollouts", "score", "'inf'::DOUBLE", "field 'score' must be a finite number, got inf"),
    ("rollouts", "latency_s", "-5.0", "field 'latency_s' must be a finite number >= 0, got -5.0"),
    ("rollouts", "input_tokens", "-100", "field 'input_tokens' must be an integer from 0 to 9223372036854775807, "
                                         "got -100"),
    ("rollouts", "status", "'hacked'", "field 'status' must be one of ok, model_error, infra_error, truncated, "
                                       "ungraded, got hacked"),
    ("rollouts", "started_at", "TIMESTAMP '2999-01-01'", "field 'started_at' must be an ISO-8601 timestamp string "
                                                         "from 1990-01-01 to 2100-01-01, got 2999-01-01 00:00:00"),
    ("tool_calls", "output_chars", "-1", "field 'output_chars' must be an integer from 0 to 9223372036854775807, "
                                         "got -1"),
    ("grades", "score", "'nan'::DOUBLE", "field 'score' must be a finite number, got nan"),
    ("grades", "weight", "1e300", "field 'weight' must be a finite number from 0 to 1e+06, got 1e+300"),
]


@pytest.mark.parametrize("table, column, value, reason", TAMPERED)
def test_a_lake_holding_a_value_no_log_could_is_refused(lake_dir, tmp_path, capsys, table, column, value, reason):
    """#34: a rollouts file rewritten with score=+inf, latency_s=-5, input_tokens=-100 (row
    counts kept) loaded with exit 0. A lake is held to a log's checks: refused, naming the file,
    the table, the rollout, the field and the value; nothing is stored."""
    file = next((lake_dir / table / "run_id=base").glob("*.parquet"))
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM read_parquet(?)", [str(file)])
    victim = con.execute("SELECT rollout_id FROM t ORDER BY rollout_id LIMIT 1").fetchone()[0]
    con.execute(f'UPDATE t SET "{column}" = {value} WHERE rollout_id = ?', [victim])
    if (table, column) == ("rollouts", "started_at"):
        con.execute('UPDATE t SET ended_at = NULL WHERE rollout_id = ?', [victim])
    con.execute(f"COPY t TO '{file}' (FORMAT parquet)")
    con.close()
    assert parquet_count(file) > 1  # the row count kept: the count check cannot see it
    want = f"{file}: {table} (rollout '{victim}'): {reason}: a value no log could load"
    with pytest.raises(lake.LakeError) as err:
        rl.connect_lake(lake_dir)
    assert str(err.value).startswith(want)
    db = tmp_path / "back.duckdb"
    capsys.readouterr()
    assert main(["ingest", "--db", str(db), str(lake_dir)]) == 2
    err = capsys.readouterr().err
    assert want in err and "export it again" in err and "defect" not in err
    con = rl.connect(db)
    assert con.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 0  # nothing of it stored
    con.close()


def test_every_value_a_loader_wrote_passes_the_lake_checks(built, tmp_path):
    """The lake checks take the loaders' own rules: every value a log loaded reads back."""
    src, folder, counts = built
    back = rl.connect(tmp_path / "back.duckdb")
    rl.ingest(back, folder, progress=False)
    assert back.execute("SELECT count(*) FROM rollouts").fetchone()[0] == counts["rollouts"]
    back.close()
    assert set(lake.value_rules()) <= set(lake.TABLES)


# 3. corrupt files are named -----------------------------------------------------------------------

@pytest.mark.parametrize("relative", ["rollouts/run_id=step10/data_0.parquet", "runs.parquet",
                                      "messages/run_id=base/data_0.parquet"])
def test_a_corrupt_file_is_named(lake_dir, tmp_path, relative, capsys):
    bad = lake_dir / relative
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # cut off: no footer
    with pytest.raises(lake.LakeError, match=rf"{bad}: not a readable Parquet file.*export the lake again"):
        rl.connect_lake(lake_dir)
    with pytest.raises(IngestError, match=rf"{bad}: not a readable Parquet file"):
        rl.ingest(rl.connect(tmp_path / "back.duckdb"), lake_dir, progress=False)
    capsys.readouterr()
    assert main(["ingest", "--db", str(tmp_path / "cli.duckdb"), str(lake_dir)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "defect" not in err


# 4. a killed export leaves nothing for ever --------------------------------------------------------

def test_stale_staging_folders_are_removed(built, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / f".lake.partial-{dead.pid}"
        busy = tmp_path / f".lake.partial-{alive.pid}"
        other = tmp_path / f".other.partial-{dead.pid}"
        for folder in (stale, busy, other):
            (folder / "rollouts").mkdir(parents=True)
            (folder / "runs.parquet").write_bytes(b"half")
        con = rl.connect(built[0], read_only=True)
        rl.export(con, tmp_path / "lake", progress=False)
        con.close()
        assert not stale.exists()  # its export was killed
        assert busy.is_dir() and other.is_dir()  # an export still running; another target's
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["lake", busy.name, other.name])
    finally:
        alive.kill()
        alive.wait()


# 5. lake paths are taken literally ----------------------------------------------------------------

def frame(con, table):
    df = con.execute(f'SELECT * FROM "{table}"').df()
    return df.sort_values(list(df.columns)).reset_index(drop=True)


@pytest.mark.parametrize("name", ["lake[1]", "lake?", "lake *"])
def test_a_lake_folder_with_glob_characters_round_trips(built, tmp_path, name):
    src = rl.connect(built[0], read_only=True)
    rl.export(src, tmp_path / name, progress=False)
    assert (tmp_path / name / "runs.parquet").is_file()
    view = rl.connect_lake(tmp_path / name)
    back = rl.connect(tmp_path / "back.duckdb")
    rl.ingest(back, tmp_path / name, progress=False)
    for table in lake.TABLES:
        expected = frame(src, table)
        pd.testing.assert_frame_equal(frame(view, table), expected, obj=table)
        pd.testing.assert_frame_equal(frame(back, table), expected, obj=table)
    back.close()
    src.close()


def test_a_lake_star_folder_reads_only_itself(built, tmp_path):
    src = rl.connect(built[0], read_only=True)
    rl.export(src, tmp_path / "lake*", progress=False)
    rl.export(src, tmp_path / "lake-b", progress=False)  # a neighbour the name would match as a glob
    view = rl.connect_lake(tmp_path / "lake*")
    for table in lake.TABLES:
        assert view.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == built[2][table], table
    src.close()


def test_run_labels_come_back_identical(built):
    view = rl.connect_lake(built[1])
    src = rl.connect(built[0], read_only=True)
    assert sorted(rl.runs(view).run) == sorted(rl.runs(src).run)
    assert set(LABELS) <= set(rl.runs(view).run)
    for table in ("rollouts", "tool_calls"):
        in_files = duckdb.execute("SELECT DISTINCT run_id FROM read_parquet(?, hive_partitioning = false)",
                                  [store.glob_literal(built[1] / table) + "/**/*.parquet"]).fetchall()
        assert set(LABELS) <= {r[0] for r in in_files}  # the label is in the files, not only in folder names
    for run in LABELS:
        pd.testing.assert_frame_equal(rl.summary(view, run), rl.summary(src, run))
    src.close()
