"""The metrics on Apache Spark (local mode) over a lake equal DuckDB's, to 1e-9.

Marked ``spark``: CI runs them; ``--no-spark`` (or $ROLLOUTLAB_NO_SPARK=1) skips them locally."""
import re
import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab.demo import synth

pytestmark = pytest.mark.spark
TOL = dict(check_dtype=False, rtol=1e-9, atol=1e-12)


def numbers(df: pd.DataFrame) -> pd.DataFrame:
    """Missing numbers as NaN whichever way the engine typed them (DuckDB's sum of BIGINT is a
    HUGEINT, a float in pandas; Spark's is a BIGINT, a nullable integer)."""
    return df.reset_index(drop=True).apply(
        lambda c: c.astype("float64") if isinstance(c.dtype, pd.api.extensions.ExtensionDtype)
        and pd.api.types.is_numeric_dtype(c.dtype) and not pd.api.types.is_bool_dtype(c.dtype) else c)


def same(duck: pd.DataFrame, spark: pd.DataFrame, what: str) -> None:
    assert list(spark.columns) == list(duck.columns), what
    pd.testing.assert_frame_equal(numbers(spark), numbers(duck), obj=what, **TOL)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A session whose executors have no Python with rolloutlab (as a cluster's workers): their
    Python is a stand-in that fails, so a metric that ships rows to Python fails the tests."""
    pytest.importorskip("pyspark")
    import os

    from rolloutlab.store import spark as rs

    stand_in = tmp_path_factory.mktemp("workers") / "python"
    stand_in.write_text("#!/bin/sh\necho 'No module named rolloutlab (a worker without it)' >&2\nexit 1\n")
    stand_in.chmod(0o755)
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = str(stand_in)
    session = rs.session()
    yield session
    session.stop()
    if before is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = before


def lake_of(tmp_path, paths):
    con = rl.connect(tmp_path / "db.duckdb")
    rl.ingest(con, paths)
    rl.export(con, tmp_path / "lake")
    return con


def check_every_metric(con, sc, pairs):
    from rolloutlab.store import spark as rs

    runs = rl.runs(con).run.tolist()
    same(rl.summary(con), rl.summary(sc), "summary")
    same(rl.by_step(con), rl.by_step(sc), "by_step")
    for run in runs:
        same(rl.sample_stats(con, run), rl.sample_stats(sc, run), f"sample_stats {run}")
        same(rl.tool_stats(con, run), rl.tool_stats(sc, run), f"tool_stats {run}")
    for base, candidate in pairs:
        same(rs.compare_inputs(con, base, candidate), rs.compare_inputs(sc, base, candidate), f"compare {base}")
    # the bootstrap runs on the driver over that table: compare itself agrees too
    for base, candidate in pairs[:1]:
        same(rl.compare(con, base, candidate, n_boot=200), rl.compare(sc, base, candidate, n_boot=200), "compare")


def test_demo_data(spark, tmp_path):
    from rolloutlab.store import spark as rs

    paths, _ = synth.write_judged(tmp_path / "native", samples=40, attempts=3, messages=False, seed=5)
    endpoint = synth.write_endpoint(tmp_path / "endpoint", samples=10, attempts=2, steps=(0, 5, 10))
    con = lake_of(tmp_path, [*paths, *endpoint])
    sc = rs.connect(tmp_path / "lake", spark=spark)
    assert len(rl.runs(con)) == 5
    check_every_metric(con, sc, [("base", "step10"), ("train-step0", "train-step10")])
    assert not any(re.search(r"\$[A-Za-z_]", q) for q in sc.queries)  # every parameter bound ($.x: a JSON path)


def test_real_logs(spark, tmp_path, real_dir):
    from rolloutlab.store import spark as rs

    con = lake_of(tmp_path, [real_dir])
    sc = rs.connect(tmp_path / "lake", spark=spark)
    runs = rl.runs(con).run.tolist()
    assert any("/" in r or ":" in r for r in runs)  # labels a path cannot hold as they are
    tau2 = [r for r in runs if "tau2" in r or r.startswith("gpt-4.1")]
    check_every_metric(con, sc, [(tau2[0], tau2[1])] if len(tau2) > 1 else [])


def test_parameters_are_bound_as_literals():
    from rolloutlab.store.spark import to_spark_sql

    sql = to_spark_sql("SELECT list_position($runs, run_id), quantile_cont(v, 0.5) FROM rollouts "
                       "WHERE list_contains($runs, run_id) AND label = $label", {"runs": ["a'b", "c"], "label": "x' OR 1=1 --"})
    assert "ARRAY('a\\'b', 'c')" in sql and "ARRAY_POSITION" in sql and "PERCENTILE(v, 0.5)" in sql
    assert "label = 'x\\' OR 1=1 --'" in sql
    assert to_spark_sql("SELECT * FROM runs WHERE step = ? AND label = ?", [3, "a"]).endswith("step = 3 AND label = 'a'")
    with pytest.raises(KeyError, match=r"\$missing"):
        to_spark_sql("SELECT $missing", {})


def test_files_read_from_another_root(spark, tmp_path):
    """The manifest in one folder, the Parquet files elsewhere (as on object storage)."""
    import shutil

    from rolloutlab.store import spark as rs
    from rolloutlab.store.lake import MANIFEST

    paths, _ = synth.write_judged(tmp_path / "native", samples=8, attempts=2, messages=False, seed=1)
    con = lake_of(tmp_path, paths)
    (tmp_path / "manifest").mkdir()
    shutil.copy(tmp_path / "lake" / MANIFEST, tmp_path / "manifest" / MANIFEST)
    shutil.move(tmp_path / "lake", tmp_path / "elsewhere")
    sc = rs.connect(tmp_path / "manifest", spark=spark, root=(tmp_path / "elsewhere").as_uri())
    same(rl.summary(con), rl.summary(sc), "summary")


def test_run_labels_come_back_identical(spark, tmp_path):
    """Non-ASCII, / : = % and spaces in run labels: the same runs on Spark as on DuckDB (a lake of
    version 1 gave "modÃ¨le-v2" on Spark, and its summary no rows)."""
    from rolloutlab.store import spark as rs
    from test_lake_checks import LABELS, odd_runs

    paths, _ = synth.write_judged(tmp_path / "native", samples=4, attempts=2, messages=False, seed=2)
    con = lake_of(tmp_path, [*paths, odd_runs(tmp_path / "odd.jsonl")])
    sc = rs.connect(tmp_path / "lake", spark=spark)
    view = rl.connect_lake(tmp_path / "lake")
    assert set(LABELS) <= set(rl.summary(con).run)
    for other in (sc, view):
        labels = [r[0] for r in other.execute("SELECT DISTINCT run_id FROM rollouts ORDER BY 1").fetchall()]
        assert labels == [r[0] for r in con.execute("SELECT DISTINCT run_id FROM rollouts ORDER BY 1").fetchall()]
    same(rl.summary(con), rl.summary(sc), "summary")
    same(rl.summary(con), rl.summary(view), "summary over connect_lake")
    for run in LABELS:
        same(rl.tool_stats(con, run), rl.tool_stats(sc, run), f"tool_stats {run}")


def test_a_lake_folder_with_glob_characters(spark, tmp_path):
    from rolloutlab.store import spark as rs

    paths, _ = synth.write_judged(tmp_path / "native", samples=4, attempts=2, messages=False, seed=4)
    con = rl.connect(tmp_path / "db.duckdb")
    rl.ingest(con, paths, progress=False)
    rl.export(con, tmp_path / "lake[1]", progress=False)
    rl.export(con, tmp_path / "lake1", progress=False)  # what "lake[1]" means as a glob: must not be read
    (tmp_path / "lake1" / "runs.parquet").unlink()
    same(rl.summary(con), rl.summary(rs.connect(tmp_path / "lake[1]", spark=spark)), "summary")


def test_a_lake_spark_cannot_trust_is_refused(spark, tmp_path):
    import json

    from rolloutlab.store import lake, spark as rs

    paths, _ = synth.write_judged(tmp_path / "native", samples=4, attempts=2, messages=True, seed=6)
    con = lake_of(tmp_path, paths)
    manifest = tmp_path / "lake" / lake.MANIFEST
    meta = json.loads(manifest.read_text())
    pwned = tmp_path / "pwned"
    crafted = json.loads(json.dumps(meta))
    crafted["tables"]["messages"].update(rows=0, types=[f"VARCHAR) AS x; COPY (SELECT 1) TO '{pwned}' --"] * 6)
    manifest.write_text(json.dumps(crafted))
    with pytest.raises(lake.LakeError, match="messages.*types"):
        rs.connect(tmp_path / "lake", spark=spark)
    assert not pwned.exists()
    # a row count that is not the files': refused (one Spark query)
    crafted = json.loads(json.dumps(meta))
    crafted["tables"]["grades"]["rows"] += 1
    manifest.write_text(json.dumps(crafted))
    n = con.execute("SELECT count(*) FROM grades").fetchone()[0]
    with pytest.raises(lake.LakeError, match=f"grades has {n} rows, its manifest says {n + 1}"):
        rs.connect(tmp_path / "lake", spark=spark)
    # a file cut off: named
    manifest.write_text(json.dumps(meta))
    bad = tmp_path / "lake" / "rollouts" / "run_id=base" / "data_0.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.raises(lake.LakeError, match=f"{bad}: not a readable Parquet file"):
        rs.connect(tmp_path / "lake", spark=spark)
