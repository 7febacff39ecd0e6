"""The prepared check for a lent GPU: one command, at most 8 minutes on an H100, one JSON.

    bash bench/gpu_check.sh                 # installs carried wheels (.whl/), then runs this file
    PYTHONPATH=src python bench/gpu_check.py --out FILE [--budget SECONDS] [--device cuda|cpu]

Sections, in order, each inside its share of the budget (a section that runs out is cut and says so; a
section that fails records its error and the next one runs; the JSON is rewritten after every section,
so whatever finished survives a kill). On a bare machine most of the time goes to compiling and
autotuning Triton kernels, so the CUDA tests and the equivalence rows compile in parallel processes:

1. ``env``: torch, CUDA, the device, triton and flash-linear-attention (fla) versions.
2. ``equivalence``: CUDA = CPU for every mixer of the zoo (and the variants that switch kernels:
   ``neg=true``, heads, chunk sizes), 8 specs at a time in their own processes: one layer at d_model 16,
   a batch of 4 x 64 tokens, forward output and the gradient of every parameter on the device (kernels
   on: Triton scans, fla's kernels where fla is installed) against the CPU float64 step-by-step
   references (kernels off). The error is the max absolute difference over the max of the reference;
   the bound is 1e-4 for float32 paths and 5e-2 where fla's chunk kernels round q, k, v to bfloat16
   (BF16_MIXERS). Matrix products and cuDNN's RNN kernels run in IEEE float32, as in training.
3. ``cuda_tests``: the CUDA-only tests (``tests/test_kernels.py`` compiled on the GPU:
   ``TRITON_INTERPRET=0 pytest -m kernels``), started before the equivalence section in a process of
   their own and collected after it: pass/fail counts and the failing tests' names (pytest -v: those
   that ended, where the section's time cuts them).
4. ``speed``: training steps per second at Grazzi et al.'s shape (batch 1024, length 40, width 128, two
   layers; Mamba [-1,1] and DeltaNet [-1,1]), CUDA graphs on; and the paper cell's own model and task,
   timed alike (it ran 105 steps/s in training on an H100, three times the two-layer row's time).
5. ``paper_cell``: one cell at its paper's recipe that the CPU scales cannot fit: DeltaNet [-1,1], three
   layers of width 128 with 4 heads and the short conv, on modular arithmetic without brackets (Grazzi et
   al.: batch 1024, lr 1e-3, AdamW, lengths 3-40, the answer supervised only), trained until it learns
   or the section's time runs out; then scaled accuracy over 40-256 and steps to learn.

``--sections`` picks some of them, ``--mixers`` some specs, ``--workers`` the processes at once.
Without CUDA (``torch.cuda.is_available()`` false) it writes ``{"skipped": REASON}`` and exits 0; with
``--device cpu`` the equivalence section runs on the CPU in float32 (how the tests check the machinery).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.layers import MIXERS, build_mixer
from statetrack.ops.dplr.rwkv7 import rwkv7_fla_fits
from statetrack.spec import parse_layers
from statetrack.training import memory
from statetrack.training.device import ieee_float32

memory.configure()
ROOT = Path(__file__).resolve().parents[1]

#: the variants beside each mixer's defaults whose kernels differ (the eigenvalue range switches the
#: delta rule's kernel; heads and chunks change the tiling)
VARIANTS = [
    "mamba(neg=true)",
    "negmamba(conv=0)",
    "deltanet(neg=true)",
    "deltanet(heads=2)",
    "deltaproduct(neg=true)",
    "gateddeltanet(neg=true)",
    "gateddeltanet(heads=2)",
    "mamba2(neg=true)",
    "mamba3(rope=false)",
    "rwkv7(heads=2)",
    "kda(neg=true)",
]
#: mixers whose CUDA path runs fla's bfloat16 chunk kernels (q, k, v rounded to 8 significant bits); with
#: ``neg=true`` the delta-rule family runs fla's float32 recurrent kernels instead (``tolerance``)
BF16_MIXERS = ("deltanet", "deltaproduct", "gateddeltanet", "rwkv7", "gla", "kda")
#: mixers whose CUDA path runs fla's kernels, whose compiling and autotuning take longest on a bare machine
#: (on 2026-11-27 the last three, rwkv7, gla and kda, were still compiling when the share ran out): the
#: parallel section starts them first
FLA_MIXERS = (*BF16_MIXERS, "gateddeltaproduct")
F32_TOL, BF16_TOL = 1e-4, 5e-2
#: the sections, in the order they run (the CUDA tests start first, in a process of their own, and are
#: collected after the equivalence section)
SECTIONS = ("equivalence", "cuda_tests", "speed", "paper_cell")


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def section_env(device: str) -> dict:
    out = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
    }
    if device == "cuda":
        out["gpu"] = torch.cuda.get_device_name()
    for mod in ("triton", "fla"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:
            out[mod] = f"not importable: {type(e).__name__}: {e}"
    return out


def start_cuda_tests() -> subprocess.Popen:
    """The CUDA-only tests in a process of their own (they compile their kernels while the equivalence
    section compiles its own: the machine has CPU cores to spare)."""
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-v",  # a line per test as it ends, so that a cut run still names what passed and failed
        "-m",
        "kernels",
        "-p",
        "no:cacheprovider",
        "tests/test_kernels.py",
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def read_outcomes(stdout: str) -> dict:
    """pytest -v's output, whole or cut: the tests collected, the count of each outcome so far and the
    names of the failed ones."""
    found = re.search(r"collected (\d+) items?", stdout)
    outcomes = re.findall(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)", stdout, re.M)
    counts = Counter(outcome.lower() for _, outcome in outcomes)
    failed = [name for name, outcome in outcomes if outcome in ("FAILED", "ERROR")]
    return {"collected": int(found.group(1)) if found else None, **counts, "failed_tests": failed}


def section_cuda_tests(proc: subprocess.Popen, seconds: float) -> dict:
    """Wait up to ``seconds`` for the tests ``start_cuda_tests`` started; their counts and failures (those
    that ended in time, where the wait cuts them)."""
    try:
        stdout, _ = proc.communicate(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        return {
            "cut": f"did not finish in the time left to them ({seconds:.0f} s after the equivalence section)",
            **read_outcomes(stdout or ""),
        }
    tail = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    return {"returncode": proc.returncode, "summary": tail, **read_outcomes(stdout)}


def _clone_grads(m) -> dict:
    return {n: p.grad.detach().double().cpu() for n, p in m.named_parameters() if p.grad is not None}


def _forward_backward(m, x):
    m.zero_grad(set_to_none=True)
    y, _ = m(x)
    w = torch.linspace(-1, 1, y.numel(), dtype=y.dtype, device=y.device).reshape(y.shape)
    (y * w).sum().backward()
    return y.detach().double().cpu(), _clone_grads(m)


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def tolerance(layer, device: str, mixer) -> float:
    """The bound for a spec and its built ``mixer``: bfloat16's where its CUDA path runs one of fla's chunk
    kernels, else float32's (the CPU; the Triton scans; fla's float32 recurrent kernels, which ``neg=true``
    selects; RWKV-7 heads too narrow for fla's kernels, read off the mixer, which run this project's
    chunked form)."""
    bf16 = device == "cuda" and layer.name in BF16_MIXERS and not layer.options.get("neg", False)
    if bf16 and layer.name == "rwkv7":
        bf16 = rwkv7_fla_fits(mixer.dk, mixer.dv)
    return BF16_TOL if bf16 else F32_TOL


def equivalence_row(spec: str, device: str) -> dict:
    """One mixer: its output and parameter gradients on ``device`` (float32, kernels on) against the CPU
    float64 reference (kernels off)."""
    (layer,) = parse_layers(spec)
    torch.manual_seed(0)
    ref = build_mixer(layer, 16, 16).double()
    dev = build_mixer(layer, 16, 16)
    dev.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    dev = dev.to(device)
    x = torch.randn(4, 64, 16, dtype=torch.float64)
    old = os.environ.get("STATETRACK_KERNELS")
    os.environ["STATETRACK_KERNELS"] = "0"
    try:
        y_ref, g_ref = _forward_backward(ref, x)
    finally:
        os.environ.pop("STATETRACK_KERNELS") if old is None else os.environ.__setitem__(
            "STATETRACK_KERNELS", old
        )
    y, g = _forward_backward(dev, x.float().to(device))
    grad_err = max((rel(g[n], g_ref[n]) for n in g_ref if n in g), default=0.0)
    missing = sorted(set(g_ref) - set(g))
    tol = tolerance(layer, device, dev)
    err = max(rel(y, y_ref), grad_err)
    return {
        "mixer": spec,
        "output_err": rel(y, y_ref),
        "grad_err": grad_err,
        "tolerance": tol,
        "ok": err <= tol and not missing,
        "missing_grads": missing,
    }


def error_text(e: Exception) -> str:
    """An exception as one line: its type and the first and last lines of its message (a compiler's first
    line names only the place; its last, the fault)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: " + " ... ".join(dict.fromkeys(lines[:1] + lines[-1:]))


