"""The Mixer interface and the three properties every mixer declares.

A mixer maps (B, T, d_model) -> (B, T, d_model) and carries a recurrent state. It has two paths that
must agree: ``forward(x, state)`` (the training path: parallel, chunked or a fused loop) and
``step(x_t, state)`` (one token at a time). Both take and return the state, so evaluation can run any
length in fixed memory by feeding chunks.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

#: eigenvalue domains of A(x), from narrowest to widest
DOMAINS = {
    "[0,1]": "non-negative real, at most 1",
    "(-1,1]": "real, in (-1, 1]",
    "[-1,1]": "real, in [-1, 1]",
    "unit circle": "complex, modulus exactly 1",
    "complex disc": "complex, modulus at most 1",
    "complex": "complex, fixed (time-invariant), modulus below 1",
    "n/a": "non-linear recurrence: no transition matrix",
}
STRUCTURES = ("diagonal", "householder", "dense", "nonlinear", "attention")


@dataclass(frozen=True)
class Properties:
    """What the theorems look at: input dependence, eigenvalue domain, structure (and n_h)."""

    input_dependent: bool
    eigenvalues: str
    structure: str
    linear: bool = True
    n_h: int | None = None

    def __post_init__(self):
        assert self.eigenvalues in DOMAINS, self.eigenvalues
        assert self.structure in STRUCTURES, self.structure

    def as_dict(self) -> dict:
        return asdict(self)


State = Any  # a tensor or a tuple of tensors


class Mixer(nn.Module):
    """Base class. Subclasses set ``name`` and ``description`` and implement the four methods."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: options accepted in a layer spec, with their defaults
    options: ClassVar[dict] = {}

    def __init__(self, d_model: int, d_state: int):
        super().__init__()
        self.d_model, self.d_state = d_model, d_state

    @property
    def properties(self) -> Properties:
        raise NotImplementedError

    def init_state(self, batch: int, device=None, dtype=None) -> State:
        raise NotImplementedError

    def forward(self, x: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        raise NotImplementedError

    def step(self, x: Tensor, state: State) -> tuple[Tensor, State]:
        raise NotImplementedError

    def activation_bytes(self) -> int:
        """Bytes a forward pass without gradients holds per sequence and time step, at most: an estimate
        from the shapes in float32, which evaluation uses to size its chunks (``EvalConfig.memory_mb``).
        The default allows a dozen vectors of width d_model x d_state; mixers that know better say so."""
        return 12 * 4 * self.d_model * max(1, self.d_state)

    def eigenvalues(self, x: Tensor) -> Tensor | None:
        """Eigenvalues of the transition A(x) for inputs x (B, T, d_model) -> (B, T, n) complex.

        None for non-linear mixers, which have no transition matrix.
        """
        return None


def check_options(cls, options: dict) -> dict:
    """Merge a layer spec's options into the mixer's defaults; unknown keys are a UserError."""
    from statetrack.errors import UserError

    unknown = set(options) - set(cls.options)
    if unknown:
        allowed = ", ".join(sorted(cls.options)) or "none"
        raise UserError(f"unknown option {sorted(unknown)[0]!r} for mixer {cls.name!r}; allowed: {allowed}")
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


def check_conv(mixer: str, conv: int) -> None:
    """The short causal convolution's kernel size: 0 (none) to 64."""
    from statetrack.errors import UserError

    if conv < 0 or conv > 64:
        raise UserError(f"{mixer} conv={conv} not in 0..64 (0 = no convolution)")


def check_expand(mixer: str, expand: int) -> None:
    from statetrack.errors import UserError

    if not 1 <= expand <= 16:
        raise UserError(f"{mixer} expand={expand} not in 1..16")


def log_uniform_dt(mixer: str, n: int, dt_min: float, dt_max: float) -> Tensor:
    """log Delta drawn uniformly in [log dt_min, log dt_max] (the S4D / Mamba init); checks the range."""
    from statetrack.errors import UserError

    if not 0 < dt_min <= dt_max:
        raise UserError(f"{mixer} needs 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
    return torch.rand(n) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)


def init_dt_bias(mixer: str, proj: nn.Linear, dt_min: float, dt_max: float) -> None:
    """Set proj's bias so that softplus(bias) is log-uniform in [dt_min, dt_max] (Mamba's dt init)."""
    dt = torch.exp(log_uniform_dt(mixer, proj.bias.shape[0], dt_min, dt_max))
    with torch.no_grad():
        proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus


def causal_conv_step(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """One step of a depthwise causal conv. x (B, C), buf (B, C, K-1) holds the previous inputs."""
    window = torch.cat([buf, x.unsqueeze(-1)], dim=-1)  # (B, C, K)
    y = (window * conv.weight.squeeze(1)).sum(-1)
    if conv.bias is not None:
        y = y + conv.bias
    return y, window[..., 1:]
