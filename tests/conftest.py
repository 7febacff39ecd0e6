import contextlib
import os
import signal

import pytest
import torch

from statetrack.training import memory

memory.configure()  # as the CLI and the sweep workers do
torch.set_num_threads(1)
os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")

try:
    from hypothesis import settings

    settings.register_profile("ci", deadline=None, max_examples=200)
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # hypothesis is a test requirement; tests that need it import it themselves
    pass


@pytest.fixture(scope="session", autouse=True)
def corpus_cache(tmp_path_factory):
    """Corpora built by the tests go to a temporary cache, never the user's."""
    old = os.environ.get("STATETRACK_CACHE")
    os.environ["STATETRACK_CACHE"] = str(tmp_path_factory.mktemp("statetrack-cache"))
    yield
    if old is None:
        os.environ.pop("STATETRACK_CACHE", None)
    else:
        os.environ["STATETRACK_CACHE"] = old


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "runs" / "test.db")


SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


class Cli:
    """``statetrack`` in a child process (signals, kill -9, concurrent sweeps), with the checkout's source
    first on its path, and helpers that watch its results database."""

    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }

    def __init__(self):
        self.procs = []

    def start(self, *args, env: dict | None = None, **kw):
        """Start ``statetrack ARGS`` in a process group of its own (so that the fixture's teardown can
        stop it and every worker it started, whatever the test did)."""
        import subprocess
        import sys

        kw.setdefault("start_new_session", True)
        # a shell's background job starts with SIGINT ignored, nohup with SIGHUP ignored, and statetrack keeps
        # an ignored signal ignored (as nohup means it): the command under test gets the default handling of
        # SIGINT, SIGTERM and SIGHUP, wherever and however pytest was started
        kw.setdefault("preexec_fn", _default_signals)
        p = subprocess.Popen(
            [sys.executable, "-m", "statetrack.cli", *map(str, args)],
            env={**self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kw,
        )
        self.procs.append(p)
        return p

    def stop_all(self):
        """SIGKILL the process group of every process started (workers included), then reap them."""
        import signal

        for p in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                p.communicate(timeout=10)

    @staticmethod
    def count(db, where: str, *params) -> int:
        """Rows of ``runs`` matching ``where`` (0 while the database does not exist yet or is busy)."""
        import sqlite3

        if not os.path.exists(db):
            return 0
        try:
            con = sqlite3.connect(db, timeout=5)
            try:
                return con.execute(f"SELECT COUNT(*) FROM runs WHERE {where}", params).fetchone()[0]
            finally:
                con.close()
        except sqlite3.OperationalError:
            return 0

    def wait_until(self, db, where: str, n: int, procs=(), timeout: float = 180):
        """Wait until ``n`` rows of ``runs`` match ``where``, failing if a process in ``procs`` ends first."""
        import time

        t0 = time.time()
        while self.count(db, where) < n:
            for p in procs:
                assert p.poll() is None, p.communicate()
            assert time.time() - t0 < timeout, f"never {n} rows with {where}"
            time.sleep(0.05)


@pytest.fixture
def cli():
    c = Cli()
    yield c
    c.stop_all()  # a failed or timed-out test leaves no sweep or worker running


# eight runs (two models x four seeds) of ``steps`` steps each: for sweeps that are signalled, killed or
# run side by side
GRID = """
name: grid8
title: grid of eight runs
source: test
task: parity
train: {batch_size: 8, eval_every: 20, val_sequences: 16, lr: 0.01, patience: 100000}
models:
  - {label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [2, 5]}
  - {label: Mamba, model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}, train_lengths: [2, 5]}
scales:
  quick: {seeds: 4, steps: STEPS, eval_batch: 8, test_lengths: [8, 16]}
"""


@pytest.fixture
def grid8(tmp_path):
    """grid8(steps) -> the path of a study file of eight runs of ``steps`` steps."""

    def write(steps: int) -> str:
        p = tmp_path / f"grid8-{steps}.yaml"
        p.write_text(GRID.replace("STEPS", str(steps)))
        return str(p)

    return write


@pytest.fixture
def dfa_task(tmp_path):
    """dfa_task(name, states, alphabet, start, accept, rows) -> 'dfa:PATH' of a JSON DFA written to tmp_path;
    rows[i] lists the targets of states[i] on each letter of the alphabet, in order."""
    import json

    def make(name, states, alphabet, start, accept, rows):
        spec = {
            "states": states,
            "alphabet": alphabet,
            "start": start,
            "accept": accept,
            "transitions": {
                s: dict(zip(alphabet, r, strict=True)) for s, r in zip(states, rows, strict=True)
            },
        }
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(spec))
        return f"dfa:{p}"

    return make


# the options of the smallest `statetrack train` run: two steps of a width-2 RNN, one test length
TINY_TRAIN = [
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--steps",
    "2",
    "--eval-every",
    "2",
    "--test-lengths",
    "8",
    "--eval-batch",
    "4",
]


def rnn_study_text(seeds: int = 1, steps: int = 5, lr: float = 0.01) -> str:
    """A one-model study (an RNN on parity, named ``s``) that runs in seconds."""
    return (
        "name: s\ntitle: s\nsource: test\ntask: parity\n"
        f"train: {{batch_size: 8, eval_every: 5, val_sequences: 16, lr: {lr}}}\n"
        "models: [{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}]\n"
        f"scales: {{quick: {{seeds: {seeds}, steps: {steps}, eval_batch: 8, test_lengths: [8]}}}}\n"
    )


@pytest.fixture
def rnn_study(tmp_path):
    """make(seeds, steps, lr) -> the path of a one-model study (an RNN on parity) that runs in seconds."""

    def make(seeds: int = 1, steps: int = 5, lr: float = 0.01) -> str:
        path = tmp_path / f"s-{seeds}-{steps}-{lr:g}.yaml"
        path.write_text(rnn_study_text(seeds, steps, lr))
        return str(path)

    return make


def live_processes(pgid: int | None = None, sid: int | None = None) -> list[tuple[int, str]]:
    """(pid, name) of the processes alive in process group ``pgid`` or session ``sid`` (zombies left out),
    from /proc."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name, _, rest = text.partition("(")[2].rpartition(")")
        state, _, group, session = rest.split()[:4]
        if state != "Z" and (int(group) == pgid or int(session) == sid):
            out.append((int(d), name))
    return out
