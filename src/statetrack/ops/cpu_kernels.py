"""C kernels for the CPU: built from ``ops/<recurrence>/*.c`` by the machine's C compiler at first use.

Where a recurrence's PyTorch form is bound by per-step op overhead and memory traffic (Mamba's scan:
a dozen ops over (B, E, N) numbers per time step), a C loop that keeps the state in registers runs
it in one pass. Each library is compiled once per process, into a temporary folder removed as soon
as the library is loaded (nothing is cached or left on disk), with ``$CC`` (default ``cc``) and
``-O3 -march=native`` plus the reassociation flags that let the compiler vectorise the sums
(``-ffast-math`` is not used: linked into a shared library it would change the floating-point mode
of the whole process). Building takes about 0.2 s of CPU.

Used where :func:`statetrack.ops.dispatch.use_cpu_kernels` says so: CPU float32 tensors, a C
compiler on the ``PATH``, and ``STATETRACK_KERNELS`` not 0. A compiler that is there but fails
raises (with its first error line); it is never skipped silently. Every kernel is tested against
its float64 step-by-step reference (tests/test_cpu_kernels.py).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from typing import overload

from torch import Tensor

CC_ENV = "CC"
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fPIC",
    "-shared",
)
#: how to run without the kernels, said with every build or load failure
_OPT_OUT = " (set STATETRACK_KERNELS=0 to use the PyTorch forms)"
#: the C types of the kernels' arguments: sizes, flags, pointers (the folders' signatures are written in them)
I64, INT, PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
#: a library's functions, each with its argument types (each returns nothing)
Signatures = tuple[tuple[str, tuple[type, ...]], ...]


@functools.cache
def compiler() -> str | None:
    """The C compiler's path ($CC, default ``cc``), or None when there is none."""
    return shutil.which(os.environ.get(CC_ENV, "cc"))


@functools.cache
def library(name: str, signatures: Signatures = ()) -> ctypes.CDLL:
    """Build ``ops/NAME.c`` and load it (once per process): NAME is the recurrence's folder and the source's
    name in it, ``mamba/mamba_scan``; ``signatures`` declares its functions' argument types (the folder's
    ``KERNEL`` holds both)."""
    cc = compiler()
    if cc is None:
        raise RuntimeError(f"no C compiler: ${CC_ENV} or cc not found on PATH")
    folder, _, stem = name.partition("/")
    source = resources.files("statetrack.ops") / folder / f"{stem}.c"
    with resources.as_file(source) as src, tempfile.TemporaryDirectory(prefix="statetrack-kernels-") as tmp:
        out = os.path.join(tmp, f"{stem}.so")
        proc = subprocess.run([cc, *FLAGS, str(src), "-o", out, "-lm"], capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.splitlines()
            first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "")
            msg = f"building {src} with {cc} failed (exit status {proc.returncode})"
            raise RuntimeError((f"{msg}: {first}" if first else msg) + _OPT_OUT)
        try:
            lib = ctypes.CDLL(out)
        except OSError as e:  # e.g. a temporary folder mounted noexec
            raise RuntimeError(f"loading {out} built from {src} failed: {e}{_OPT_OUT}") from e
    for fn, argtypes in signatures:
        getattr(lib, fn).argtypes = list(argtypes)
        getattr(lib, fn).restype = None
    return lib


@overload
def dense(x: Tensor) -> Tensor: ...


@overload
def dense(x: None) -> None: ...


def dense(x: Tensor | None) -> Tensor | None:
    """``x`` as the C kernels read it: contiguous, with PyTorch's lazy negation and conjugation applied (the
    real and imaginary parts of a conjugated gradient are views whose sign lives in a flag, which a raw
    pointer does not see, and a one-element view counts as contiguous)."""
    return None if x is None else x.resolve_conj().resolve_neg().contiguous()


def ptr(x: Tensor | None) -> int | None:
    """The data pointer of a tensor made by :func:`dense` (None for None)."""
    if x is None:
        return None
    assert x.is_contiguous() and not x.is_neg() and not x.is_conj(), "C kernels take dense() tensors"
    return x.data_ptr()
