"""The training loop on a CUDA device: its step against the CUDA-graph replay of the same step, the
Grazzi et al. shape and its projected protocol time, and runs packed on one GPU.

    PYTHONPATH=src python bench/bench_train_gpu.py [--json FILE] [--only SECTION ...] [--steps N]

Sections:
- ``check``: a short run trained three ways (CPU; CUDA eager, without graphs; CUDA with graphs): the
  graphs' curve must equal the eager CUDA curve, and both stay close to the CPU's.
- ``small``: one layer at batch 256, length 40, width 16 (Negative Mamba, DeltaNet [-1,1], AUSSM):
  ms per step of the eager step without host reads, of the training loop with graphs (batches made,
  copied, step replayed), and of the bare graph replay.
- ``grazzi``: batch 1024, length 40, width 128, two layers (Mamba [-1,1], DeltaNet [-1,1]): ms per
  step with graphs; the Grazzi et al. protocol (54 runs x 100,000 steps) projected from it.
- ``packed``: N processes training the grazzi shape at once on the one GPU (N = 1, 2, 4, 8): steps per
  second in all; the protocol projected from the best N.
Times are medians over repeats after warm-up, synchronised with the device.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time

import numpy as np
import torch

from statetrack.config import ModelConfig, TrainConfig
from statetrack.model import build_model
from statetrack.tasks import get_task
from statetrack.training import memory
from statetrack.training.loop import lr_lambda, train
from statetrack.training.steps import DeviceStep, batches

memory.configure()  # the allocator settings statetrack's entry points use (statetrack.training.memory)


def _cfg(layers, d, steps, batch, lo, hi, **kw):
    return TrainConfig(
        task="parity",
        model=ModelConfig(layers=layers, d_model=d, d_state=16),
        train_min_len=lo,
        train_max_len=hi,
        steps=steps,
        batch_size=batch,
        lr=kw.pop("lr", 3e-3),
        eval_every=max(1, steps // 4),
        patience=1000,
        val_sequences=kw.pop("val", 256),
        **kw,
    )


def section_check(steps):
    out = []
    for layers in ("negmamba(conv=0)", "deltanet(neg=true)", "aussm"):
        curves = {}
        for name, kw in (
            ("cpu", {"device": "cpu"}),
            ("cuda-eager", {"device": "cuda", "cuda_graphs": False}),
            ("cuda-graphs", {"device": "cuda", "cuda_graphs": True}),
        ):
            r = train(_cfg(layers, 16, steps, 64, 1, 40, **kw))
            curves[name] = [(c.train_loss, c.val_loss, c.val_accuracy) for c in r.curve]
        same = curves["cuda-eager"] == curves["cuda-graphs"]
        gap = max(abs(a[1] - b[1]) for a, b in zip(curves["cpu"], curves["cuda-graphs"], strict=True))
        out.append(
            {
                "layers": layers,
                "graphs_equal_eager": same,
                "max_val_loss_gap_cpu_vs_cuda": gap,
                "curves": curves,
            }
        )
        print(f"check {layers}: graphs == eager CUDA: {same}; |val loss CPU - CUDA| <= {gap:.2e}")
    return out


def _time_steps(stepper, data, n, step0=1):
    times = []
    for i in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        stepper.step(*next(data), step0 + i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _loop_ms(cfg, n):
    """ms per step of the training loop itself (batches, copies, step), no synchronisation in the loop."""
    task, dev = get_task(cfg.task), torch.device("cuda")
    model = build_model(cfg.model, task).to(dev).train()
    stepper = DeviceStep(model, cfg, lr_lambda(cfg), dev, graphs=cfg.cuda_graphs)
    data = batches(task, np.random.default_rng(0), cfg, dev)
    for s in range(1, 4 * (cfg.train_max_len - cfg.train_min_len + 1) + 1):  # every length captured
        stepper.step(*next(data), s)
    stepper.read()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for s in range(n):
        stepper.step(*next(data), s + 1)
    stepper.read()
    torch.cuda.synchronize()
    data.close()
    return (time.perf_counter() - t) / n * 1e3, stepper, model


def _replay_ms(stepper, n):
    graph = next(iter(stepper.graphs.values()))[0]
    graph.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        graph.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def section_small(n):
    out = []
    for layers in ("negmamba", "deltanet(neg=true)", "aussm"):
        eager, _, _ = _loop_ms(_cfg(layers, 16, 10**6, 256, 40, 40, device="cuda", cuda_graphs=False), n)
        loop, stepper, _ = _loop_ms(_cfg(layers, 16, 10**6, 256, 40, 40, device="cuda"), n)
        replay = _replay_ms(stepper, n)
        out.append(
            {
                "layers": layers,
                "eager_ms": eager,
                "loop_ms": loop,
                "replay_ms": replay,
                "loop_over_replay": loop / replay,
            }
        )
        print(
            f"small {layers}: eager {eager:.2f} ms, training loop with graphs {loop:.2f} ms, bare replay "
            f"{replay:.2f} ms ({loop / replay:.2f}x)"
        )
    return out


GRAZZI = (("Mamba [-1,1]", "negmamba*2"), ("DeltaNet [-1,1]", "deltanet(neg=true)*2"))


def section_grazzi(n):
    out = []
    for label, layers in GRAZZI:
        ms, _, _ = _loop_ms(_cfg(layers, 128, 10**6, 1024, 3, 40, device="cuda"), n)
        hours = 54 * 100_000 * ms / 1e3 / 3600
        out.append(
            {"model": label, "layers": layers, "ms_per_step": ms, "protocol_hours_one_at_a_time": hours}
        )
        print(
            f"grazzi {label}: {ms:.2f} ms/step (lengths 3-40) -> 54 runs x 100k steps = {hours:.1f} h one at a time"
        )
    return out


def _packed_worker(layers, n, barrier, q):
    torch.set_num_threads(1)
    cfg = _cfg(layers, 128, 10**6, 1024, 3, 40, device="cuda")
    task, dev = get_task(cfg.task), torch.device("cuda")
    model = build_model(cfg.model, task).to(dev).train()
    stepper = DeviceStep(model, cfg, lr_lambda(cfg), dev)
    data = batches(task, np.random.default_rng(0), cfg, dev)
    for s in range(1, 160):
        stepper.step(*next(data), s)
    stepper.read()
    torch.cuda.synchronize()
    barrier.wait()
    t = time.perf_counter()
    for s in range(n):
        stepper.step(*next(data), s + 1)
    stepper.read()
    torch.cuda.synchronize()
    q.put((time.perf_counter() - t, n))
    data.close()


def section_packed(n, counts=(1, 2, 4, 8)):
    out = []
    ctx = mp.get_context("spawn")
    for label, layers in GRAZZI:
        for k in counts:
            barrier, q = ctx.Barrier(k), ctx.Queue()
            procs = [ctx.Process(target=_packed_worker, args=(layers, n, barrier, q)) for _ in range(k)]
            for p in procs:
                p.start()
            res = [q.get() for _ in procs]
            for p in procs:
                p.join()
            wall = max(t for t, _ in res)
            rate = k * n / wall
            hours = 54 * 100_000 / rate / 3600
            out.append({"model": label, "processes": k, "steps_per_s": rate, "protocol_hours": hours})
            print(f"packed {label}: {k} processes -> {rate:.0f} steps/s in all -> protocol {hours:.2f} h")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=["check", "small", "grazzi", "packed"])
    ap.add_argument("--steps", type=int, default=200, help="timed steps per measurement")
    ap.add_argument("--packed", default="1,2,4,8", help="process counts of the packed section")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if "check" in a.only:
        res["check"] = section_check(120)
    if "small" in a.only:
        res["small"] = section_small(a.steps)
    if "grazzi" in a.only:
        res["grazzi"] = section_grazzi(a.steps)
    if "packed" in a.only:
        res["packed"] = section_packed(a.steps, tuple(int(k) for k in a.packed.split(",")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
