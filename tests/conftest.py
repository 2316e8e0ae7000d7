from __future__ import annotations

from pathlib import Path

import pytest

import rolloutlab as rl
from rolloutlab import config

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "test.duckdb"


@pytest.fixture
def con(db_path):
    connection = rl.connect(db_path)
    yield connection
    connection.close()


@pytest.fixture
def real_dir() -> Path:
    path = config.real_data_dir()
    if not path.is_dir():
        pytest.skip(f"real logs not found at {path} (set ${config.REAL_DATA_ENV_VAR} to their folder)")
    return path
