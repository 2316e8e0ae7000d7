"""JupyterLab, headless, on a local port: notebook 01-explore run in Chromium; the explorer
widget renders, follows a filter change, and opens a clicked rollout: native with messages,
endpoint logs (tool calls only) and a real tau2 rollout."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import rolloutlab as rl
from rolloutlab import config
from rolloutlab.demo import synth
from rolloutlab.text import fmt

TAU2_FILE = "tau2-sft/gpt-4.1_airline_default_gpt-4.1_1trials.json"  # under config.real_data_dir()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_all_cells(page) -> None:
    """Run > Run All Cells once the notebook has its kernel. Before that, the run opens a dialog
    and runs nothing (the notebook toolbar says idle even then; the status bar does not)."""
    ready = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\(ipykernel\) \| Idle")).first
    ready.wait_for(timeout=90_000)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab")
    db = folder / "lab.duckdb"
    con = rl.connect(db)
    rl.ingest(con, synth.write_native(folder / "logs", samples=25, attempts=3, seed=3), progress=False)
    rl.ingest(con, synth.write_endpoint(folder / "endpoint", samples=3, attempts=1, steps=(3,), replicas=1),
              progress=False)
    tau2 = config.real_data_dir() / TAU2_FILE
    if tau2.exists():
        rl.ingest(con, tau2, run="tau2-airline", progress=False)
    # per kind: the rollout with most tool calls, with its sample, message and tool-call counts
    opened = {kind: con.execute(
        """SELECT rollout_id, sample_id, n_tool_calls,
                  (SELECT count(*) FROM messages m WHERE m.rollout_id = r.rollout_id), score, latency_s
           FROM rollouts r WHERE run_id = ? ORDER BY n_tool_calls DESC, rollout_id LIMIT 1""", [run]).fetchone()
        for kind, run in (("native", "base"), ("endpoint", "train-step3"), ("tau2", "tau2-airline"))}
    total = con.execute("SELECT count(*) FROM rollouts").fetchone()[0]
    compared = con.execute("SELECT count(*) FROM rollouts WHERE run_id IN ('base', 'step10')").fetchone()[0]
    runs = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
    # the base's varying samples as the linked variance figure draws them: sorted by mean, then id
    stats = rl.sample_stats(con, "base").sort_values(["mean", "sample_id"])
    varying = stats[stats.has_signal].sample_id.tolist()
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
    yield url, token, notebooks, {"opened": opened, "total": total, "tau2": tau2, "compared": compared, "runs": runs,
                                  "varying": varying}
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def test_explore_notebook_runs_and_the_widget_responds(browser, lab, tmp_path):
    url, token, _, data = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/lab/workspaces/explore/tree/01-explore.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    run_all_cells(page)
    count = page.locator(".rl-count").first
    count.wait_for(timeout=120_000)
    # the explorer starts on the comparison's two runs (the notebook's parameters), not on every run
    assert f"{data['compared']} rollouts match" in count.inner_text()
    page.locator(".rl-explorer .widget-select-multiple select").first.select_option(data["runs"])
    page.wait_for_function(
        f"() => {{ const c = document.querySelector('.rl-count'); return c && c.textContent.startsWith('{data['total']} rollouts') }}",
        timeout=30_000)
    search = page.locator(".rl-search input").first
    search.fill("fin-00001")  # the native runs' sample (endpoint samples are fin-train-...)
    page.wait_for_function(
        "() => { const c = document.querySelector('.rl-count'); return c && c.textContent.startsWith('6 rollouts') }",
        timeout=30_000)

    # a click on a row opens its trajectory: the transcript with each turn's calls in place
    for kind, row in data["opened"].items():
        if kind == "tau2" and not data["tau2"].exists():
            continue  # skipped below, with the reason
        rollout_id, sample_id, n_calls, n_messages, score, latency = row
        search.fill(rollout_id)
        page.locator(".rl-trajectory").first.wait_for(state="detached", timeout=30_000)  # the list changed
        page.wait_for_function("() => { const c = document.querySelector('.rl-count');"
                               "  return c && c.textContent.startsWith('1 rollouts') }", timeout=30_000)
        page.locator(".rl-rows select option").first.click()
        trajectory = page.locator(".rl-explorer .rl-trajectory")
        trajectory.wait_for(timeout=15_000)
        shown = trajectory.inner_text()
        assert f"sample {sample_id}" in shown
        # the numbers the store holds, as fmt writes them everywhere (#35)
        assert f"score {fmt.number(score)}" in shown and f"latency {fmt.seconds(latency)}" in shown, kind
        if kind == "tau2":  # what the task expected, beside the answer
            assert "expected actions:" in shown
        assert trajectory.locator(".rl-call").count() == n_calls > 0, kind
        messages = trajectory.locator(".rl-msg")
        if kind == "endpoint":  # no messages in endpoint logs: the calls, listed by turn
            assert n_messages == 0 and messages.first.locator(".rl-role").inner_text() == "turn 0"
        else:
            assert n_messages > 0 and trajectory.locator(".rl-role", has_text="user").count() > 0
            assert trajectory.locator("pre.rl-out").count() == n_calls  # each call's output under it
    page.screenshot(path=str(tmp_path / "lab.png"))

    # linked exploration: a click on a bar of the variance figure opens that sample in the explorer
    figure = page.locator(".rl-linked .js-plotly-plot").first
    figure.scroll_into_view_if_needed()
    bars = figure.locator(".barlayer .trace").first.locator(".point")
    bars.first.wait_for(timeout=60_000)
    k = bars.count() // 2
    assert bars.count() == len(data["varying"])  # the base's varying samples, one bar each
    box = bars.nth(k).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    sample = data["varying"][k]
    focus = page.locator(".rl-linked .rl-focus").first
    page.wait_for_function(f"() => [...document.querySelectorAll('.rl-linked .rl-focus')].some("
                           f"e => e.textContent.includes('sample {sample} in base'))", timeout=30_000)
    page.wait_for_function(f"() => [...document.querySelectorAll('.rl-linked .rl-trajectory')].some("
                           f"e => e.textContent.includes('sample {sample} ·'))", timeout=30_000)
    trajectory = page.locator(".rl-linked .rl-trajectory").first
    assert f"base · sample {sample} · attempt" in trajectory.inner_text() and "Opened from a figure" in focus.inner_text()
    rows = page.locator(".rl-linked .rl-rows select option")
    assert rows.count() >= 2 and all(sample in t for t in rows.all_inner_texts())
    page.screenshot(path=str(tmp_path / "linked.png"))
    page.close()
    if not data["tau2"].exists():
        pytest.skip(f"native and endpoint rollouts opened; the tau2 one was not: real logs not found at "
                    f"{data['tau2']} (set ${config.REAL_DATA_ENV_VAR} to their folder)")


DOLLARS = "fin-00070: '$28.9M' scored 0.8, 1; fin-00086: '$17.7M' scored 0, 1"
SHORT_DOLLARS = "'$28.9M' or '$17.7M'"  # within pandas' 50-character column width


def test_dollar_amounts_are_not_typeset_as_math(browser, lab, tmp_path):
    """Answers are dollar amounts; two in one cell must stay text in JupyterLab (MathJax would
    typeset what lies between them). The styled readiness table, a plain DataFrame of answers and
    the explorer are checked in a real JupyterLab; a control cell proves MathJax is active."""
    import nbformat

    url, token, notebooks, _ = lab
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
    # a workspace of its own: the other test's notebook, its kernel still running, is not restored in
    # a hidden tab (whose explorer would be the first .rl-count on the page)
    page.goto(f"{url}/lab/workspaces/dollars/tree/dollars.ipynb?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    run_all_cells(page)
    page.locator(".rl-count").first.wait_for(timeout=120_000)
    page.locator(".jp-RenderedMarkdown mjx-container").first.wait_for(timeout=30_000)  # MathJax is on
    page.wait_for_timeout(1500)
    outputs = page.locator(".jp-OutputArea-output")
    assert page.locator(".jp-OutputArea-output mjx-container").count() == 0
    text = "\n".join(outputs.all_inner_texts())
    assert DOLLARS in text and SHORT_DOLLARS in text  # the styled table and the DataFrame, verbatim
    page.screenshot(path=str(tmp_path / "dollars.png"))
    page.close()
