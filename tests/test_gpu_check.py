"""bench/gpu_check.sh, the prepared check for a lent GPU, in its no-GPU mode (CI has no GPU), and its
equivalence section's machinery on the CPU (float32 with kernels against the float64 references)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402 (bench/ is not a package)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the check would run for real")
def test_without_cuda_it_skips_saying_why(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    p = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    out = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "torch.cuda.is_available() is False" in out["skipped"]
    assert "skipped" in p.stdout


def test_equivalence_section_runs_and_judges_each_mixer():
    res = gpu_check.section_equivalence(
        "cpu", gpu_check.Budget(120), ["negmamba", "deltanet(neg=true)", "aussm"]
    )
    assert [r["mixer"] for r in res["rows"]] == ["negmamba", "deltanet(neg=true)", "aussm"]
    assert res["failed"] == []
    for r in res["rows"]:
        assert (
            0 < r["output_err"] < 1e-4 and 0 < r["grad_err"] < 1e-4
        )  # float32 against float64: small, not 0


def test_a_wrong_path_is_reported_not_passed(monkeypatch):
    # a mixer whose device path is off: the check must fail it
    real = gpu_check._forward_backward

    def off(m, x):
        y, g = real(m, x)
        return (y * 1.01, g) if x.dtype == torch.float32 else (y, g)

    monkeypatch.setattr(gpu_check, "_forward_backward", off)
    row = gpu_check.equivalence_row("negmamba", "cpu")
    assert not row["ok"] and row["output_err"] > 5e-3


def test_equivalence_in_parallel_processes_keeps_the_order_and_cuts_what_is_late():
    specs = ["negmamba", "aussm", "gla(heads=2)"]  # gla, an fla mixer, starts first; rows keep this order
    res = gpu_check.section_equivalence("cpu", gpu_check.Budget(120), specs, workers=2)
    assert [r["mixer"] for r in res["rows"]] == specs and res["failed"] == [] and "cut" not in res
    specs = specs[:2]
    res = gpu_check.section_equivalence("cpu", gpu_check.Budget(0.5), specs, workers=2)
    assert res["rows"] == [] and res["cut"] == "out of time before negmamba, aussm"


def test_the_bfloat16_bound_only_where_fla_runs_a_chunk_kernel():
    """fla's chunk kernels round q, k, v to bfloat16 (KDA's too: 7.1e-3 on an H200); its float32 recurrent
    kernels, which neg=true selects, and every CPU path keep the float32 bound."""

    def bound(spec: str, device: str) -> float:
        (layer,) = gpu_check.parse_layers(spec)
        return gpu_check.tolerance(layer, device, gpu_check.build_mixer(layer, 16, 16))  # the check's width

    assert bound("kda", "cuda") == gpu_check.BF16_TOL
    assert bound("kda(neg=true)", "cuda") == gpu_check.F32_TOL
    assert bound("mamba", "cuda") == gpu_check.F32_TOL
    assert bound("kda", "cpu") == gpu_check.F32_TOL
    # RWKV-7 at width 16: one head fits fla's kernels, two heads (8 value channels) do not
    assert bound("rwkv7", "cuda") == gpu_check.BF16_TOL
    assert bound("rwkv7(heads=2)", "cuda") == gpu_check.F32_TOL


def test_cut_cuda_tests_still_name_what_passed_and_failed():
    """The CUDA tests print a line per test (pytest -v): when the check's time cuts them, the JSON still
    counts the tests that ended and names the failed ones (a lease once saw '2 failed' and no names)."""
    out = (
        "collected 3 items\n"
        "tests/test_kernels.py::test_scan[cuda-16] PASSED                [ 33%]\n"
        "tests/test_kernels.py::test_scan[cuda-64] FAILED                [ 66%]\n"
    )
    script = f"import sys, time; sys.stdout.write({out!r}); sys.stdout.flush(); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    r = gpu_check.section_cuda_tests(proc, 3.0)
    assert "cut" in r
    assert (r["collected"], r["passed"], r["failed"]) == (3, 1, 1)
    assert r["failed_tests"] == ["tests/test_kernels.py::test_scan[cuda-64]"]
    whole = (
        out
        + "tests/test_kernels.py::test_scan[cuda-128] SKIPPED (no CUDA) [100%]\n1 passed, 1 failed, 1 skipped"
    )
    r = gpu_check.read_outcomes(whole)
    assert (r["passed"], r["failed"], r["skipped"]) == (1, 1, 1)


def test_an_error_is_one_line_with_its_cause():
    """A compiler's message begins with the place and ends with the fault: the line keeps both."""
    e = RuntimeError("at 52:18:\n    acc = tl.dot(a, b)\n\nInput shapes should have K >= 16")
    assert gpu_check.error_text(e) == "RuntimeError: at 52:18: ... Input shapes should have K >= 16"
    assert gpu_check.error_text(ValueError("one line")) == "ValueError: one line"
    assert gpu_check.error_text(KeyError()) == "KeyError: "


