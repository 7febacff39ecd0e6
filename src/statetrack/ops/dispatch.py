"""Which form an op runs: the GPU kernels for CUDA tensors, the PyTorch forms otherwise.

* ``mamba_scan`` and ``selective_scan`` (complex a) run this package's Triton kernels
  (``ops.triton_scans``) on CUDA tensors of dtype float32, bfloat16 or float16 where ``triton`` is
  installed;
* ``delta_rule`` runs flash-linear-attention's kernels (``ops.deltanet.fla``) on CUDA tensors of those
  dtypes where ``fla`` (package ``fla-core``, the ``cuda`` extra) is installed;
* ``mamba_scan`` runs this package's C kernel (``ops.cpu_kernels``, built at first use) on CPU
  float32 tensors where a C compiler is on the ``PATH``.

Everything else (CPU tensors, float64, a missing package) runs the PyTorch forms, which are also the
references the kernels are tested against. ``STATETRACK_KERNELS=0`` forces the PyTorch forms on CUDA
and on the CPU too (for comparisons); ``1`` or unset is the default. Availability is detected with
``importlib.util.find_spec``; the packages are imported only when an op dispatches to them, so a
CPU-only install never imports triton or fla, and an installed package that fails to import raises.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch
from torch import Tensor

from statetrack.errors import UserError
from statetrack.ops import cpu_kernels

ENV = "STATETRACK_KERNELS"
#: dtypes the kernels take (they compute in float32); float64 stays on the PyTorch forms
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.complex64)


def kernels_enabled() -> bool:
    """False when ``STATETRACK_KERNELS=0``; any value other than 0 or 1 is refused."""
    value = os.environ.get(ENV, "1")
    if value not in ("0", "1"):
        raise UserError(
            f"{ENV}={value!r}; allowed: 0 (PyTorch forms everywhere), 1 (the kernels, the default)"
        )
    return value == "1"


@functools.cache
def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cuda(x: Tensor) -> bool:
    return x.is_cuda and x.dtype in KERNEL_DTYPES


def use_triton(x: Tensor) -> bool:
    """Run the Triton scans for this tensor?"""
    return _cuda(x) and kernels_enabled() and installed("triton")


def use_cpu_kernels(x: Tensor) -> bool:
    """Run the C kernels of ``ops.cpu_kernels`` for this tensor (CPU, float32, a C compiler found)?"""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and kernels_enabled()
        and cpu_kernels.compiler() is not None
    )


def use_fla(x: Tensor) -> bool:
    """Run flash-linear-attention's delta rule for this tensor?"""
    return _cuda(x) and kernels_enabled() and installed("fla")
