"""Layers as the oracle reads them: each mixer of a spec, built small, classified by its declared
:class:`~statetrack.layers.base.Properties` alone.

=============  ==========================================================================
nonlinear      linear=False, structure nonlinear (RNN, LSTM, GRU)
attention      structure attention (Transformer)
lti            time-invariant (input_dependent=False), diagonal (S4D)
nonneg         input-dependent diagonal, eigenvalues [0,1] (Mamba, GLA; scalar: Mamba-2, mLSTM)
real           input-dependent diagonal, eigenvalues (-1,1] or [-1,1] (Negative Mamba, Mamba-2 [-1,1])
complex        input-dependent diagonal, unit circle or complex disc (AUSSM, Simple AUSSM, DCD, Mamba-3)
householder    products of n_h generalized Householder matrices, possibly times a scalar gate (DeltaNet,
               DeltaProduct, Gated DeltaNet)
dplr           input-dependent diagonal plus rank-one (RWKV-7)
lti-dense      time-invariant, dense;   dense: input-dependent, dense

A scalar transition (a number times the identity) is a special diagonal one. A diagonal layer whose
real eigenvalues stay in (-1/2, 1] is read as ``nonneg``: every rule that uses that class needs only
that the powers of a fixed transition converge, which holds there too (docs/science.md, T1c).
=============  ==========================================================================
"""
from __future__ import annotations

from dataclasses import dataclass

from statetrack.errors import allowed
from statetrack.layers import MIXERS, build_mixer
from statetrack.layers.base import Properties
from statetrack.spec import parse_layers

NONNEG = {"[0,1]"}
#: real eigenvalues bounded away from -1: the powers of a fixed (diagonalisable) transition converge (T1c)
CONTRACTING = {"(-1/2,1]"}
REAL_NEG = {"(-1,1]", "[-1,1]"}
COMPLEX = {"unit circle", "complex disc", "complex"}


@dataclass(frozen=True)
class LayerInfo:
    spec: str
    props: Properties
    cls: str
    factor_domain: str | None = None  # householder: eigenvalue domain of each factor

    @property
    def domain(self) -> str:
        return self.props.eigenvalues


def classify(spec, mixer) -> LayerInfo:
    p: Properties = mixer.properties
    if not p.linear:
        return LayerInfo(str(spec), p, "attention" if p.structure == "attention" else
                         "nonlinear" if p.structure == "nonlinear" else "other")
    if p.structure in ("diagonal", "scalar"):
        if not p.input_dependent:
            return LayerInfo(str(spec), p, "lti")
        if p.eigenvalues in NONNEG | CONTRACTING:
            return LayerInfo(str(spec), p, "nonneg")
        if p.eigenvalues in REAL_NEG:
            return LayerInfo(str(spec), p, "real")
        if p.eigenvalues in COMPLEX:
            return LayerInfo(str(spec), p, "complex")
    if p.structure == "householder":
        # each factor I - beta k k^T has eigenvalues 1 and 1 - beta. The declared domain is the
        # product's; with one factor, or a real product domain, it is the factors' domain too.
        # Otherwise (n_h >= 2 with a complex product) the factor range is read from an explicit
        # ``factor_eigenvalues`` property or the mixer's ``neg`` switch where it declares one.
        fd = getattr(p, "factor_eigenvalues", None)
        if fd is None and (p.n_h in (None, 1) or p.eigenvalues in NONNEG | REAL_NEG):
            fd = "[-1,1]" if p.eigenvalues in REAL_NEG else "[0,1]" if p.eigenvalues in NONNEG else None
        if fd is None and isinstance(getattr(mixer, "neg", None), bool):
            fd = "[-1,1]" if mixer.neg else "[0,1]"
        return LayerInfo(str(spec), p, "householder", fd)
    if p.structure == "dplr" and p.input_dependent:
        return LayerInfo(str(spec), p, "dplr")
    if not p.input_dependent:
        return LayerInfo(str(spec), p, "lti-dense")
    return LayerInfo(str(spec), p, "dense")


def layer_infos(layers: str) -> list[LayerInfo]:
    """Build each layer of the spec (small sizes) and read its declared properties."""
    out = []
    for spec in parse_layers(layers):
        if spec.name not in MIXERS:
            raise allowed("mixer", spec.name, MIXERS)
        out.append(classify(spec, build_mixer(spec, 8, 4)))
    return out