@pytest.mark.slow  # the recipe's model at batch 1,024 on the CPU: half a minute
def test_the_paper_cell_cut_by_its_budget_still_tests_its_last_weights():
    """The budget cuts the run (here at its first validation, on the CPU): the weights in hand are tested at
    40-256 all the same, so a lease's training is never thrown away."""
    out = gpu_check.section_paper_cell(40.5, steps=10, device="cpu")
    assert out["cut_at_step"] == 0 and "learned_at_step" not in out
    assert sorted(out["per_length"]) == [40, 64, 128, 256] and abs(out["scaled_accuracy_40_256"]) < 0.2


def _gpu_study(tmp_path, *args, **env):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, **env}
    cmd = ["bash", str(ROOT / "bench" / "gpu_study.sh"), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the cells would run for real")
def test_the_study_script_without_cuda_skips_saying_why(tmp_path):
    p = _gpu_study(tmp_path, "diag-limits-2026", "paper", "--model", "AUSSM", "--task", "C2")
    assert p.returncode == 0, p.stderr
    assert "skipped: torch.cuda.is_available() is False" in p.stdout
    assert not list(tmp_path.glob("*.db"))


def test_the_study_script_without_a_study_and_scale_says_how_to_call_it(tmp_path):
    p = _gpu_study(tmp_path, "diag-limits-2026")
    assert p.returncode == 2 and "usage: bash bench/gpu_study.sh STUDY SCALE" in p.stderr


@pytest.mark.slow  # one quick-scale run on the CPU: half a minute
def test_the_study_script_runs_its_cells_one_seed_each_into_out(tmp_path):
    """DEVICE=cpu: the same command as on a lent GPU; one cell, one seed, its database, report and CSV in OUT,
    the run keyed as in the whole grid (a later sweep of the study reuses it)."""
    p = _gpu_study(
        tmp_path, "diag-limits-2026", "quick", "--model", "Neg. Mamba", "--task", "C2", DEVICE="cpu"
    )
    assert p.returncode == 0, p.stderr + p.stdout
    assert "1 runs, 1 run now" in " ".join(p.stdout.split())
    rows = (tmp_path / "diag-limits-2026-runs.csv").read_text().splitlines()
    assert len(rows) > 1 and "negmamba" in rows[1]
    assert (tmp_path / "report" / "diag-limits-2026.md").is_file()


def test_the_study_script_refuses_a_from_database_that_is_a_link(tmp_path):
    (tmp_path / "real.db").write_bytes(b"")
    (tmp_path / "linked.db").symlink_to(tmp_path / "real.db")
    out = tmp_path / "out"
    out.mkdir()
    p = _gpu_study(out, "diag-limits-2026", "quick", FROM=str(tmp_path / "linked.db"), DEVICE="cpu")
    assert p.returncode == 2 and "is not a database file (a link is not followed)" in p.stderr
    assert not list(out.iterdir())


@pytest.mark.slow  # two quick-scale runs on the CPU: a minute
def test_the_study_script_continues_an_earlier_calls_database(tmp_path):
    """FROM: a second call reuses the first call's runs by their keys and returns one database with both,
    its checkpoints packed in one file (the device tool returns at most 8)."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    p = _gpu_study(first, "diag-limits-2026", "quick", "--model", "Neg. Mamba", "--task", "C2", DEVICE="cpu")
    assert p.returncode == 0, p.stderr + p.stdout
    assert (first / "diag-limits-2026.checkpoints.tar").is_file()
    assert not (first / "diag-limits-2026.checkpoints").exists()
    assert not list((first / "report").rglob("*.png"))  # no figures
    p = _gpu_study(
        second,
        "diag-limits-2026",
        "quick",
        "--model",
        "Neg. Mamba",
        "--task",
        "C2",
        "--task",
        "C6",
        DEVICE="cpu",
        FROM=str(first / "diag-limits-2026.db"),
    )
    assert p.returncode == 0, p.stderr + p.stdout
    assert "2 runs, 1 run now, 1 reused" in " ".join(p.stdout.split())
    rows = (second / "diag-limits-2026-runs.csv").read_text()
    assert "group:C2" in rows and "group:C6" in rows
    with tarfile.open(second / "diag-limits-2026.checkpoints.tar") as t:
        assert len([m for m in t.getmembers() if m.isfile()]) == 2
