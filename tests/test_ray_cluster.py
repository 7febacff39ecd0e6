"""A sweep on a Ray cluster of two nodes on this machine (``ray start --head``, then ``ray start --address``
for a second node with its own resources), through ``--executor ray --address``: the driver writes the
one database; the second node is stopped (SIGKILL of all its processes, as a crashed machine) while runs
are on it. Those runs are recorded failed with the reason, never lost or duplicated; the sweep run again
re-runs them, and every run of the grid is complete exactly once. No process outlives the test."""

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import live_processes

pytestmark = pytest.mark.slow

RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # a local test cluster, no token


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """``ray start --block`` in a session of its own: every process of the node (raylet, workers) is in it."""

    def __init__(self, args: list[str], log: Path):
        ray = str(Path(sys.executable).with_name("ray"))
        ports = [
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--metrics-export-port",
            "--runtime-env-agent-port",
        ]
        args += [x for p in ports for x in (p, str(_free_port()))]
        self.log = open(log, "w")  # noqa: SIM115 (open while the node runs, closed by stop())
        self.proc = subprocess.Popen(
            [ray, "start", "--block", "--disable-usage-stats", "--object-store-memory", str(80 << 20), *args],
            env={**os.environ, **RAY_ENV},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def processes(self) -> list[tuple[int, str]]:
        return live_processes(sid=self.proc.pid)

    def kill(self, sig=signal.SIGKILL) -> None:
        for pid, _ in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self, grace: float = 15.0) -> None:
        self.kill(signal.SIGTERM)
        t0 = time.time()
        while self.processes() and time.time() - t0 < grace:
            time.sleep(0.2)
        self.kill(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def cluster():
    """A head node with 1 CPU and a second node with 2 CPUs (and a resource of its own), in a temporary
    folder, on free ports; at teardown both are stopped and no process of theirs is left."""
    pytest.importorskip("ray")
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc to find the nodes' processes")
    tmp = Path(tempfile.mkdtemp(prefix="st-ray-", dir="/tmp"))  # short: Ray's socket paths must stay short
    port = _free_port()
    nodes = []
    try:
        nodes.append(
            Node(
                [
                    "--head",
                    "--port",
                    str(port),
                    "--num-cpus",
                    "1",
                    "--temp-dir",
                    str(tmp),
                    "--include-dashboard",
                    "false",
                    "--ray-client-server-port",
                    str(_free_port()),
                ],
                tmp / "head.log",
            )
        )
        address = f"127.0.0.1:{port}"
        _wait_for_nodes(address, 1, tmp / "head.log")
        nodes.append(
            Node(
                ["--address", address, "--num-cpus", "2", "--resources", json.dumps({"second": 2})],
                tmp / "second.log",
            )
        )
        _wait_for_nodes(address, 2, tmp / "second.log")
        yield address, nodes[0], nodes[1]
    finally:
        for n in reversed(nodes):
            n.stop()
        left = [p for n in nodes for p in n.processes()]
        shutil.rmtree(tmp, ignore_errors=True)
        assert left == [], f"processes of the cluster left behind: {left}"


def _wait_for_nodes(address: str, n: int, log: Path, timeout: float = 120) -> None:
    code = (
        "import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
        "print(sum(x['Alive'] for x in ray.nodes()))"
    )
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = subprocess.run(
            [sys.executable, "-c", code, address],
            env={**os.environ, **RAY_ENV},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode == 0 and r.stdout.strip().splitlines()[-1] == str(n):
            return
        time.sleep(1)
    raise AssertionError(f"the cluster never had {n} nodes: {log.read_text()[-2000:]}")


def _rows(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, key, status, error, owner FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


def test_a_sweep_on_two_nodes_loses_the_second_one(tmp_path, cli, grid8, cluster):
    address, head, second = cluster
    db, path = str(tmp_path / "r.db"), grid8(600)
    env = {**RAY_ENV, "OMP_NUM_THREADS": "1"}
    t0 = time.time()
    p = cli.start(
        "sweep", path, "--db", db, "--executor", "ray", "--address", address, "--workers", 3, env=env
    )

    def on_second():
        return [
            pid for pid, name in second.processes() if name.startswith("ray::_ray_pay")
        ]  # comm: 15 characters

    while len(on_second()) < 2:  # both of the second node's CPUs run a run of the sweep
        assert p.poll() is None, p.communicate()
        assert time.time() - t0 < 300, "no run ever ran on the second node"
        time.sleep(0.1)
    time.sleep(1.0)
    t_kill = time.time()
    second.kill()  # the node dies as a crashed machine would: every process at once
    out, err = p.communicate(timeout=600)
    wall = time.time() - t0
    rows = _rows(db)
    failed = [r for r in rows if r[2] == "failed"]
    print(
        f"\ntwo-node sweep: wall {wall:.1f} s, node stopped after {t_kill - t0:.1f} s; exit {p.returncode}; "
        f"rows {[(r[0], r[2], (r[3] or '')[:90]) for r in rows]}"
    )
    assert p.returncode == 1 and "Traceback" not in err, err  # some runs failed: exit 1, no traceback
    assert "2 failed" in " ".join(out.split()), out
    assert len(failed) == 2 and all("node" in r[3] and "dead" in r[3] for r in failed), rows
    assert [r[2] for r in rows].count("running") == 0
    complete = [r[1] for r in rows if r[2] == "complete"]
    assert len(complete) == 6 and len(set(complete)) == 6  # none lost, none twice
    assert len({r[4] for r in rows}) == 1  # one owner wrote every row: the driver

    # the same sweep again, on what is left of the cluster: the failed runs are re-run, the rest reused
    again = cli.start(
        "sweep", path, "--db", db, "--executor", "ray", "--address", address, "--workers", 1, env=env
    )
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert "2 run now, 6 reused" in " ".join(out.split()), out
    rows = _rows(db)
    per_key: dict[str, int] = {}
    for r in rows:
        if r[2] == "complete":
            per_key[r[1]] = per_key.get(r[1], 0) + 1
    assert len(per_key) == 8 and set(per_key.values()) == {1}  # every run exactly once
    assert [r[2] for r in rows].count("failed") == 2  # the history is kept
