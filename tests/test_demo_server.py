"""The demo tool server with capture on, served by uvicorn on localhost: bursts and kill -9."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

import rolloutlab as rl
from rolloutlab import demo_server


def answered_counts(sent):
    """(rollout_id, kind) -> number of requests that got an answer."""
    done = sent[sent.http_status.notna()]
    return done.groupby(["rollout_id", "kind"]).size().to_dict()


def logged_counts(con):
    rows = con.execute("""SELECT rollout_id, 'tool', count(*) FROM endpoint_events WHERE kind = 'tool' GROUP BY 1
                          UNION ALL
                          SELECT rollout_id, 'grade', count(*) FROM endpoint_events WHERE kind = 'grade' GROUP BY 1""")
    return {(r, k): n for r, k, n in rows.fetchall()}


def test_burst_of_rollouts_all_logged(tmp_path, con):
    with demo_server.running(tmp_path / "logs", token="tok-123", fail_rate=0.05) as url:
        sent = demo_server.drive(url, rollouts=150, concurrency=150, token="tok-123")
    assert sent.http_status.notna().all() and set(sent.http_status) == {200, 503}
    rl.ingest(con, tmp_path / "logs")
    assert rl.rejects(con).empty
    assert logged_counts(con) == answered_counts(sent)
    assert "tok-123" not in "".join(p.read_text() for p in (tmp_path / "logs").glob("*.jsonl"))
    # a 503 from a tool is the infrastructure's failure, and those rollouts were never graded
    failed = set(sent[sent.http_status == 503].rollout_id)
    status = dict(con.execute("SELECT rollout_id, status FROM rollouts").fetchall())
    assert failed and {status[r] for r in failed} == {"infra_error"}
    assert {s for r, s in status.items() if r not in failed} == {"ok"}
    plan = rl.capacity(con, "live").set_index("tool")
    assert plan.loc["(all)", "calls"] == (sent.kind == "tool").sum()
    assert plan.loc["(all)", "peak_rollouts_in_flight"] > 10  # they did run at once


def test_rollout_id_from_a_header(tmp_path, con):
    with demo_server.running(tmp_path, rollout_id_header="X-Rollout-Id") as url:
        sent = demo_server.drive(url, rollouts=10, concurrency=5, rollout_id_header="X-Rollout-Id")
    rl.ingest(con, tmp_path)
    assert rl.rejects(con).empty
    assert logged_counts(con) == answered_counts(sent)
    with pytest.raises(ValueError, match="credential"):
        demo_server.make_app(tmp_path, rollout_id_header="Authorization")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kill_9_mid_burst_loses_no_answered_call(tmp_path, con):
    port, logs = free_port(), tmp_path / "logs"
    server = subprocess.Popen([sys.executable, "-m", "rolloutlab.cli", "demo-server", "--port", str(port),
                               "--log-dir", str(logs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the demo server did not start"
                time.sleep(0.1)
        result = {}
        burst = threading.Thread(target=lambda: result.update(sent=demo_server.drive(
            url, rollouts=1000, concurrency=100, think_s=(0.0, 0.05), timeout=10)))
        burst.start()
        time.sleep(1.0)
        os.kill(server.pid, signal.SIGKILL)
        burst.join(timeout=60)
    finally:
        server.kill()
        server.wait()
    sent = result["sent"]
    assert sent.http_status.notna().sum() > 50 and sent.http_status.isna().sum() > 0  # killed mid-burst
    rl.ingest(con, logs)
    assert rl.rejects(con).empty
    logged, answered = logged_counts(con), answered_counts(sent)
    # every answered call is in the log; a call logged as its answer was cut off may be there too
    assert all(logged.get(key, 0) >= n for key, n in answered.items())
    assert sum(logged.values()) - sum(answered.values()) <= 100
    for line in "".join(p.read_text() for p in logs.glob("*.jsonl")).splitlines():
        json.loads(line)
