"""The metrics on Apache Spark, over a Parquet lake (``rolloutlab export``).

One definition per metric: the metric functions of ``rolloutlab.analysis.metrics`` and ``compare`` take a
``SparkConnection`` in place of a DuckDB connection. It runs their SQL builders' queries on Spark,
translated by sqlglot from DuckDB's dialect to Spark's (parameters bound as literals in the
syntax tree, never pasted as text); the Python around the queries (pivots, the bootstrap on the
per-sample table) runs on the driver, as with DuckDB::

    from rolloutlab import spark as rs
    con = rs.connect("lake/")                  # a local session (config.SPARK_MASTER), or spark=yours
    rl.summary(con, "base")                    # the same columns as on DuckDB
    rs.compare_inputs(con, "base", "step10")   # compare's per-sample table

pyspark is imported here only (``pip install pyspark``; Spark needs Java 17+).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp

from .. import config
from . import lake as lakes
from ..analysis.compare import per_sample_table

SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",  # timestamps are UTC throughout
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",  # run "10" stays a string
    "spark.sql.ansi.enabled": "false",  # x / 0 is NULL, as in DuckDB
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # no stage bars printed into notebooks and logs
}


def _literal(value: Any) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, np.integer)):
        return exp.Literal.number(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"cannot bind {value!r} as a Spark literal")
        return exp.Literal.number(repr(float(value)))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (list, tuple)):
        return exp.Array(expressions=[_literal(v) for v in value])
    raise TypeError(f"cannot bind a {type(value).__name__} as a Spark literal")


def _function(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _spark_node(node: exp.Expression) -> exp.Expression:
    """DuckDB functions sqlglot leaves as they are, as the Spark function that computes the same."""
    if isinstance(node, exp.PercentileCont):  # quantile_cont: linear interpolation, as Spark's percentile
        return _function("PERCENTILE", node.this, node.expression)
    if isinstance(node, exp.Median):
        return _function("PERCENTILE", node.this, exp.Literal.number("0.5"))
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "list_position":
        return _function("ARRAY_POSITION", *node.expressions)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "list_extract":  # both count from 1
        return _function("ELEMENT_AT", *(e.transform(_spark_node) for e in node.expressions))
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "list_sum":  # pass@k's product, in logs
        total = sqlglot.parse_one("AGGREGATE(ARRAY(), CAST(0 AS DOUBLE), (acc, v) -> acc + v)", read="spark")
        total.set("this", node.expressions[0])
        return total
    return node


def to_spark_sql(sql: str, params: dict | list | tuple | None = None) -> str:
    """A DuckDB query of the SQL builders in Spark's dialect, its parameters (``$name`` from a
    dict, ``?`` from a list) bound as literals of the syntax tree."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    named = params if isinstance(params, dict) else {}
    positional = list(params) if isinstance(params, (list, tuple)) else []

    def bind(node):
        if isinstance(node, exp.Placeholder):
            if node.this is None:  # ?
                if not positional:
                    raise KeyError("the query has more ? parameters than values")
                return _literal(positional.pop(0))
            if node.name not in named:
                raise KeyError(f"no value for the query's parameter ${node.name}")
            return _literal(named[node.name])
        return node

    return tree.transform(bind).transform(_spark_node).sql(dialect="spark")


class SparkResult:
    """What the metric functions read from a DuckDB result, from a Spark DataFrame."""

    def __init__(self, frame):
        self.frame = frame
        self._pandas: pd.DataFrame | None = None

    def df(self) -> pd.DataFrame:
        if self._pandas is None:
            import pyarrow as pa

            table = self.frame.toArrow()
            df = table.to_pandas()
            for name, column in zip(table.column_names, table.columns):
                # as DuckDB gives them: integers with a NULL are pandas' nullable integers, not floats
                if pa.types.is_integer(column.type) and column.null_count:
                    df[name] = pd.array(column.to_pylist(), dtype=f"Int{column.type.bit_width}")
            self._pandas = df
        return self._pandas.copy()

    def fetchall(self) -> list[tuple]:
        return [tuple(row) for row in self.frame.collect()]  # NULL stays None (pandas would make it NaN)

    def fetchone(self):
        rows = self.fetchall()
        return rows[0] if rows else None

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        df = self.df()
        return {c: df[c].to_numpy() for c in df.columns}


