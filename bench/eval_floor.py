"""Evaluation against the floor of its scan: CPU time per token of evaluating a Mamba model at long lengths
(``statetrack.evaluate``, the path of a run's test lengths and of ``statetrack horizon``) beside the scan
alone on the same shapes (``ops.mamba_scan`` over the same chunks, its inputs made beforehand), and the
peak resident memory of each length, each length in a fresh process at one thread.

    PYTHONPATH=src python bench/eval_floor.py [--lengths 10000,100000,1000000] [--width 32] [--batch 16]
        [--reps 3] [--compare]

Per length: the medians over ``--reps`` of evaluation and floor (interleaved in one process), in us per
token (one token = one step of one sequence), their ratio, and the process's peak resident memory.
``--compare`` also runs, interleaved, the layer's work around the scan as separate PyTorch ops (the
conv's shifted multiply-adds, the skip term and gate after the scan: ``ops.conv.c_rounds_alike`` and
``ops.mamba.scan.gated_rounds_alike`` patched to False), the form before the fused kernels.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, statistics, sys, time, torch
torch.set_num_threads(1)
from statetrack import EvalConfig, ModelConfig, build_model, evaluate, get_task
from statetrack.ops import conv as conv_ops, mamba_scan
from statetrack.ops.mamba import scan as mamba_ops
from statetrack.training import memory

memory.configure()  # the allocator settings of statetrack's entry points
length, batch, chunk, width, reps, compare = (int(a) for a in sys.argv[1:7])
task = get_task("parity")
torch.manual_seed(0)
model = build_model(ModelConfig(layers="mamba", d_model=width, d_state=16), task).eval()
E, N = model.blocks[0].mixer.d_inner, model.blocks[0].mixer.d_state
cfg = EvalConfig(lengths=[length], batch_size=batch, chunk=chunk, doublings=0)
g = torch.Generator().manual_seed(0)
dt = torch.rand(batch, chunk, E, generator=g) * 0.1
A = -torch.arange(1, N + 1.0).repeat(E, 1)
u, Bm, Cm = (torch.randn(batch, chunk, n, generator=g) for n in (E, N, N))
fused = conv_ops.c_rounds_alike, mamba_ops.gated_rounds_alike


def use(on):
    conv_ops.c_rounds_alike, mamba_ops.gated_rounds_alike = fused if on else (lambda: False,) * 2


def floor():
    h = torch.zeros(batch, E, N)
    with torch.no_grad():
        for s in range(0, length, chunk):
            n = min(chunk, length - s)
            _, h = mamba_scan(dt[:, :n], A, u[:, :n], Bm[:, :n], Cm[:, :n], h)


def cpu(f):
    t = time.process_time()
    f()
    return (time.process_time() - t) / (batch * length) * 1e6


evaluate(model, task, EvalConfig(lengths=[16], batch_size=batch))  # warm-up
got = {"eval": [], "floor": [], "before": []}
for _ in range(reps):
    use(True)
    got["eval"].append(cpu(lambda: evaluate(model, task, cfg)))
    got["floor"].append(cpu(floor))
    if compare:
        use(False)
        got["before"].append(cpu(lambda: evaluate(model, task, cfg)))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"length": length, "peak_mib": peak, **{k: statistics.median(v) for k, v in got.items() if v}}))
"""


def measure(length: int, batch: int, chunk: int, width: int, reps: int, compare: bool) -> dict:
    args = [str(v) for v in (length, batch, chunk, width, reps, int(compare))]
    out = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="10000,100000,1000000")
    p.add_argument("--width", type=int, default=32, help="d_model (inner width 2x, state 16 per channel)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--compare", action="store_true", help="also the layer's ops unfused, interleaved")
    a = p.parse_args(argv)
    rows = []
    for n in a.lengths.split(","):
        r = measure(int(n), a.batch, a.chunk, a.width, a.reps, a.compare)
        rows.append(r)
        before = f"  unfused {r['before']:.3f} us ({r['before'] / r['floor']:.2f}x)" if "before" in r else ""
        print(
            f"L={r['length']:>8,d}  eval {r['eval']:.3f} us/token  floor {r['floor']:.3f} us/token  "
            f"{r['eval'] / r['floor']:.2f}x  peak {r['peak_mib']:.0f} MiB{before}",
            flush=True,
        )
    if len(rows) > 1:
        print(f"peak ratio longest/shortest: {rows[-1]['peak_mib'] / rows[0]['peak_mib']:.3f}")
    return rows


if __name__ == "__main__":
    main()
