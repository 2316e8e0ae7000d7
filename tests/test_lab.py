"""JupyterLab, headless, on a local port: notebook 01-explore run in Chromium; the explorer
widget renders and follows a filter change."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import rolloutlab as rl
from rolloutlab import config, synth


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab")
    db = folder / "lab.duckdb"
    con = rl.connect(db)
    rl.ingest(con, synth.write_native(folder / "logs", samples=25, attempts=3, seed=3))
    con.close()
    # a copy: JupyterLab autosaves, and the stored notebooks must stay without outputs
    notebooks = folder / "notebooks"
    shutil.copytree(config.NOTEBOOKS_DIR, notebooks)
    port, token = free_port(), "rolloutlab-test"
    env = {**os.environ, config.DB_ENV_VAR: str(db), "JUPYTER_CONFIG_DIR": str(folder / "cfg"),
           "JUPYTER_DATA_DIR": str(folder / "data"), "JUPYTER_RUNTIME_DIR": str(folder / "run")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebooks}",
         "--LabApp.news_url=", "--ServerApp.allow_root=True"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        server.kill()
        pytest.fail("JupyterLab did not start within 60 s")
    yield url, token, notebooks
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def test_explore_notebook_runs_and_the_widget_responds(browser, lab, tmp_path):
    url, token, _ = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/lab/tree/01-explore.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_timeout(2000)  # the kernel starts
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    count = page.locator(".rl-count").first
    count.wait_for(timeout=120_000)
    assert "150 rollouts match" in count.inner_text()
    page.locator(".widget-text input").first.fill("fin-00001")
    page.wait_for_function(
        "() => { const c = document.querySelector('.rl-count'); return c && c.textContent.startsWith('6 rollouts') }",
        timeout=30_000)
    page.screenshot(path=str(tmp_path / "lab.png"))
    page.close()


DOLLARS = "fin-00070: '$28.9M' scored 0.8, 1; fin-00086: '$17.7M' scored 0, 1"
SHORT_DOLLARS = "'$28.9M' or '$17.7M'"  # within pandas' 50-character column width


def test_dollar_amounts_are_not_typeset_as_math(browser, lab, tmp_path):
    """Answers are dollar amounts; two in one cell must stay text in JupyterLab (MathJax would
    typeset what lies between them). The styled readiness table, a plain DataFrame of answers and
    the explorer are checked in a real JupyterLab; a control cell proves MathJax is active."""
    import nbformat

    url, token, notebooks = lab
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("import pandas as pd\nimport rolloutlab as rl\nfrom rolloutlab import plots"),
        nbformat.v4.new_code_cell(
            "checks = pd.DataFrame({'check': ['grader_consistency'], 'status': ['warn'], 'value': [2.0],\n"
            f"    'threshold': ['t'], 'advice': ['a'], 'details': [{DOLLARS!r}]}})\n"
            "plots.readiness_table(checks)"),
        nbformat.v4.new_code_cell(f"pd.DataFrame({{'answers': [{SHORT_DOLLARS!r}]}})"),
        nbformat.v4.new_code_cell("con = rl.connect(read_only=True)\nrl.explore(con)"),
        nbformat.v4.new_markdown_cell("control: $x^2$"),
    ]
    nbformat.write(nb, notebooks / "dollars.ipynb")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/lab/tree/dollars.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_timeout(2000)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    page.locator(".rl-count").first.wait_for(timeout=120_000)
    page.locator(".jp-RenderedMarkdown mjx-container").first.wait_for(timeout=30_000)  # MathJax is on
    page.wait_for_timeout(1500)
    outputs = page.locator(".jp-OutputArea-output")
    assert page.locator(".jp-OutputArea-output mjx-container").count() == 0
    text = "\n".join(outputs.all_inner_texts())
    assert DOLLARS in text and SHORT_DOLLARS in text  # the styled table and the DataFrame, verbatim
    page.screenshot(path=str(tmp_path / "dollars.png"))
    page.close()
