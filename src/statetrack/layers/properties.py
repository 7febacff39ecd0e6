"""What every mixer declares, without torch: the properties the theorems read (input dependence, the
domain of the eigenvalues of its transition A(x), its structure), its description and the options a layer
spec may set with their defaults.

The declarations of the built-in mixers are in :mod:`statetrack.layers.declarations`; a plugin's mixer
class is declared when it is registered (``statetrack.layers.register``). ``statetrack models`` and the
oracle (``statetrack.theory``) read only these, so they start without importing torch; a mixer's class
(``statetrack.layers.base.Mixer``) reads its description and properties from its declaration, and its
options, read from its ``__init__``, must be the declared ones (checked when the class is defined).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from statetrack.errors import UserError, allowed, did_you_mean

if TYPE_CHECKING:
    from statetrack.spec import LayerSpec


class EigenvalueDomain(StrEnum):
    """Where the eigenvalues of a mixer's transition A(x) lie, from narrowest to widest."""

    NONNEG = "[0,1]"
    REAL_HALF_NEG = "(-1/2,1]"  # negative eigenvalues bounded away from -1
    REAL = "[-1,1]"  # -1 reached, in every built-in mixer only through float32 rounding (Properties.rounding)
    UNIT_CIRCLE = "unit circle"
    COMPLEX_DISC = "complex disc"
    DAMPED_ROTATIONS = "damped rotations"  # a decay floor: Mamba-3 with a_floor > 0
    FIXED_PHASE = "fixed-phase rotations"  # input-dependent modulus, time-invariant phase (standard RoPE)
    COMPLEX_FIXED = "complex"
    NOT_LINEAR = "n/a"


class Structure(StrEnum):
    """The shape of a mixer's transition."""

    SCALAR = "scalar"  # a scalar times the identity (per head): the narrowest diagonal
    DIAGONAL = "diagonal"
    HOUSEHOLDER = "householder"  # a product of n_h generalized Householder matrices, possibly gated
    DPLR = "dplr"  # diagonal plus a rank-one matrix (RWKV-7)
    PD = "pd"  # a column one-hot matrix times a complex diagonal (PD-SSM, A = P D): one non-zero entry per column
    PD_ROWS = "pd-rows"  # a complex diagonal times a row one-hot matrix (PD-SSM's public code, A = D P)
    DENSE = "dense"
    NONLINEAR = "nonlinear"
    ATTENTION = "attention"


#: eigenvalue domains of A(x), from narrowest to widest, in words
DOMAINS = {
    EigenvalueDomain.NONNEG: "non-negative real, at most 1",
    EigenvalueDomain.REAL_HALF_NEG: "real, in (-1/2, 1]: negative eigenvalues bounded away from -1",
    EigenvalueDomain.REAL: "real, in [-1, 1]",
    EigenvalueDomain.UNIT_CIRCLE: "complex, modulus exactly 1",
    EigenvalueDomain.COMPLEX_DISC: "complex, modulus at most 1",
    EigenvalueDomain.DAMPED_ROTATIONS: "complex, modulus at most 1, and below 1 off the real axis except at tiny "
    "angles (a decay floor: Mamba-3 with a_floor > 0)",
    EigenvalueDomain.FIXED_PHASE: "complex: an input-dependent modulus in [0, 1] times a fixed (time-invariant) "
    "rotation per slot, so every input of a length has the same phase",
    EigenvalueDomain.COMPLEX_FIXED: "complex, fixed (time-invariant), modulus at most 1",
    EigenvalueDomain.NOT_LINEAR: "non-linear recurrence: no transition matrix",
}
STRUCTURES = tuple(Structure)

#: where float32 rounds the saturating maps of the parametrisations to their limits (measured with torch's float32
#: exp and sigmoid on this project's CPUs); the mixers' Properties.rounding cite them
ROUND_EXP = "exp(-x) = 1 for x < 2.7e-8"
ROUND_SIGMOID = "sigmoid(z) = 1 for z > 16.6"
ROUND_NEG_EXP = "2 exp(-x) - 1 = -1 for x > 18.0"