def _row_or_error(spec: str, device: str) -> dict:
    try:
        return equivalence_row(spec, device)
    except Exception as e:
        return {"mixer": spec, "ok": False, "error": error_text(e)}


def _print_row(r: dict) -> None:
    what = f"output {r['output_err']:.1e}, gradients {r['grad_err']:.1e}" if "error" not in r else r["error"]
    print(f"equivalence {r['mixer']}: {what}" + ("" if r["ok"] else "  FAILED"), flush=True)


def section_equivalence(
    device: str, budget: Budget, specs: list[str] | None = None, workers: int = 1
) -> dict:
    """Every spec's row (``equivalence_row``), in the specs' order; with ``workers`` > 1 in that many
    processes at once (spawned: each has its own CUDA context and compiles its own kernels, which is
    where a bare machine's time goes), those of ``FLA_MIXERS`` started first. Specs not finished when the
    budget runs out are listed as cut."""
    specs = list(specs or [*MIXERS, *VARIANTS])
    done: dict[str, dict] = {}
    if workers <= 1:
        for spec in specs:
            if budget.left() < 5:
                break
            done[spec] = _row_or_error(spec, device)
            _print_row(done[spec])
    else:
        import multiprocessing

        # spawned workers start with torch's defaults: each sets IEEE float32 as the parent did
        init = ieee_float32 if device == "cuda" else None
        pool = multiprocessing.get_context("spawn").Pool(workers, initializer=init)
        first = sorted(specs, key=lambda spec: parse_layers(spec)[0].name not in FLA_MIXERS)  # stable
        try:
            jobs = {spec: pool.apply_async(_row_or_error, (spec, device)) for spec in first}
            for spec, job in jobs.items():
                try:
                    done[spec] = job.get(timeout=max(0.1, budget.left()))
                except multiprocessing.TimeoutError:
                    continue
                _print_row(done[spec])
        finally:
            pool.terminate()  # the workers still compiling when the budget ran out
            pool.join()
    rows = [done[s] for s in specs if s in done]
    out: dict = {"rows": rows, "failed": [r["mixer"] for r in rows if not r["ok"]]}
    cut = [s for s in specs if s not in done]
    if cut:
        out["cut"] = f"out of time before {', '.join(cut)}"
    return out


