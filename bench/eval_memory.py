"""Peak memory of evaluation versus sequence length (each length in a fresh process).

    python bench/eval_memory.py [--layers 'negmamba*2'] [--lengths 1000,100000] [--batch 64]

Prints, per length, the process's peak resident memory and its growth over a warm-up evaluation at
length 16 in the same process (what the evaluation itself added).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, torch
torch.set_num_threads(1)
from statetrack import EvalConfig, ModelConfig, build_model, evaluate, get_task
from statetrack.training import memory

memory.configure()  # the allocator settings statetrack's entry points use (statetrack.training.memory)
layers = sys.argv[1]
length, batch, chunk, width = (int(a) for a in sys.argv[2:6])
task = get_task("parity")
model = build_model(ModelConfig(layers=layers, d_model=width, d_state=16), task).eval()
evaluate(model, task, EvalConfig(lengths=[16], batch_size=batch, chunk=chunk))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.time()
evaluate(model, task, EvalConfig(lengths=[length], batch_size=batch, chunk=chunk))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"length": length, "peak_kib": peak, "growth_kib": peak - base, "seconds": time.time() - t}))
"""


def measure(layers: str, length: int, batch: int, chunk: int, width: int = 64) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, layers, str(length), str(batch), str(chunk), str(width)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layers", default="negmamba(conv=0)*2")
    p.add_argument("--lengths", default="1000,100000")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--width", type=int, default=64, help="d_model (state 16 per channel)")
    a = p.parse_args(argv)
    rows = [measure(a.layers, int(n), a.batch, a.chunk, a.width) for n in a.lengths.split(",")]
    for r in rows:
        print(
            f"{a.layers:24s} L={r['length']:>7d}  peak {r['peak_kib'] / 1024:8.1f} MiB  "
            f"growth {r['growth_kib'] / 1024:7.1f} MiB  {r['seconds']:.1f}s"
        )
    if len(rows) > 1:
        print(f"peak ratio longest/shortest: {rows[-1]['peak_kib'] / rows[0]['peak_kib']:.3f}")
    return rows


if __name__ == "__main__":
    main()
