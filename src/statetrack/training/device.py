"""Device choice: cpu, cuda, or auto (cuda when present); float32 on CUDA means IEEE float32."""

from __future__ import annotations

import platform

import torch

from statetrack.errors import UserError


def ieee_float32() -> None:
    """float32 products and recurrences in IEEE float32 on CUDA: torch's default runs cuDNN's RNN and LSTM
    kernels (the ``rnn``, ``lstm`` and ``gru`` mixers) in TF32, with 10-bit mantissas in their products;
    measured on an H100 (bench/gpu_check.py) that put them 2.5e-4 from the float64 reference, where every
    other float32 path is within 1e-5. Idempotent; a no-op for the CPU."""
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"  # type: ignore[attr-defined]  # torch >= 2.9, no stubs
    torch.backends.cudnn.rnn.fp32_precision = "ieee"  # type: ignore[attr-defined]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device 'cuda' requested but no CUDA device is available; allowed here: auto, cpu")
    if name not in ("cpu", "cuda"):
        raise UserError(f"unknown device {name!r}; allowed: auto, cpu, cuda")
    if name == "cuda":
        ieee_float32()
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