def section_speed(steps: int = 200) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_train_gpu import _loop_ms, section_grazzi  # the Grazzi shape, timed with graphs

    t = time.monotonic()
    rows = section_grazzi(steps)
    # the paper cell's own model and task (3 layers, 4 heads, MLP blocks, modular arithmetic), timed alike
    ms = _loop_ms(paper_cell_config(10**6, True, "cuda"), steps)[0]
    rows.append(
        {"model": "paper cell", "layers": paper_cell_config(1, True, "cuda").model.layers, "ms_per_step": ms}
    )
    return {"rows": rows, "timed_steps": steps, "seconds": time.monotonic() - t}


def paper_cell_config(steps: int, stop_when_learned: bool, device: str) -> TrainConfig:
    """The paper cell: DeltaNet [-1,1] x3 on modular arithmetic without brackets at Grazzi et al.'s recipe,
    the answer read at a final '=' as in their code."""
    return TrainConfig(
        task="modarith:5/equals",
        model=ModelConfig(layers="deltanet(neg=true,heads=4)*3", d_model=128, d_state=32, mlp=True),
        train_min_len=3,
        train_max_len=40,
        steps=steps,
        batch_size=1024,
        lr=1e-3,
        weight_decay=0.1,
        warmup_frac=0.1,
        eval_every=500,
        patience=10**6,
        val_sequences=2048,
        device=device,
        stop_when_learned=stop_when_learned,
    )


def section_paper_cell(
    seconds: float, steps: int = 100_000, stop_when_learned: bool = True, device: str = "cuda"
) -> dict:
    """DeltaNet [-1,1] x3 on modular arithmetic without brackets at Grazzi et al.'s recipe, for ``steps`` or
    until learnt or until ``seconds`` (less the test's share) run out; then the test at lengths 40-256."""
    cfg = paper_cell_config(steps, stop_when_learned, device)
    out, ms = train_within(
        cfg, EvalConfig(lengths=[40, 64, 128, 256], batch_size=512, device=device), seconds
    )
    scaled = [m.scaled_accuracy for m in ms if m.scaled_accuracy is not None]
    out["scaled_accuracy_40_256"] = sum(scaled) / len(scaled) if scaled else None
    out["per_length"] = {m.length: m.accuracy for m in ms}
    return out


