"""Every notebook: stored without outputs, thin, parameterized; executed end to end on a small
database with its parameters injected (as papermill does: a cell after the tagged one)."""
from __future__ import annotations


import nbformat
import pytest
from nbclient import NotebookClient

import rolloutlab as rl
from rolloutlab import config
from rolloutlab.demo import synth

NOTEBOOKS = sorted(config.NOTEBOOKS_DIR.glob("*.ipynb"))


def test_the_notebooks_exist():
    assert [p.stem for p in NOTEBOOKS] == ["01-explore", "02-readiness", "03-tool-use", "04-latency",
                                           "05-compare", "06-report", "07-live", "08-curate", "09-failure-modes",
                                           "10-platforms"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_thin_and_parameterized(path):
    book = nbformat.read(path, as_version=4)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs before committing"
    assert "parameters" in code[0].metadata.get("tags", []), "the first code cell must be tagged 'parameters'"
    for cell in code:
        lines = cell.source.splitlines()
        assert not any(line.lstrip().startswith(("def ", "class ", "for ", "while ")) for line in lines), \
            "functions and loops belong in the library"
    assert "data/" not in code[0].source.split("#")[0], "paths come from rolloutlab.config, not the notebook"


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nbdata")
    paths = synth.write_native(folder / "logs", samples=30, attempts=3, checkpoints="base,step10", seed=5)
    db = folder / "nb.duckdb"
    con = rl.connect(db)
    rl.ingest(con, paths)
    con.close()
    return db


def execute(path, db):
    book = nbformat.read(path, as_version=4)
    index = next(i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell(f"DB = {str(db)!r}\nBASE = 'base'\nCANDIDATE = 'step10'\nMAX_UPDATES = 1")
    injected.metadata["tags"] = ["injected-parameters"]
    book.cells.insert(index + 1, injected)
    NotebookClient(book, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(config.NOTEBOOKS_DIR)}}).execute()
    return book


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executes_end_to_end(path, small_db, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    book = execute(path, small_db)
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "every notebook shows at least one figure"
    assert not raw_values(outputs), "tables go through rolloutlab.text.fmt (fmt.styled, fmt.facts)"


def raw_values(outputs) -> list[str]:
    """What a table shows that no person should read: NaN, <NA>, None, and numbers with more than
    four significant digits (0.697815, 0.050000000000000044), outside figures and page styles."""
    import re

    found = []
    for o in outputs:
        data = o.get("data", {})
        if "image/png" in data:
            continue
        text = data.get("text/html") or data.get("text/plain") or o.get("text", "")
        text = re.sub(r"<style.*?</style>|<script.*?</script>|(id|class|style)=\"[^\"]*\"|\d\d:\d\d:\d\d\.\d+", "",
                      str(text), flags=re.S)
        # a cell that is a number (text that holds one, "$1069.0M" in an answer, is the log's own)
        numbers = re.findall(r">\s*-?([\d,]*\.\d+)\s*<" if "text/html" in data else r"(?<![\w$.])(\d+\.\d+)(?![\w%])",
                             text)
        found += [m for m in numbers if len(m.replace(".", "").replace(",", "").lstrip("0")) > 4]
        found += re.findall(r"\bNaN\b|&lt;NA&gt;|<NA>|\bNone\b", text)
    return found


def test_platforms_on_its_own_synthetic_runs(tmp_path, monkeypatch):
    """10-platforms without a database: it builds the synthetic runs of two platforms (rewards in
    [0, 1] and in [-1, 1]) and compares them."""
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    path = config.NOTEBOOKS_DIR / "10-platforms.ipynb"
    book = nbformat.read(path, as_version=4)
    index = next(i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", []))
    book.cells.insert(index + 1, nbformat.v4.new_code_cell(f"DEMO_DIR = {str(tmp_path)!r}"))
    NotebookClient(book, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(config.NOTEBOOKS_DIR)}}).execute()
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = " ".join(str(o.get("data", {}).get("text/html") or o.get("data", {}).get("text/plain", ""))
                     for o in outputs)
    assert "nova-rft" in shown and "gemini-rl" in shown and ">-1<" in shown  # the Gemini run's floor
    assert not raw_values(outputs)
    assert (tmp_path / "platforms.duckdb").exists()


def test_make_lab_starts_jupyterlab_as_root_and_as_a_user():
    # JupyterLab refuses to run as root without --allow-root (containers and cloud notebooks run
    # as root): `make lab` passes it exactly then.
    import os
    import subprocess

    out = subprocess.run(["make", "-n", "-C", str(config.PROJECT_ROOT), "lab"], capture_output=True, text=True,
                         check=True).stdout
    command = next(line for line in out.splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in command) == (os.getuid() == 0), command
