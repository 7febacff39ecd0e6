"""Layers as the oracle reads them: each mixer of a spec, built small, classified by its declared
:class:`~statetrack.layers.base.Properties` alone.

=============  ==========================================================================
nonlinear      linear=False, structure nonlinear (RNN, LSTM, GRU)
attention      structure attention (Transformer)
lti            time-invariant (input_dependent=False), diagonal (S4D)
nonneg         input-dependent diagonal, eigenvalues [0,1] (Mamba, GLA; scalar: Mamba-2, mLSTM)
real           input-dependent diagonal, eigenvalues [-1,1] (Negative Mamba, Mamba-2 [-1,1])
complex        input-dependent diagonal, unit circle or complex disc (AUSSM, Simple AUSSM, DCD, Mamba-3)
damped         input-dependent diagonal with damped rotations (Mamba-3 with a decay floor)
householder    products of n_h generalized Householder matrices, possibly times a gate (DeltaNet,
               DeltaProduct, Gated DeltaNet, Gated DeltaProduct; KDA, whose gate is diagonal: its transition is
               similar to a symmetric one, as Gated DeltaNet's)
dplr           input-dependent diagonal plus rank-one (RWKV-7)
pd             a column one-hot matrix times a diagonal (PD-SSM): any map of the states, per token
pd-rows        a diagonal times a row one-hot matrix (PD-SSM's public code): the maps read in reverse
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
from statetrack.spec import Layers, as_layers

NONNEG = {EigenvalueDomain.NONNEG}
#: real eigenvalues bounded away from -1: the powers of a fixed (diagonalisable) transition converge (T1c)
CONTRACTING = {EigenvalueDomain.REAL_HALF_NEG}
REAL_NEG = {EigenvalueDomain.REAL}
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
    PD = "pd"
    PD_ROWS = "pd-rows"
    LTI_DENSE = "lti-dense"
    DENSE = "dense"
    OTHER = "other"


#: input-dependent diagonal layers, and with the time-invariant ones, every diagonal layer
SELECTIVE_DIAGONAL = frozenset({LayerClass.NONNEG, LayerClass.REAL, LayerClass.COMPLEX, LayerClass.DAMPED})
DIAGONAL = SELECTIVE_DIAGONAL | {LayerClass.LTI}
#: the classes with a transition matrix
LINEAR = DIAGONAL | {
    LayerClass.HOUSEHOLDER,
    LayerClass.DPLR,
    LayerClass.DENSE,
    LayerClass.LTI_DENSE,
    LayerClass.PD,
    LayerClass.PD_ROWS,
}


@dataclass(frozen=True)
class LayerInfo:
    spec: str
    props: Properties
    cls: LayerClass
    factor_domain: EigenvalueDomain | None = None  # householder: eigenvalue domain of each factor
    index: int = 0  # the layer's position in the stack
    heads: int = (
        1  # householder: independent recurrences in parallel, each with its own n_h factors per token
    )

    @property
    def domain(self) -> EigenvalueDomain:
        return self.props.eigenvalues


def classify(spec, mixer=None) -> LayerInfo:
    """The class of one layer of a spec, from its declared properties (``mixer``: a built layer, whose
    properties and ``neg`` are read instead: a plugin's mixer built by a model)."""
    p: Properties = mixer.properties if mixer is not None else declared_properties(spec)
    neg = getattr(mixer, "neg", None) if mixer is not None else option_values(spec).get("neg")
    if not p.linear:
        return LayerInfo(str(spec), p, _nonlinear_class(p))
    if p.structure in (Structure.DIAGONAL, Structure.SCALAR):
        return LayerInfo(str(spec), p, _diagonal_class(p))
    if p.structure == Structure.HOUSEHOLDER:
        heads = getattr(mixer, "H", 1) if mixer is not None else option_values(spec).get("heads", 1)
        heads = heads if isinstance(heads, int) and heads >= 1 else 1
        return LayerInfo(str(spec), p, LayerClass.HOUSEHOLDER, _factor_domain(p, neg), heads=heads)
    if p.structure == Structure.DPLR and p.input_dependent:
        return LayerInfo(str(spec), p, LayerClass.DPLR)
    if p.structure in (Structure.PD, Structure.PD_ROWS) and p.input_dependent:
        return LayerInfo(str(spec), p, LayerClass.PD if p.structure == Structure.PD else LayerClass.PD_ROWS)
    if not p.input_dependent:
        return LayerInfo(str(spec), p, LayerClass.LTI_DENSE)
    return LayerInfo(str(spec), p, LayerClass.DENSE)


def _nonlinear_class(p: Properties) -> LayerClass:
    """A layer that is not a linear recurrence: attention, a nonlinear RNN, or another."""
    if p.structure == Structure.ATTENTION:
        return LayerClass.ATTENTION
    if p.structure == Structure.NONLINEAR:
        return LayerClass.NONLINEAR
    return LayerClass.OTHER


def _diagonal_class(p: Properties) -> LayerClass:
    """A diagonal (or scalar) recurrence, by its input dependence and eigenvalue domain."""
    if not p.input_dependent:
        return LayerClass.LTI
    if p.eigenvalues in NONNEG | CONTRACTING:
        return LayerClass.NONNEG
    if p.eigenvalues in REAL_NEG:
        return LayerClass.REAL
    if p.eigenvalues in COMPLEX:
        return LayerClass.COMPLEX
    if p.eigenvalues in DAMPED:
        return LayerClass.DAMPED
    # fixed-phase rotations (standard RoPE): no rule here reads them (T4's periodic-input argument
    # covers them, but is not encoded for one layer that is both), so the oracle leaves them open
    return LayerClass.OTHER


def _factor_domain(p: Properties, neg: object) -> EigenvalueDomain | None:
    """The eigenvalue domain of each Householder factor I - beta k k^T (eigenvalues 1 and 1 - beta). The
    declared domain is the product's; with one factor, or a real product domain, it is the factors' domain
    too. Otherwise (n_h >= 2 with a complex product) the factor range is read from an explicit
    ``factor_eigenvalues`` property or the mixer's ``neg`` switch where it declares one."""
    fd = p.factor_eigenvalues
    if fd is None and (p.n_h in (None, 1) or p.eigenvalues in NONNEG | REAL_NEG):
        fd = (
            EigenvalueDomain.REAL
            if p.eigenvalues in REAL_NEG
            else EigenvalueDomain.NONNEG
            if p.eigenvalues in NONNEG
            else None
        )
    if fd is None and isinstance(neg, bool):
        fd = EigenvalueDomain.REAL if neg else EigenvalueDomain.NONNEG
    return fd


def layer_infos(layers: str | Layers) -> list[LayerInfo]:
    """Each layer of the spec with its declared properties (``statetrack.layers.declarations``: nothing is
    built, no torch imported)."""
    out = []
    for n, spec in enumerate(as_layers(layers)):
        info = classify(spec)
        out.append(LayerInfo(info.spec, info.props, info.cls, info.factor_domain, n, info.heads))
    return out
