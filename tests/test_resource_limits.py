"""What a machine can hold: a training run estimates its memory before it starts and refuses one that
cannot fit (naming the estimate and what is available); one that runs out anyway is a line, not a
traceback; --workers above the cores or the memory is capped with one line; an unreachable Ray address
fails within a stated timeout, before a database is created."""

import sqlite3
import time

import pytest

from conftest import TINY_TRAIN
from statetrack.cli import main
from statetrack.config import ModelConfig, TrainConfig
from statetrack.runs.executors import RAY_CONNECT_TIMEOUT, worker_limit
from statetrack.runs.runner import memory_needed
from statetrack.tasks import get_task
from statetrack.training import memory


def _one_line(capsys, argv, *needles) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize(
    "args, free, where",
    [
        (
            ["--layers", "rnn", "--batch-size", "100000000"],
            8 << 30,
            "available on this machine",
        ),  # MemoryError
        (["--layers", "lstm*32", "--d-model", "4096"], 1 << 30, "left under ulimit -v"),  # RuntimeError
    ],
)
def test_a_run_that_cannot_fit_is_refused_before_it_starts(tmp_path, capsys, monkeypatch, args, free, where):
    monkeypatch.setattr(memory, "available", lambda: (free, where))
    db = tmp_path / "r.db"
    err = _one_line(
        capsys,
        ["train", *args, "--db", str(db)],
        "error: this run needs at least ",
        f"and {memory.gib(free)} is {where}; lower --batch-size",
    )
    assert not db.exists(), err


def test_the_estimate_counts_weights_and_activations():
    """A lower bound: 16 bytes per parameter, and four float32 vectors of width d_model per block and token."""
    task = get_task("parity")
    big, what = memory_needed(TrainConfig(model=ModelConfig(layers="lstm*32", d_model=4096)), task)
    tokens, blocks, d = 64 * 8, 32, 4096
    assert big == 16 * 10_805_250 + tokens * 4 * (4 * d * blocks + 2 * d + 3 * 2)
    assert what == (
        "0.16 GiB for the weights, gradients and optimiser state of 10,805,250 parameters, 1.0 GiB of "
        "activations for batch 64 x length 8"
    )
    wide, _ = memory_needed(
        TrainConfig(model=ModelConfig(layers="rnn", d_model=2), batch_size=100_000_000), task
    )
    assert wide > 50 << 30  # batch 100,000,000 of length 8 at width 2


def test_a_run_that_runs_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    """Beyond the estimate (another process took the memory meanwhile): the run is recorded failed and the
    command ends in one line, not a MemoryError traceback."""
    import statetrack.runs.runner as runner

    def out_of_memory(*a, **k):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 400000000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(runner, "train", out_of_memory)
    db = tmp_path / "r.db"
    _one_line(
        capsys,
        ["train", *TINY_TRAIN, "--db", str(db)],
        "error: run 1 ran out of memory ([enforce fail",
        "it is recorded failed; lower --batch-size",
    )
    [(status,)] = sqlite3.connect(db).execute("SELECT status FROM runs").fetchall()
    assert status == "failed"


def test_workers_above_the_cores_are_capped_in_one_line(tmp_path, capsys, monkeypatch, rnn_study):
    """24 workers on 2 cores reached 4.5 GB of resident memory in 16 s and kept rising. (One core here, so
    that the capped sweep runs in its own process: the cap, not the workers, is under test.)"""
    monkeypatch.setattr(memory, "cores", lambda: 1)
    assert main(["sweep", rnn_study(seeds=2), "--workers", "24", "--db", str(tmp_path / "r.db")]) == 0
    out, err = capsys.readouterr()
    assert "--workers 24 capped at 1: this machine has 1 CPU core (each run uses one)\n" in err, err
    assert err.count("capped") == 1 and "executor local, 1 worker(s)" in " ".join(out.split())


def test_workers_above_the_memory_are_capped(monkeypatch, rnn_study):
    from statetrack.experiments import load_study

    heads = load_study(rnn_study()).grid("quick").heads
    monkeypatch.setattr(memory, "cores", lambda: 64)
    monkeypatch.setattr(memory, "available", lambda: (1 << 30, "available on this machine"))
    n, why = worker_limit(24, heads)
    need = memory.WORKER_BYTES + memory_needed(heads[0].train, get_task("parity"))[0]
    assert n == (1 << 30) // need == 2
    assert why == (
        f"--workers 24 capped at 2: each worker needs about {memory.gib(need)} (its process and its "
        "largest run) and 1.0 GiB is available on this machine"
    )
    assert worker_limit(2, heads) == (2, None)


def test_a_ray_cluster_decides_its_own_workers():
    jobs = []
    assert worker_limit(24, jobs, "ray", "10.0.0.1:6379") == (24, None)
    n, why = worker_limit(10**6, jobs, "local")
    assert n == memory.cores() and why.startswith(f"--workers 1000000 capped at {n}")


def test_an_unreachable_ray_address_fails_within_its_timeout(tmp_path, capsys, rnn_study):
    """`sweep --executor ray --address 127.0.0.1:1` waited forever (and left an empty database)."""
    pytest.importorskip("ray")
    db = tmp_path / "r.db"
    t = time.time()
    _one_line(
        capsys,
        ["sweep", rnn_study(), "--executor", "ray", "--address", "127.0.0.1:1", "--db", str(db)],
        "error: no Ray cluster answers at --address 127.0.0.1:1 (Connection refused, within "
        f"{RAY_CONNECT_TIMEOUT:g} s); start one there (ray start --head) or give its address",
    )
    assert time.time() - t < RAY_CONNECT_TIMEOUT + 30 and not db.exists()
