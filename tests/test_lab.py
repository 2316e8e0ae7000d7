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
    yield url, token
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def test_explore_notebook_runs_and_the_widget_responds(browser, lab, tmp_path):
    url, token = lab
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
