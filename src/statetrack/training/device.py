"""Device choice: cpu, cuda, or auto (cuda when present)."""

from __future__ import annotations

import platform

import torch

from statetrack.errors import UserError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' requested but no CUDA device is available; allowed here: auto, cpu")
    if name not in ("cpu", "cuda"):
        raise UserError(f"unknown device {name!r}; allowed: auto, cpu, cuda")
    return torch.device(name)


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
