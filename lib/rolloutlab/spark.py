"""The metrics on Apache Spark, over a Parquet lake (``rolloutlab export``).

One definition per metric: the metric functions of ``rolloutlab.metrics`` and ``compare`` take a
``SparkConnection`` in place of a DuckDB connection. It runs their SQL builders' queries on Spark,
translated by sqlglot from DuckDB's dialect to Spark's (parameters bound as literals in the
syntax tree, never pasted as text); the Python around the queries (pivots, the bootstrap on the
per-sample table) runs on the driver, as with DuckDB::

    from rolloutlab import spark as rs
    con = rs.connect("lake/")                  # local[*], or spark=an existing SparkSession
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

from . import config, lake as lakes
from .compare import per_sample_table

SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",  # timestamps are UTC throughout
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",  # run "10" stays a string
    "spark.sql.ansi.enabled": "false",  # x / 0 is NULL, as in DuckDB
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
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


def to_spark_sql(sql: str, params: dict | None = None) -> str:
    """A DuckDB query of the SQL builders in Spark's dialect, its ``$name`` parameters bound."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    values = params or {}

    def bind(node):
        if isinstance(node, exp.Placeholder) and node.name:
            if node.name not in values:
                raise KeyError(f"no value for the query's parameter ${node.name}")
            return _literal(values[node.name])
        return node

    return tree.transform(bind).sql(dialect="spark")


class SparkResult:
    """What the metric functions read from a DuckDB result, from a Spark DataFrame."""

    def __init__(self, frame):
        self.frame = frame
        self._pandas: pd.DataFrame | None = None

    def df(self) -> pd.DataFrame:
        if self._pandas is None:
            self._pandas = self.frame.toPandas()
        return self._pandas.copy()

    def fetchall(self) -> list[tuple]:
        return [tuple(r) for r in self.df().itertuples(index=False, name=None)]

    def fetchone(self):
        rows = self.fetchall()
        return rows[0] if rows else None

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        df = self.df()
        return {c: df[c].to_numpy() for c in df.columns}


class SparkConnection:
    """A Spark session with the lake's tables as temporary views; ``execute`` takes the DuckDB
    SQL of the builders."""

    def __init__(self, spark, lake: str | os.PathLike):
        self.spark = spark
        self.lake = Path(lake)
        self.tables = lakes.manifest(lake)["tables"]
        spark.udf.register("lgamma", math.lgamma, "double")  # Spark SQL has no lgamma (pass@k)
        for table, info in self.tables.items():
            self._view(table, info)
        self.queries: list[str] = []  # every statement sent, in Spark's dialect

    def _view(self, table: str, info: dict) -> None:
        root = self.lake / info["path"]
        if info["partition_by"] and not info["rows"]:
            empty = "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS \"{c}\"" for c, t in zip(info["columns"], info["types"]))
            frame = self.spark.sql(to_spark_sql(empty + " LIMIT 0"))
        elif info["partition_by"]:
            frame = self.spark.read.option("basePath", str(root)).parquet(str(root)).select(*info["columns"])
        else:
            frame = self.spark.read.parquet(str(root)).select(*info["columns"])
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
    return builder.getOrCreate()


def connect(lake: str | os.PathLike, spark=None, master: str | None = None) -> SparkConnection:
    """The lake on Spark: ``spark`` an existing session (a cluster's), else a local one. Apply
    ``SPARK_CONF`` to a session of your own."""
    return SparkConnection(spark or session(master), lake)


def compare_inputs(con, base: str, candidate: str, pass_threshold: float | None = None,
                   include_errors: bool = False) -> pd.DataFrame:
    """The per-sample table ``compare`` bootstraps over (one row per sample both runs have),
    computed where ``con`` lives (Spark or DuckDB)."""
    return per_sample_table(con, base, candidate, pass_threshold, include_errors)
