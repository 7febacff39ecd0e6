"""The precision of the oracle's claims: the length to which float32 holds a construction's unit-modulus
transitions (docs/science.md, lemma F32).

A 'possible' verdict whose construction holds eigenvalues of modulus 1 claims every length; in float32 that
holds exactly only where the transitions are float32 numbers whose products float32 computes without
error: the eigenvalues 1 and -1 (a sign flip, a keep, a reflection about a coordinate axis) and one-hot
maps (0s and 1s). A rotation by 2 pi k/m is built from the float32 angle theta = fl(2 pi k/m) as
(fl(cos theta), fl(sin theta)) (``ops.polar``); that number lambda differs from w = exp(2 pi i k/m) by
|lambda - w|, from its modulus (|lambda| = 1 + eps) and its angle (arg lambda = 2 pi k/m + delta) together.
After n tokens the state lambda^n h_0 is off the exact w^n h_0 by about n |lambda - w| |h_0| (to first order;
at most n |lambda - w| max(1, |lambda|)^(n-1) |h_0|), while the nearest other class point lies 2 sin(pi/m) |h_0|
away: a read-out that decides within half that gap holds to n = sin(pi/m) / |lambda - w| (a read-out of the
angle alone holds to (pi/m) / |delta|, longer where the modulus error dominates). A word's letters add
their errors, so the stated length takes the largest error over the rotations the construction uses and the
smallest gap. A product of reflections I - 2 k k^T with L2-normalised float32 keys (DeltaProduct's) is
measured the same way: the spectral norm of its difference from rho(x), against half the smallest distance
between the points of the orbit of a fixed generic unit vector. Rounding the state after each step adds a
random walk of about sqrt(n) 6e-8 relative, far below the drift at these lengths.

The numbers use numpy's float32 cos and sin, within one unit in the last place of torch's; tests/
test_theory_precision.py checks the length against a float32 simulation of the recurrence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from statetrack.theory.representations import Representation, householder_factors

F32 = np.float32


@dataclass(frozen=True)
class Hold:
    """How long float32 holds a construction: ``length`` tokens (None: every length, exactly), and why."""

    length: int | None
    how: str

    def sentence(self) -> str:
        """The sentence a verdict's reason ends with."""
        if self.length is None:
            return f"In float32 it holds at every length: {self.how}"
        return f"In float32 it holds to about {self.length:.2g} tokens: {self.how}"

    def __and__(self, other: Hold) -> Hold:
        """The shorter of two holds (a construction on two layers holds as long as both do)."""
        if other.length is None or (self.length is not None and self.length <= other.length):
            return self
        return other


SIGNS = Hold(
    None,
    "the unit-modulus eigenvalues it holds are 1 and -1, float32 numbers whose products are exact",
)
KEEPS = Hold(None, "the only unit-modulus eigenvalue it holds is 1 (a keep), a float32 number")
ONE_HOT = Hold(None, "its transitions are one-hot maps (0s and 1s), whose products float32 computes exactly")


def rotation32(m: int, k: int = 1) -> complex:
    """exp(2 pi i k/m) as a layer builds it in float32: cos and sin of the float32 angle, each rounded."""
    theta = F32(2 * math.pi * k / m)
    return complex(float(np.cos(theta)), float(np.sin(theta)))


def rotation_error(m: int, k: int = 1) -> tuple[float, float, float]:
    """(|lambda - w|, |lambda| - 1, the angle error) of the float32 rotation lambda against w = exp(2 pi i k/m)."""
    lam, w = rotation32(m, k), complex(math.cos(2 * math.pi * k / m), math.sin(2 * math.pi * k / m))
    delta = math.remainder(math.atan2(lam.imag, lam.real) - 2 * math.pi * k / m, 2 * math.pi)
    return abs(lam - w), abs(lam) - 1, delta


def rotation_hold(orders: Iterable[int], every_k: bool = True) -> Hold:
    """The hold of a construction whose complex channels rotate by 2 pi k/m for each order m of ``orders``
    (every k < m, or only k = 1: one fixed eigenvalue exp(2 pi i/m)): sin(pi/m) / |lambda - w|, the smallest
    over the orders, with the largest error over the k of each."""
    best: tuple[float, int, int] | None = None  # (length, m, k)
    for m in sorted({int(m) for m in orders if m > 1}):
        k = max(range(1, m) if every_k else [1], key=lambda k: rotation_error(m, k)[0])
        err = rotation_error(m, k)[0]
        length = math.sin(math.pi / m) / err if err > 0 else math.inf
        if best is None or length < best[0]:
            best = (length, m, k)
    if best is None or math.isinf(best[0]):
        return SIGNS
    length, m, k = best
    err, eps, delta = rotation_error(m, k)
    return Hold(
        int(length),
        f"the rotation exp(2 pi i {'' if k == 1 else k}/{m}) built from its float32 angle is off the exact one "
        f"by {err:.2g} (|lambda| - 1 = {eps:.2g}, angle error {delta:.2g} rad), so after n tokens the state "
        f"drifts by about n x {err:.2g} of its radius and leaves half the gap to the nearest other class, "
        f"sin(pi/{m}) = {math.sin(math.pi / m):.3g}, near n = {length:.2g} (lemma F32)",
    )


def reflections32(m: np.ndarray) -> np.ndarray:
    """The orthogonal m as a product of reflections I - 2 k k^T with float32 keys, L2-normalised in float32
    and multiplied in float32 (lemma CD's factors, as a DeltaProduct layer holds them)."""
    d = len(m)
    out = np.eye(d, dtype=F32)
    for n in householder_factors(m):
        k = n.astype(F32)
        k = k / F32(np.sqrt(np.sum(k * k, dtype=F32)))
        out = out @ (np.eye(d, dtype=F32) - F32(2) * np.outer(k, k))
    return out


def reflection_hold(rep: Representation, letters: Iterable[int]) -> Hold:
    """The hold of a Householder layer applying rho(x) per letter x as float32 reflections: half the smallest
    distance between the orbit points rho(g) q of a fixed generic unit vector q, over the largest error
    ||rho32(x) - rho(x)||_2 of a letter."""
    errs = {
        int(x): float(
            np.linalg.norm(reflections32(rep.matrices[int(x)]).astype(np.float64) - rep.matrices[int(x)], 2)
        )
        for x in letters
    }
    err = max(errs.values(), default=0.0)
    if err == 0:
        return Hold(
            None, "its reflections have keys +-1 on coordinate axes, float32 numbers whose products are exact"
        )
    q = np.sqrt(np.arange(1, rep.dim + 1, dtype=np.float64))
    q /= np.linalg.norm(q)
    orbit = np.array([m @ q for m in rep.matrices.values()])
    gaps = np.linalg.norm(orbit[:, None, :] - orbit[None, :, :], axis=-1)
    half = float(gaps[~np.eye(len(orbit), dtype=bool)].min()) / 2 if len(orbit) > 1 else 1.0
    length = half / err
    return Hold(
        int(length),
        f"its reflections with L2-normalised float32 keys give rho(x) to {err:.2g} (spectral norm, the worst "
        f"letter), so after n tokens the state drifts by about n x {err:.2g} and leaves half the smallest gap "
        f"between the orbit points of a generic unit vector, {half:.3g}, near n = {length:.2g} (lemma F32)",
    )
