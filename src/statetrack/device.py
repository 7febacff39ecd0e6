"""Device choice: cpu, cuda, or auto (cuda when present)."""
from __future__ import annotations

import ctypes
import ctypes.util
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


def _glibc_trim():
    name = ctypes.util.find_library("c")
    lib = ctypes.CDLL(name) if name else None
    return getattr(lib, "malloc_trim", None)  # glibc only; None elsewhere (macOS, musl)


_MALLOC_TRIM = _glibc_trim()


def release_free_memory(device: torch.device) -> None:
    """Hand the CPU heap's free memory back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    Streaming evaluation calls it after every chunk. Each chunk allocates and frees the same
    temporaries, but with the transparent-huge-page hint (``statetrack.ops``) they are 2 MiB-aligned
    and glibc's heap fragments around them: the resident set grew with the length evaluated (peak
    1.31x from 1,000 to 100,000 steps, ``bench/eval_memory.py``); trimmed, it stays flat (1.03x)."""
    if torch.device(device).type == "cpu" and _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
