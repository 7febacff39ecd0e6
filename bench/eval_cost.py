"""CPU time of evaluating the default test lengths (16 to 10,000, 128 sequences each), with the heap trimmed
after every chunk (the former rule) and only once the resident set has grown (``memory.trim_if_grown``),
and with the layer's work around the scan as separate PyTorch ops (the conv's shifted multiply-adds, the
skip term and gate after the scan: the form before the fused kernels, ``ops.conv.c_rounds_alike`` and
``ops.mamba.scan.gated_rounds_alike`` patched to False), interleaved in one process at one thread.

    PYTHONPATH=src python bench/eval_cost.py [--layers mamba] [--d-model 8] [--reps 5] [--lengths 16,...]

Prints, per repeat, the CPU time (user + system) of each rule and the medians; the model is untrained
(its accuracy does not change the work: every length is scored on the same sequences either way, with no
doubling since an untrained model is far below 90%).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch

from statetrack import EvalConfig, ModelConfig, build_model, evaluate, get_task
from statetrack.config import default_lengths
from statetrack.ops import conv as conv_ops
from statetrack.ops.mamba import scan as mamba_ops
from statetrack.training import evaluation, memory


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layers", default="mamba")
    p.add_argument("--d-model", type=int, default=8)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--lengths", default=",".join(map(str, default_lengths())))
    a = p.parse_args(argv)
    memory.configure()
    torch.set_num_threads(1)
    task = get_task("parity")
    torch.manual_seed(0)
    model = build_model(ModelConfig(layers=a.layers, d_model=a.d_model), task).eval()
    cfg = EvalConfig(lengths=[int(n) for n in a.lengths.split(",")])
    fused = conv_ops.c_rounds_alike, mamba_ops.gated_rounds_alike
    unfused = (lambda: False,) * 2
    rules = {  # name: (what runs after each chunk, the fused forms or not)
        "trim every chunk": (lambda: memory.release_free_memory() or True, fused),
        "trim once grown": (memory.trim_if_grown, fused),
        "never trim": (lambda: False, fused),
        "trim once grown, unfused": (memory.trim_if_grown, unfused),
    }
    evaluate(model, task, EvalConfig(lengths=[16]))  # warm-up
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in rules}
    for rep in range(a.reps):
        for name in list(rules) if rep % 2 == 0 else reversed(rules):
            evaluation.trim_if_grown, (conv_ops.c_rounds_alike, mamba_ops.gated_rounds_alike) = rules[name]
            (u0, s0), t0 = _cpu(), time.perf_counter()
            evaluate(model, task, cfg)
            (u1, s1), t1 = _cpu(), time.perf_counter()
            got[name].append((u1 - u0, s1 - s0, t1 - t0))
            print(
                f"rep {rep} {name}: user {u1 - u0:.2f} s, system {s1 - s0:.2f} s, wall {t1 - t0:.2f} s",
                flush=True,
            )
    for name, rows in got.items():
        cpu = statistics.median(u + s for u, s, _ in rows)
        sys_ = statistics.median(s for _, s, _ in rows)
        print(f"{name}: median CPU {cpu:.2f} s (system {sys_:.2f} s) over {len(rows)}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident {peak:.0f} MiB; {a.layers} width {a.d_model}, lengths {a.lengths}")


if __name__ == "__main__":
    main()
