"""Paths and defaults."""
from __future__ import annotations

from pathlib import Path

from rolloutlab import config


def test_db_path_precedence(monkeypatch):
    monkeypatch.delenv(config.DB_ENV_VAR, raising=False)
    assert config.db_path() == config.PROJECT_ROOT / "data" / "rolloutlab.duckdb"
    monkeypatch.setenv(config.DB_ENV_VAR, "/tmp/env.duckdb")
    assert config.db_path() == Path("/tmp/env.duckdb")
    assert config.db_path("x.duckdb") == Path("x.duckdb")


def test_project_root_holds_the_checkout():
    assert (config.PROJECT_ROOT / "lib" / "rolloutlab" / "config.py").is_file()
    assert config.NATIVE_SCHEMA.is_file()


def test_progress_is_quiet_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert config.progress_disabled() is True
    monkeypatch.delenv("CI")
    assert config.progress_disabled() is None