@dataclass(frozen=True)
class Properties:
    """What the theorems look at: input dependence, eigenvalue domain, structure (and n_h). The domain
    and the structure may be given as their names ("[0,1]", "diagonal"): they are read as the enums.

    The domain is the set of eigenvalues the mixer's float32 transitions take. ``rounding`` says how the
    parametrisation reaches modulus 1 (the eigenvalues 1 and -1 and the rotations that every construction
    holds over any length) where it reaches it only through float32 rounding: a saturating map (sigmoid,
    exp) that takes its limit only once the float rounds it, e.g. "2 sigmoid(z) = 2 for z > 17". Empty
    when those eigenvalues are reached in exact arithmetic at finite weights (AUSSM's exp(i theta)). The
    oracle qualifies every 'possible' verdict whose construction needs them (``theory.verdicts``).
    ``factor_eigenvalues``: for a product of Householder factors (possibly gated), the domain of each factor
    I - beta k k^T (1 and 1 - beta): [0,1] for beta in [0, 1], [-1,1] for beta in [0, 2]."""

    input_dependent: bool
    eigenvalues: EigenvalueDomain
    structure: Structure
    linear: bool = True
    n_h: int | None = None
    rounding: str = ""
    factor_eigenvalues: EigenvalueDomain | None = None  # Householder structures: each factor's domain

    def __post_init__(self) -> None:
        for key, kind in (
            ("eigenvalues", EigenvalueDomain),
            ("structure", Structure),
            ("factor_eigenvalues", EigenvalueDomain),
        ):
            value = getattr(self, key)
            if value is None and key == "factor_eigenvalues":
                continue
            if value not in kind.__members__.values():
                raise ValueError(
                    f"unknown {key} {value!r} in a mixer's Properties; allowed: "
                    f"{', '.join(repr(str(m)) for m in kind)}"
                )
            object.__setattr__(self, key, kind(value))

    def as_dict(self) -> dict:
        return asdict(self)


def exp_rounding(what: str, neg: bool) -> str:
    """Properties.rounding of a transition exp(-x), x > 0 (``neg``: 2 exp(-x) - 1): where it reaches 1 (and -1)."""
    if neg:
        return (
            f"{what}'s 2 exp(-x) - 1 reaches 1 and -1 only through float32 rounding ({ROUND_EXP}; "
            f"{ROUND_NEG_EXP})"
        )
    return f"{what} = exp(-x) reaches 1 only through float32 rounding ({ROUND_EXP})"


class HasOptions(Protocol):
    """What :func:`check_options` reads: a mixer class or its declaration (``Declared``)."""

    @property
    def name(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...


def check_options(cls: HasOptions, options: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a layer spec's options into the mixer's defaults (``cls``: its class or its declaration);
    unknown keys and values of the wrong type are a UserError."""
    unknown = sorted(set(options) - set(cls.options))
    if unknown:
        allowed = ", ".join(sorted(cls.options)) or "none"
        raise UserError(
            f"unknown option {unknown[0]!r}{did_you_mean(unknown[0], cls.options)} for mixer "
            f"{cls.name!r}; allowed: {allowed}"
        )
    merged = dict(cls.options)
    for k, v in options.items():
        default = cls.options[k]
        if isinstance(default, bool) and not isinstance(v, bool):
            raise UserError(f"option {k}={v!r} of mixer {cls.name!r} must be true or false")
        int_default = isinstance(default, int) and not isinstance(default, bool)
        if int_default and (isinstance(v, bool) or not isinstance(v, int)):
            raise UserError(f"option {k}={v!r} of mixer {cls.name!r} must be an integer")
        if isinstance(default, float) and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise UserError(f"option {k}={v!r} of mixer {cls.name!r} must be a number")
        if isinstance(default, str) and not isinstance(v, str):
            raise UserError(f"option {k}={v!r} of mixer {cls.name!r} must be a name")
        merged[k] = v
    return merged


@dataclass(frozen=True)
class Declared:
    """A mixer's declaration: ``name``, ``description``, ``options`` (a layer spec's options with their
    defaults), ``fixed`` (options its class passes for good, not in its spec: Negative Mamba's neg=True),
    and ``properties``: its Properties as a function of every option value, ``fixed`` included."""

    name: str
    description: str
    options: dict = field(default_factory=dict)
    properties: Callable[[dict], Properties] | None = None
    fixed: dict = field(default_factory=dict)

    def properties_of(self, options: Mapping[str, Any] | None = None) -> Properties:
        """The Properties of the mixer built with ``options`` (checked, over the defaults)."""
        if self.properties is None:
            raise UserError(f"mixer {self.name!r} declares no properties")
        return self.properties({**check_options(self, options or {}), **self.fixed})


#: mixer name -> its declaration (the built-ins, then plugins' mixers as they are registered)
DECLARED: dict[str, Declared] = {}
#: mixer name -> the plugin module that registered it (mixers of statetrack itself are absent)
ORIGIN: dict[str, str] = {}


def declare(d: Declared) -> Declared:
    DECLARED[d.name] = d
    return d


def declaration(name: str) -> Declared:
    """The declaration of mixer ``name`` (plugins are loaded first if it is unknown); an unknown name is a
    UserError naming the allowed ones."""
    if name not in DECLARED:
        from statetrack import plugins

        plugins.autoload()
    if name not in DECLARED:
        raise allowed("mixer", name, DECLARED)
    return DECLARED[name]


def declared_properties(spec: LayerSpec) -> Properties:
    """The Properties of one layer of a layer spec (``statetrack.spec.LayerSpec``), without building it."""
    return declaration(spec.name).properties_of(spec.options)


def option_values(spec: LayerSpec) -> dict[str, Any]:
    """Every option value of one layer of a spec: its declaration's defaults and fixed options, then the
    spec's (checked)."""
    d = declaration(spec.name)
    return {**check_options(d, spec.options), **d.fixed}