_HADOOP_GLOB = "\\{}[]*?"


def hadoop_literal(path: str) -> str:
    """``path`` as Spark's file readers take it literally: Hadoop expands { } [ ] * ? in every
    path it is given, and a backslash makes the next character itself."""
    return "".join("\\" + c if c in _HADOOP_GLOB else c for c in path)


def _local_root(lake: Path, root: str | None) -> Path | None:
    """The local folder of the lake's files, when they are local (to name a corrupt one)."""
    if root is None:
        return lake
    if root.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(root).path))
    return None if "://" in root else Path(root)


class SparkConnection:
    """A Spark session with the lake's tables as temporary views; ``execute`` takes the DuckDB
    SQL of the builders. ``verify``: check the lake first (``lake.check_lake``: row counts against
    the manifest, every row's rollout, source and run there), as ``connect_lake`` does."""

    def __init__(self, spark, lake: str | os.PathLike, root: str | None = None, verify: bool = True):
        self.spark = spark
        self.lake = Path(lake)
        self.root = (root or str(self.lake)).rstrip("/")  # where Spark reads the files: s3a://... on a cluster
        self.tables = lakes.manifest(lake)["tables"]  # checked: the store's own columns, types and paths
        self.queries: list[str] = []  # every statement sent, in Spark's dialect
        try:
            for table, info in self.tables.items():
                self._view(table, info)
            if verify:
                lakes.check_lake(self, self.root, lakes.views(), self.tables, types=False)
        except lakes.LakeError:
            raise
        except Exception as exc:  # Spark's own errors (AnalysisException, Py4JJavaError, ...): name the file
            local = _local_root(self.lake, root)
            found = lakes.unreadable(local, exc) if local is not None and local.is_dir() else None
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise found or lakes.LakeError(f"{self.root}: the lake could not be read on Spark ({type(exc).__name__}: "
                                           f"{first}); check its files, or export it again") from exc

    def _view(self, table: str, info: dict) -> None:
        columns = info["columns"]  # the store's, checked by lakes.manifest
        path = hadoop_literal(f"{self.root}/{lakes.expected_path(table)}")
        if table in lakes.PARTITIONED and not info["rows"]:
            frame = self.spark.sql(to_spark_sql(lakes.empty_table_sql(table)))
        elif table in lakes.PARTITIONED:
            # run_id from the files, not from the folder names: Spark's partition discovery turns each
            # %XX escape into one character, not a UTF-8 byte ("mod%C3%A8le" came back "modÃ¨le")
            frame = self.spark.read.option("recursiveFileLookup", "true").parquet(path).select(*columns)
        else:
            frame = self.spark.read.parquet(path).select(*columns)
        frame.createOrReplaceTempView(table)

    def execute(self, sql: str, params: dict | None = None) -> SparkResult:
        query = to_spark_sql(sql, params)
        self.queries.append(query)
        return SparkResult(self.spark.sql(query))

    def close(self) -> None:
        pass  # the session is the caller's (or connect's) to stop


def session(master: str | None = None, app_name: str = "rolloutlab"):
    """A Spark session with the settings rolloutlab needs (UTC, string partitions, NULL on / 0)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master or config.SPARK_MASTER)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")  # a failed query raises; Spark's own log of it is noise
    return spark


def connect(lake: str | os.PathLike, spark=None, master: str | None = None, root: str | None = None,
            verify: bool = True) -> SparkConnection:
    """The lake on Spark: ``spark`` an existing session (a cluster's; apply ``SPARK_CONF`` to it),
    else a local one. ``lake``: a local folder holding the lake's manifest; ``root``: where Spark
    reads the Parquet files when they are elsewhere (``s3a://bucket/lake``), else ``lake``.
    ``verify`` (default): refuse a lake whose row counts differ from its manifest or whose rows
    name a rollout, source or run it lacks (one Spark query; ``verify=False`` skips it)."""
    return SparkConnection(spark or session(master), lake, root, verify)


def compare_inputs(con, base: str, candidate: str, pass_threshold: float | None = None,
                   include_errors: bool = False) -> pd.DataFrame:
    """The per-sample table ``compare`` bootstraps over (one row per sample both runs have),
    computed where ``con`` lives (Spark or DuckDB)."""
    return per_sample_table(con, base, candidate, pass_threshold, include_errors)
