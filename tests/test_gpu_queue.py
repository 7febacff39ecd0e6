"""The GPU queue (bench/gpu_queue.py, bench/gpu_queue.yaml): every queued cell builds its seeds' configs
from its study's grid, the next cells are those without a committed JSON, and the queue runs on the CPU
with a small step count through the same code a lease runs, its report scoring the cells by their
studies' statistics beside the papers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_queue  # noqa: E402 (bench/ is not a package)


def test_every_queued_cell_builds_its_seeds():
    """Each cell names a row, a task and a learning rate of its study's grid; the queue's changes give
    valid configs, and a parameter the recipe exempts from weight decay exists in the model."""
    from statetrack import ModelConfig, build_model, get_task
    from statetrack.training.steps import decay_groups

    cells = gpu_queue.load_queue()
    assert cells[0]["name"] == "grazzi2024-modarith-deltanet-neg"
    for cell in cells:
        jobs = gpu_queue.cell_jobs(cell, "cpu")
        assert sorted(j.seed for j, _, _ in jobs) == [0, 1, 2], cell["name"]
        for _, cfg, _ in jobs:
            assert cfg.lr == cell["lr"]
            want = ModelConfig.model_validate({**cfg.model.model_dump(), **cell.get("model", {})})
            assert cfg.model == want  # the queue's layout, its layers spelt out
        if cfg.no_decay:
            groups = decay_groups(build_model(cfg.model, get_task(cfg.task)), cfg)
            assert groups[1]["params"], cell["name"]


def test_the_next_cells_are_those_without_a_committed_json(tmp_path):
    cells = gpu_queue.load_queue()
    assert gpu_queue.pending(cells, tmp_path) == cells
    (tmp_path / f"{cells[0]['name']}.json").write_text("{}")
    assert gpu_queue.pending(cells, tmp_path)[0] == cells[1]


@pytest.mark.slow
def test_the_queue_runs_on_the_cpu_and_its_report_reads_it(tmp_path):
    """The first queued cell, its three seeds as concurrent processes (2 steps of a tiny model): one
    JSON with every seed's test metrics, then the report's row beside the paper's 0.971."""
    cmd = [sys.executable, str(ROOT / "bench" / "gpu_queue.py")]
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    out = tmp_path / "out"
    p = subprocess.run(
        cmd
        + [
            "run",
            "--device",
            "cpu",
            "--tiny",
            "--steps",
            "2",
            "--results",
            str(tmp_path / "none"),
            "--out",
            str(out),
            "--budget",
            "240",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert p.returncode == 0, p.stderr
    name = "grazzi2024-modarith-deltanet-neg"
    assert sorted(x.name for x in out.iterdir()) == [f"{name}.json"]  # the seeds' files are gone
    rec = json.loads((out / f"{name}.json").read_text())
    assert [r["seed"] for r in rec["runs"]] == [0, 1, 2] and rec["concurrent_processes"] == 3
    for r in rec["runs"]:
        assert r["steps"] == 2 and r["train"]["model"]["layers"].startswith("deltanet(")
        assert [m["length"] for m in r["metrics"]] == r["eval"]["lengths"]
    p = subprocess.run(
        cmd + ["report", "--results", str(out)], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.startswith(f"| {name} |"))
    assert "| 0.971 |" in row and "| True |" in row  # two steps learn nothing: it differs from the paper
    assert "grazzi2024-modarith-negmamba" in p.stdout.split("Cells still queued")[1]
