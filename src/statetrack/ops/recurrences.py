"""The recurrences by name, each declared in its folder's ``declaration.py``, and the checks every one of them
passes: its fast forms against its float64 step-by-step reference, and the eigenvalues of its transitions
inside the range it declares.

A recurrence is one folder of this package (``ops/<name>/``: ``reference.py``, its fast forms, a C or Triton
kernel where it has one) whose ``declaration.py`` holds ``RECURRENCE``, a :class:`Recurrence`; adding one is
that folder plus its name in :data:`BUILTIN` (docs/extending.md, "A recurrence"). Outside the package,
:func:`load` registers such a folder of any package, and :func:`register` a :class:`Recurrence` made
anywhere. A notebook runs the checks on any of them:

    >>> from statetrack.ops import recurrences
    >>> recurrences.check(recurrences.recurrence("mamba"))   # raises AssertionError where a check fails
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from statetrack.errors import allowed

#: the built-in recurrences: the folders of this package with a ``declaration.py``, one line each
BUILTIN = (
    "diag",
    "selective",
    "mamba",
    "mamba3",
    "ssd",
    "deltanet",
    "gated_delta",
    "gla",
    "kda",
    "dplr",
    "mlstm",
    "slstm",
    "pdssm",
)


@dataclass(frozen=True)
class RealRange:
    """Real eigenvalues in [low, high]."""

    low: float = 0.0
    high: float = 1.0


@dataclass(frozen=True)
class Disc:
    """Complex eigenvalues of modulus at most ``radius``."""

    radius: float = 1.0


#: where a recurrence's transitions have their eigenvalues, for the inputs its declaration draws
EigenvalueRange = RealRange | Disc


@dataclass(frozen=True)
class Recurrence:
    """A recurrence's declaration.

    ``sample(generator, T)`` draws the inputs of a short sequence of T steps in float64 (a tuple of tensors,
    None where an input is optional), inside the ranges the mixers give them; ``reference(*inputs)`` is the
    float64 step-by-step loop; ``forms`` the fast forms by name, each taking the same inputs in their dtype
    and returning what the reference returns (a tensor or a tuple of them, the outputs and the last state);
    ``eigenvalues(*inputs)`` the eigenvalues of every transition (complex, any shape), inside
    ``eigenvalue_range``; None for a non-linear recurrence (no transition matrix). ``rtol32`` bounds the
    error of the float32 forms relative to the largest output."""

    name: str
    description: str
    sample: Callable[[torch.Generator, int], tuple[Any, ...]]
    reference: Callable[..., Any]
    forms: dict[str, Callable[..., Any]]
    eigenvalues: Callable[..., Tensor] | None = None
    eigenvalue_range: EigenvalueRange | None = None
    input_dependent: bool = True
    rtol32: float = 1e-4
    #: the steps of the checks' sequences: chunked forms want more than one chunk, and a ragged last one
    lengths: Sequence[int] = field(default=(1, 7, 37))


def randn(g: torch.Generator, *shape: int) -> Tensor:
    """Standard normal float64 numbers from ``g`` (what the declarations' ``sample`` draws with)."""
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def rand(g: torch.Generator, *shape: int) -> Tensor:
    """Uniform float64 numbers in [0, 1) from ``g``."""
    return torch.rand(*shape, generator=g, dtype=torch.float64)


def crandn(g: torch.Generator, *shape: int) -> Tensor:
    """Standard normal complex128 numbers from ``g``."""
    return torch.randn(*shape, generator=g, dtype=torch.complex128)


_REGISTERED: dict[str, Recurrence] = {}


def register(rec: Recurrence) -> Recurrence:
    """Add a recurrence (a name already taken is refused)."""
    registered()
    if rec.name in _REGISTERED:
        raise ValueError(f"recurrence {rec.name!r} is already registered")
    _REGISTERED[rec.name] = rec
    return rec


def load(folder: str) -> Recurrence:
    """Register the recurrence of a folder, a package (``statetrack.ops.mamba``, or one outside statetrack)
    whose ``declaration`` module holds ``RECURRENCE``."""
    return register(importlib.import_module(f"{folder}.declaration").RECURRENCE)


def registered() -> dict[str, Recurrence]:
    """Every recurrence by name, the built-ins first (their declarations imported on first use)."""
    if not _REGISTERED:
        for name in BUILTIN:
            rec = importlib.import_module(f"statetrack.ops.{name}.declaration").RECURRENCE
            assert rec.name == name, f"ops/{name}/declaration.py declares {rec.name!r}"
            _REGISTERED[name] = rec
    return _REGISTERED


def recurrence(name: str) -> Recurrence:
    found = registered().get(name)
    if found is None:
        raise allowed("recurrence", name, registered())
    return found


def _tensors(out: Any) -> list[Tensor]:
    return [out] if isinstance(out, Tensor) else [t for o in out for t in _tensors(o)]


def _cast(x: Any, dtype: torch.dtype) -> Any:
    """Real tensors to ``dtype``, complex ones to its complex dtype, integer ones kept (in tuples too)."""
    if isinstance(x, tuple):
        return tuple(_cast(y, dtype) for y in x)
    if not isinstance(x, Tensor):
        return x
    if x.is_complex():
        return x.to(torch.complex64 if dtype == torch.float32 else torch.complex128)
    return x.to(dtype) if x.is_floating_point() else x


def form_errors(
    rec: Recurrence, dtype: torch.dtype = torch.float32, seed: int = 0
) -> dict[tuple[str, int], float]:
    """(form, T) -> the largest error of the form's outputs in ``dtype`` against the float64 reference, relative
    to the largest output of the reference."""
    out = {}
    for T in rec.lengths:
        inputs = rec.sample(torch.Generator().manual_seed(seed + T), T)
        refs = _tensors(rec.reference(*inputs))
        for name, form in rec.forms.items():
            got = _tensors(form(*_cast(inputs, dtype)))
            assert len(got) == len(refs), (
                f"{rec.name}: form {name} returns {len(got)} tensors, the reference {len(refs)}"
            )
            out[(name, T)] = max(
                float((g.to(r.dtype) - r).abs().max() / r.abs().max().clamp_min(1e-30))
                for g, r in zip(got, refs, strict=True)
            )
    return out


def outside_range(rec: Recurrence, seed: int = 0, tol: float = 1e-9) -> list[complex]:
    """The eigenvalues of the transitions on the declaration's inputs that lie outside its declared range."""
    if rec.eigenvalues is None or rec.eigenvalue_range is None:
        return []
    inputs = rec.sample(torch.Generator().manual_seed(seed), max(rec.lengths))
    ev = rec.eigenvalues(*inputs).to(torch.complex128).flatten()
    rng = rec.eigenvalue_range
    if isinstance(rng, RealRange):
        bad = (ev.imag.abs() > tol) | (ev.real < rng.low - tol) | (ev.real > rng.high + tol)
    else:
        bad = ev.abs() > rng.radius + tol
    return [complex(z) for z in ev[bad][:8].tolist()]


def check(rec: Recurrence, seed: int = 0) -> None:
    """Every fast form against the reference (float64 to 1e-9, float32 to ``rtol32``) and the eigenvalues inside
    the declared range; an AssertionError names what failed."""
    for dtype, tol in ((torch.float64, 1e-9), (torch.float32, rec.rtol32)):
        errors = form_errors(rec, dtype, seed)
        bad = {k: e for k, e in errors.items() if not e <= tol}
        assert not bad, f"{rec.name}: forms off the reference in {dtype} (form, T: relative error): {bad}"
    outside = outside_range(rec, seed)
    assert not outside, f"{rec.name}: eigenvalues outside {rec.eigenvalue_range}: {outside}"