def train_within(cfg: TrainConfig, eval_cfg: EvalConfig, seconds: float, test_share: float = 40.0):
    """Train ``cfg`` for its steps, or until learnt where it stops then, or until ``seconds`` less the
    test's share run out; then test at ``eval_cfg``. Returns (what the run did: curve, steps, steps per
    second, learnt at, cut at, best validation; the test's length metrics)."""
    from statetrack.model import build_model
    from statetrack.training.evaluation import evaluate
    from statetrack.training.loop import train

    t0 = time.monotonic()
    deadline = t0 + seconds - test_share
    task = model_task(cfg.task)
    model = build_model(cfg.model, task)  # in hand when the budget cuts the run: its last step's weights
    curve: list = []

    def on_step(step: int, info: dict) -> None:
        curve.append({k: info[k] for k in ("step", "val_accuracy", "val_loss")})
        if time.monotonic() > deadline:
            raise TimeoutError(step)

    out: dict = {"layers": cfg.model.layers, "curve": curve}
    try:
        res = train(cfg, task=task, model=model, on_step=on_step, progress=False)
        model, out["learned_at_step"], out["cut"] = res.model, res.learned_at_step, None
        out["steps"], out["best_val_accuracy"], out["best_val_loss"] = (
            res.steps_run,
            res.best_val_accuracy,
            res.best_val_loss,
        )
    except TimeoutError as e:  # cut by the budget: its last weights are tested, not the best validated
        model = model.eval()
        out["cut_at_step"], out["steps"] = e.args[0], e.args[0]
        out["best_val_accuracy"] = max((c["val_accuracy"] for c in curve), default=None)
        out["best_val_loss"] = min((c["val_loss"] for c in curve), default=None)
    out["steps_per_s"] = out["steps"] / (time.monotonic() - t0)
    ms = evaluate(model, task, eval_cfg)
    out["seconds"] = time.monotonic() - t0
    return out, ms


def model_task(name: str):
    from statetrack.tasks import get_task

    return get_task(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=470.0, help="seconds for everything (default 470)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--mixers", nargs="*", default=None, help="equivalence: only these specs")
    ap.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help=f"the sections to run (default: all, in this order: {' '.join(SECTIONS)})",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="equivalence: processes at once (default: 8 on CUDA, where compiling is the cost; 1 on the CPU)",
    )
    ap.add_argument(
        "--equivalence-seconds",
        type=float,
        default=None,
        help="equivalence's share (default: 45%%, at most 240 s)",
    )
    ap.add_argument(
        "--paper-steps",
        type=int,
        default=100_000,
        help="paper_cell: the most steps (default 100,000, the recipe's; fewer ends in time for the long test)",
    )
    ap.add_argument(
        "--paper-all-steps",
        action="store_true",
        help="paper_cell: train every step (default: stop once learned in distribution)",
    )
    a = ap.parse_args(argv)
    a.workers = a.workers or (8 if a.device == "cuda" else 1)
    out_path = Path(a.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    def write():
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(out_path)

    if a.device == "cuda" and not torch.cuda.is_available():
        result["skipped"] = (
            "no CUDA device: torch.cuda.is_available() is False on this machine "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda})"
        )
        write()
        print(f"gpu_check: skipped: {result['skipped']}")
        return 0
    budget = Budget(a.budget)
    if a.device == "cuda":
        ieee_float32()  # as training does: cuDNN's RNN kernels in float32, not TF32
    result["env"] = section_env(a.device)
    write()
    share = a.equivalence_seconds or min(budget.left() * 0.45, 240.0)
    tests = start_cuda_tests() if a.device == "cuda" and "cuda_tests" in a.sections else None
    sections = {
        "equivalence": lambda: section_equivalence(
            a.device, Budget(min(share, budget.left())), a.mixers, a.workers
        ),
        "cuda_tests": lambda: section_cuda_tests(tests, min(120.0, budget.left() * 0.4)) if tests else {},
        "speed": section_speed,
        "paper_cell": lambda: section_paper_cell(
            max(30.0, budget.left() - 10), a.paper_steps, not a.paper_all_steps
        ),
    }
    for name in sorted(a.sections, key=SECTIONS.index):
        if a.device != "cuda" and name != "equivalence":
            continue
        try:
            result[name] = sections[name]()
        except Exception as e:  # one section's failure is a finding; the sections after it still run
            result[name] = {"error": error_text(e)}
            print(f"gpu_check: section {name} failed: {result[name]['error']}", flush=True)
        write()
    failed = result.get("equivalence", {}).get("failed", [])
    print(f"gpu_check: wrote {out_path}; equivalence failures: {', '.join(failed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
