"""Layers as the oracle reads them: each mixer of a spec, built small, classified by its declared
:class:`~statetrack.layers.base.Properties` alone.

=============  ==========================================================================
nonlinear      linear=False, structure nonlinear (RNN, LSTM, GRU)
attention      structure attention (Transformer)
lti            time-invariant (input_dependent=False), diagonal (S4D)
nonneg         input-dependent diagonal, eigenvalues [0,1] (Mamba, GLA; scalar: Mamba-2, mLSTM)
real           input-dependent diagonal, eigenvalues (-1,1] or [-1,1] (Negative Mamba, Mamba-2 [-1,1])
complex        input-dependent diagonal, unit circle or complex disc (AUSSM, Simple AUSSM, DCD, Mamba-3)
damped         input-dependent diagonal with damped rotations (Mamba-3 with a decay floor)
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
from enum import StrEnum

from statetrack.layers.properties import (
    EigenvalueDomain,
    Properties,
    Structure,
    declared_properties,
    option_values,
)
from statetrack.spec import parse_layers

NONNEG = {EigenvalueDomain.NONNEG}
#: real eigenvalues bounded away from -1: the powers of a fixed (diagonalisable) transition converge (T1c)
CONTRACTING = {EigenvalueDomain.REAL_HALF_NEG}
REAL_NEG = {EigenvalueDomain.REAL_HALF_OPEN, EigenvalueDomain.REAL}
COMPLEX = {EigenvalueDomain.UNIT_CIRCLE, EigenvalueDomain.COMPLEX_DISC, EigenvalueDomain.COMPLEX_FIXED}
DAMPED = {EigenvalueDomain.DAMPED_ROTATIONS}


class LayerClass(StrEnum):
    """A layer as the oracle's rules read it (the table above)."""

    NONLINEAR = "nonlinear"
    ATTENTION = "attention"
    LTI = "lti"
    NONNEG = "nonneg"
    REAL = "real"
    COMPLEX = "complex"
    DAMPED = "damped"
    HOUSEHOLDER = "householder"
    DPLR = "dplr"
    LTI_DENSE = "lti-dense"
    DENSE = "dense"
    OTHER = "other"


#: input-dependent diagonal layers, and with the time-invariant ones, every diagonal layer
SELECTIVE_DIAGONAL = frozenset({LayerClass.NONNEG, LayerClass.REAL, LayerClass.COMPLEX, LayerClass.DAMPED})
DIAGONAL = SELECTIVE_DIAGONAL | {LayerClass.LTI}
#: the classes with a transition matrix
LINEAR = DIAGONAL | {LayerClass.HOUSEHOLDER, LayerClass.DPLR, LayerClass.DENSE, LayerClass.LTI_DENSE}


@dataclass(frozen=True)
class LayerInfo:
    spec: str
    props: Properties
    cls: LayerClass
    factor_domain: EigenvalueDomain | None = None  # householder: eigenvalue domain of each factor

    @property
    def domain(self) -> EigenvalueDomain:
        return self.props.eigenvalues


def classify(spec, mixer=None) -> LayerInfo:
    """The class of one layer of a spec, from its declared properties (``mixer``: a built layer, whose
    properties and ``neg`` are read instead: a plugin's mixer built by a model)."""
    p: Properties = mixer.properties if mixer is not None else declared_properties(spec)
    neg = getattr(mixer, "neg", None) if mixer is not None else option_values(spec).get("neg")
    if not p.linear:
        return LayerInfo(str(spec), p, LayerClass.ATTENTION if p.structure == Structure.ATTENTION else
                         LayerClass.NONLINEAR if p.structure == Structure.NONLINEAR else LayerClass.OTHER)
    if p.structure in (Structure.DIAGONAL, Structure.SCALAR):
        if not p.input_dependent:
            return LayerInfo(str(spec), p, LayerClass.LTI)
        if p.eigenvalues in NONNEG | CONTRACTING:
            return LayerInfo(str(spec), p, LayerClass.NONNEG)
        if p.eigenvalues in REAL_NEG:
            return LayerInfo(str(spec), p, LayerClass.REAL)
        if p.eigenvalues in COMPLEX:
            return LayerInfo(str(spec), p, LayerClass.COMPLEX)
        if p.eigenvalues in DAMPED:
            return LayerInfo(str(spec), p, LayerClass.DAMPED)
    if p.structure == Structure.HOUSEHOLDER:
        # each factor I - beta k k^T has eigenvalues 1 and 1 - beta. The declared domain is the
        # product's; with one factor, or a real product domain, it is the factors' domain too.
        # Otherwise (n_h >= 2 with a complex product) the factor range is read from an explicit
        # ``factor_eigenvalues`` property or the mixer's ``neg`` switch where it declares one.
        fd = getattr(p, "factor_eigenvalues", None)
        if fd is None and (p.n_h in (None, 1) or p.eigenvalues in NONNEG | REAL_NEG):
            fd = (EigenvalueDomain.REAL if p.eigenvalues in REAL_NEG else
                  EigenvalueDomain.NONNEG if p.eigenvalues in NONNEG else None)
        if fd is None and isinstance(neg, bool):
            fd = EigenvalueDomain.REAL if neg else EigenvalueDomain.NONNEG
        return LayerInfo(str(spec), p, LayerClass.HOUSEHOLDER, fd)
    if p.structure == Structure.DPLR and p.input_dependent:
        return LayerInfo(str(spec), p, LayerClass.DPLR)
    if not p.input_dependent:
        return LayerInfo(str(spec), p, LayerClass.LTI_DENSE)
    return LayerInfo(str(spec), p, LayerClass.DENSE)


def layer_infos(layers: str) -> list[LayerInfo]:
    """Each layer of the spec with its declared properties (``statetrack.layers.declarations``: nothing is
    built, no torch imported)."""
    return [classify(spec) for spec in parse_layers(layers)]
