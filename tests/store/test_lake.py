"""The Parquet lake: export, layout and manifest, and the round trip back through ingest."""
import json

import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab.store import lake
from rolloutlab import store
from rolloutlab.demo import synth


def table(con, name):
    cols = lake.table_columns(con, name)
    return con.execute(f'SELECT * FROM "{name}" ORDER BY ALL').df()[cols]


@pytest.fixture
def demo_db(tmp_path):
    """Native runs with graders and messages, endpoint logs with events and job metrics, a reject,
    and a run label a path cannot hold as it is."""
    paths, _ = synth.write_judged(tmp_path / "native", samples=12, attempts=2, messages=True, seed=3)
    endpoint = synth.write_endpoint(tmp_path / "endpoint", samples=6, attempts=2, steps=(0, 2))
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"run": "a/b c=d%", "sample_id": "s1", "score": 1.0}) + "\n{broken\n")
    con = rl.connect(tmp_path / "src.duckdb")
    rl.ingest(con, [*paths, *endpoint, odd])
    yield con
    con.close()


def test_export_layout_and_manifest(demo_db, tmp_path):
    out = tmp_path / "lake"
    result = rl.export(demo_db, out).set_index("table")
    meta = json.loads((out / lake.MANIFEST).read_text())
    assert meta["schema_version"] == store.SCHEMA_VERSION and meta["compression"] == "zstd"
    assert set(meta["tables"]) == set(lake.TABLES)
    for name in lake.TABLES:  # counts in the manifest are the database's
        n = demo_db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        assert meta["tables"][name]["rows"] == n == result.loc[name, "rows"]
    runs = sorted(p.name for p in (out / "rollouts").iterdir())
    assert "run_id=a%2Fb%20c%3Dd%25" in runs and "run_id=base" in runs
    assert (out / "tool_calls" / "run_id=base").is_dir() and (out / "runs.parquet").is_file()
    codec = demo_db.execute(f"SELECT DISTINCT compression FROM parquet_metadata('{out}/runs.parquet')").fetchall()
    assert codec == [("ZSTD",)]
    with pytest.raises(lake.LakeError, match="not empty"):
        rl.export(demo_db, out)


def test_round_trip_gives_identical_tables(demo_db, tmp_path):
    rl.export(demo_db, tmp_path / "lake")
    back = rl.connect(tmp_path / "back.duckdb")
    result = rl.ingest(back, tmp_path / "lake")
    assert set(result.action) == {"loaded"} and len(result) == demo_db.execute("SELECT count(*) FROM sources").fetchone()[0]
    for name in lake.TABLES:
        pd.testing.assert_frame_equal(table(back, name), table(demo_db, name), check_dtype=True, obj=name)
    # a second ingest of the lake adds nothing, and a new file gets a fresh source id
    again = rl.ingest(back, tmp_path / "lake")
    assert set(again.action) == {"unchanged"}
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"run": "late", "sample_id": "s1", "score": 0.5}) + "\n")
    new = rl.ingest(back, extra)
    assert new.source_id[0] > back.execute("SELECT max(source_id) FROM sources WHERE path <> ?", [str(extra)]).fetchone()[0]
    assert rl.summary(back, "base").mean_score[0] == rl.summary(demo_db, "base").mean_score[0]
    back.close()


def test_into_a_database_that_has_other_sources(demo_db, tmp_path):
    rl.export(demo_db, tmp_path / "lake")
    other = rl.connect(tmp_path / "other.duckdb")
    first = tmp_path / "first.jsonl"
    first.write_text(json.dumps({"run": "mine", "sample_id": "s1", "score": 1.0}) + "\n")
    rl.ingest(other, first)
    rl.ingest(other, tmp_path / "lake")
    n = other.execute("SELECT count(*), count(DISTINCT source_id) FROM sources").fetchone()
    assert n[0] == n[1] == demo_db.execute("SELECT count(*) FROM sources").fetchone()[0] + 1
    assert other.execute("SELECT count(*) FROM rollouts").fetchone()[0] == \
        demo_db.execute("SELECT count(*) FROM rollouts").fetchone()[0] + 1
    other.close()


def test_a_lake_of_another_version_is_refused(demo_db, tmp_path):
    rl.export(demo_db, tmp_path / "lake")
    path = tmp_path / "lake" / lake.MANIFEST
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, "schema_version": 99}))
    with pytest.raises(rl.IngestError, match="schema version 99"):
        rl.ingest(rl.connect(tmp_path / "x.duckdb"), tmp_path / "lake")


def test_duckdb_views_over_a_lake(demo_db, tmp_path):
    rl.export(demo_db, tmp_path / "lake")
    view = rl.connect_lake(tmp_path / "lake")
    for run in ("base", "a/b c=d%"):
        pd.testing.assert_frame_equal(rl.summary(view, run), rl.summary(demo_db, run))
    pd.testing.assert_frame_equal(rl.tool_stats(view, "step10"), rl.tool_stats(demo_db, "step10"))
