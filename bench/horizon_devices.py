"""Failure horizons measured on CUDA against the same checkpoints measured on the CPU.

    PYTHONPATH=src python bench/horizon_devices.py CHECKPOINT... --out FILE [--max-len 500]

For each checkpoint: ``measure_horizons`` once with the model on the CPU and once on CUDA (Triton scans
and fla kernels where the mixer uses them), then every pair of states' horizon and accuracy side by side.
The horizons must be equal; the accuracies may differ in the last digits (float32 in another order).
Without CUDA it writes ``{"skipped": REASON}`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from statetrack.training.checkpoint import load_checkpoint
from statetrack.training.device import ieee_float32
from statetrack.training.horizon import measure_horizons


def _pairs(h: dict) -> dict:
    return {" / ".join(p["pair"]): (p["horizon"], p["accuracy"]) for p in h["pairs"]}


def compare(path: Path, max_len: int) -> dict:
    """One checkpoint's horizons on both devices: {checkpoint, layers, task, cpu, cuda, equal, pairs}."""
    out: dict = {"checkpoint": path.name}
    found = {}
    for device in ("cpu", "cuda"):
        model, cfg, task, _ = load_checkpoint(path, device=device)
        model.eval()
        t0 = time.perf_counter()
        with torch.no_grad():
            h = measure_horizons(model, task, max_len, device=device)
        out.update(layers=str(cfg.model.layers), task=task.name)
        out[device] = {"horizon": h["horizon"], "seconds": round(time.perf_counter() - t0, 2)}
        found[device] = _pairs(h)
    out["pairs"] = {k: {"cpu": found["cpu"][k], "cuda": found["cuda"].get(k)} for k in sorted(found["cpu"])}
    out["equal"] = out["cpu"]["horizon"] == out["cuda"]["horizon"] and all(
        v["cuda"] is not None and v["cpu"][0] == v["cuda"][0] for v in out["pairs"].values()
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-len", type=int, default=500)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        result: dict = {"skipped": "torch.cuda.is_available() is false"}
    else:
        ieee_float32()
        result = {"device": torch.cuda.get_device_name(), "max_len": a.max_len, "checkpoints": []}
        for path in a.checkpoints:
            result["checkpoints"].append(compare(path, a.max_len))
            a.out.write_text(json.dumps(result, indent=1))
        result["all_equal"] = all(c["equal"] for c in result["checkpoints"])
    a.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
