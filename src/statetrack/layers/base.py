"""The Mixer interface and the three properties every mixer declares.

A mixer maps (B, T, d_model) -> (B, T, d_model) and carries a recurrent state. It has two paths that
must agree: ``forward(x, state)`` (the training path: parallel, chunked or a fused loop) and
``step(x_t, state)`` (one token at a time). Both take and return the state, so evaluation can run any
length in fixed memory by feeding chunks.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.properties import (  # noqa: F401  (the names mixers import from here)
    DECLARED,
    DOMAINS,
    ROUND_EXP,
    ROUND_NEG_EXP,
    ROUND_SIGMOID,
    STRUCTURES,
    EigenvalueDomain,
    Properties,
    Structure,
    check_options,
    exp_rounding,
)
from statetrack.ops import causal_conv

State = Any  # a tensor or a tuple of tensors
#: where a state is made: a device, its name, or None (the default device)
Device = torch.device | str | None


class Mixer(nn.Module):
    """Base class. Subclasses set ``name`` and ``description`` and implement the four methods.

    A mixer's options are the keyword arguments of its ``__init__`` after ``d_model`` and ``d_state``,
    with their defaults: ``options`` is read from the signature when the class is defined, so the
    defaults are written once. An ``__init__`` that passes ``**kwargs`` on takes its parent's options
    too, less ``fixed_options``: the keyword arguments it passes for good (Negative Mamba's ``neg=True``).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: options accepted in a layer spec, with their defaults (read from ``__init__``)
    options: ClassVar[dict[str, Any]] = {}
    #: keyword arguments a subclass passes to its parent's ``__init__`` for good: not options of its spec
    fixed_options: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        derived = _init_options(cls)
        if "options" in vars(cls) and cls.options != derived:
            raise TypeError(
                f"mixer class {cls.__name__}: options {cls.options} are not the keyword arguments of "
                f"its __init__ {derived}; leave options out (they are read from __init__)"
            )
        cls.options = derived
        d = DECLARED.get(vars(cls).get("name", ""))
        if d is not None and cls.__module__.startswith("statetrack.layers."):  # a built-in: declared there
            if d.options != derived or d.fixed != cls.fixed_options:
                raise TypeError(
                    f"mixer class {cls.__name__}: options {derived} (fixed {cls.fixed_options}) are "
                    f"not those of its declaration {d.options} (fixed {d.fixed}) in "
                    "statetrack.layers.declarations"
                )
            if not vars(cls).get("description"):
                cls.description = d.description

    def __init__(self, d_model: int, d_state: int):
        super().__init__()
        self.d_model, self.d_state = d_model, d_state

    @property
    def properties(self) -> Properties:
        """What the theorems read, from the mixer's declaration (``statetrack.layers.declarations``) and the
        options it was built with (its attributes of the same names); a plugin's mixer declares its own."""
        d = DECLARED.get(self.name)
        if d is None or d.properties is None:
            raise NotImplementedError(f"mixer {self.name!r} declares no properties")
        return d.properties({k: getattr(self, k, v) for k, v in {**d.options, **d.fixed}.items()})

    def init_state(self, batch: int, device: Device = None, dtype: torch.dtype | None = None) -> State:
        """The state before the first token, for ``batch`` sequences (zeros, or the mixer's initial state);
        ``dtype`` None: the parameters' dtype."""
        raise NotImplementedError

    def forward(self, x: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        """Args: x (Tensor): [B, T, d_model]; state: the state before x (None: ``init_state``).
        Returns: y (Tensor): [B, T, d_model], and the state after x."""
        raise NotImplementedError

    def step(self, x: Tensor, state: State) -> tuple[Tensor, State]:
        """Args: x (Tensor): [B, d_model], one token; state: the state before it.
        Returns: y (Tensor): [B, d_model], and the state after it (equal to ``forward``'s on the same inputs)."""
        raise NotImplementedError

    def activation_bytes(self) -> int:
        """Bytes a forward pass without gradients holds per sequence and time step, at most: an estimate
        from the shapes in float32, which evaluation uses to size its chunks (``EvalConfig.memory_mb``).
        The default allows a dozen vectors of width d_model x d_state; mixers that know better say so."""
        return 12 * 4 * self.d_model * max(1, self.d_state)

    def eigenvalues(self, x: Tensor) -> Tensor | None:
        """Eigenvalues of the transition A(x) for inputs x (B, T, d_model) -> (B, T, n) complex.

        By default read from ``transition(x)`` where the mixer has one (:func:`transition_eigenvalues`);
        None for a mixer without it (a non-linear one has no transition matrix).
        """
        return transition_eigenvalues(self, x)


#: what a module provides for ``spectrum`` and the scorecard to read its transition (docs/extending.md)
TRANSITION_PROTOCOL = (
    "transition(x) -> A(x) [B, T, n] (a diagonal) or [B, T, ..., n, n] (matrices), or eigenvalues(x) -> "
    "[B, T, n] complex, for x [B, T, d_model]"
)


def transition_eigenvalues(module: nn.Module, x: Tensor) -> Tensor | None:
    """The eigenvalues of A(x) [B, T, n] (complex) of a module that declares its transition: its own
    ``eigenvalues(x)`` if it is not a Mixer (whose ``eigenvalues`` calls this), else ``transition(x)``: a
    tensor [B, T, n] is a diagonal (its entries are the eigenvalues), [B, T, ..., n, n] matrices (per head:
    their eigenvalues, flattened after T). None when the module has neither (``TRANSITION_PROTOCOL``)."""
    own = getattr(module, "eigenvalues", None)
    if own is not None and not isinstance(module, Mixer):
        return own(x)
    transition = getattr(module, "transition", None)
    if transition is None:
        return None
    a = transition(x)
    if a.dim() <= 3:
        return a.to(torch.complex128 if a.dtype == torch.float64 else torch.complex64)
    return torch.linalg.eigvals(a).flatten(2)


def _init_options(cls: type[Mixer]) -> dict[str, Any]:
    """The keyword arguments of ``cls.__init__`` after (d_model, d_state) with their defaults; through
    ``**kwargs``, the parent's options too; less ``cls.fixed_options``."""
    params = list(inspect.signature(cls.__init__).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:3]
    params = [p for p in params if p not in positional]  # self, d_model, d_state
    out: dict[str, Any] = {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        out.update(next(vars(b)["options"] for b in cls.__mro__[1:] if "options" in vars(b)))
    out.update(
        {
            p.name: p.default
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty
        }
    )
    return {k: v for k, v in out.items() if k not in cls.fixed_options}


def check_conv(mixer: str, conv: int) -> None:
    """The short causal convolution's kernel size: 0 (none) to 64."""
    if conv < 0 or conv > 64:
        raise UserError(f"{mixer} conv={conv} not in 0..64 (0 = no convolution)")


def check_heads(mixer: str, heads: int, width: int, what: str = "d_model") -> None:
    """The number of heads: at least one, and a divisor of the width it splits (``what`` names it)."""
    if heads < 1 or width % heads:
        raise UserError(f"{mixer} heads={heads} must be >= 1 and divide {what}={width}")


def check_expand(mixer: str, expand: int) -> None:
    """The expansion of the inner width: 1 to 16."""
    if not 1 <= expand <= 16:
        raise UserError(f"{mixer} expand={expand} not in 1..16")


def log_uniform_dt(mixer: str, n: int, dt_min: float, dt_max: float) -> Tensor:
    """log Delta drawn uniformly in [log dt_min, log dt_max] (the S4D / Mamba init); checks the range."""
    if not 0 < dt_min <= dt_max:
        raise UserError(f"{mixer} needs 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
    return torch.rand(n) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)


def dt_bias_init(mixer: str, n: int, dt_min: float, dt_max: float) -> Tensor:
    """n biases whose softplus is log-uniform in [dt_min, dt_max] (Mamba's dt init)."""
    dt = torch.exp(log_uniform_dt(mixer, n, dt_min, dt_max))
    return dt + torch.log(-torch.expm1(-dt))  # inverse softplus


def init_dt_bias(mixer: str, proj: nn.Linear, dt_min: float, dt_max: float) -> None:
    """Set proj's bias so that softplus(bias) is log-uniform in [dt_min, dt_max] (Mamba's dt init)."""
    with torch.no_grad():
        proj.bias.copy_(dt_bias_init(mixer, proj.bias.shape[0], dt_min, dt_max))


def causal_conv_step(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """One step of a depthwise causal conv. x (B, C), buf (B, C, K-1) holds the previous inputs."""
    window = torch.cat([buf, x.unsqueeze(-1)], dim=-1)  # (B, C, K)
    y = (window * conv.weight.squeeze(1)).sum(-1)
    if conv.bias is not None:
        y = y + conv.bias
    return y, window[..., 1:]


class MambaInput:
    """Mamba's input branch, shared by the selective mixers built on its block (``mamba``, ``negmamba``,
    ``aussm``, ``saussm``, ``dcd``): x -> in_proj -> (u, z); u -> optional depthwise causal conv
    (kernel ``conv``, 0 = none) -> silu. The gate z is returned as it is (the mixer applies silu(z)).

    Attributes set by :meth:`_init_input`: ``in_proj`` (d_model -> 2 d_inner, no bias), ``conv``
    (``nn.Conv1d`` or None), ``k`` (the kernel size), ``d_inner``.
    """

    name: ClassVar[str]
    d_inner: int
    k: int
    in_proj: nn.Linear
    conv: nn.Conv1d | None

    def _init_input(self, d_model: int, d_inner: int, conv: int) -> None:
        self.k, self.d_inner = conv, d_inner
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv = nn.Conv1d(d_inner, d_inner, conv, groups=d_inner) if conv > 0 else None

    def _conv_state(self, batch: int, device: Device = None, dtype: torch.dtype | None = None) -> Tensor:
        """The conv's history, zeros: (batch, d_inner, k - 1)."""
        return torch.zeros(batch, self.d_inner, max(self.k - 1, 0), device=device, dtype=dtype)

    def _pre(self, x: Tensor, buf: Tensor, chunk: bool) -> tuple[Tensor, Tensor, Tensor]:
        """Args: x (Tensor): [B, T, d_model] (``chunk``) or [B, d_model] (one step); buf (Tensor): [B, d_inner,
        k - 1] the conv's history. Returns (u, z, buf): u, z [..., d_inner] and the history after x."""
        u, z, buf = self._pre_linear(x, buf, chunk)
        return F.silu(u), z, buf

    def _pre_linear(self, x: Tensor, buf: Tensor, chunk: bool) -> tuple[Tensor, Tensor, Tensor]:
        """``_pre`` before its silu: u is the conv's output (or in_proj's without a conv), linear in x."""
        u, z = self.in_proj(x).chunk(2, dim=-1)
        if self.conv is not None:
            u, buf = (causal_conv if chunk else causal_conv_step)(self.conv, u, buf)
        return u, z, buf


class DeltaInput:
    """The q, k, v branch of the delta rules (DeltaNet, DeltaProduct, Gated DeltaNet, Gated DeltaProduct,
    KDA), as flash-linear-attention's layers build it: one linear map of x_t to q and n_h keys and values
    for ``heads`` heads (key dim d_state, value dim d_model / heads), an optional short depthwise causal
    conv (kernel ``conv``, 0 = none) and silu, q and every k L2-normalised per head.

    :meth:`_init_qkv` checks the options and makes the projection ``qkv``; :meth:`_init_conv` the conv
    ``conv`` (a mixer may make its own projections between the two: parameters are drawn in the order
    they are made). Attributes: ``H``, ``dk``, ``dv``, ``k`` (the conv's kernel), ``chunk``, ``neg``,
    ``nh`` (None: one key and value per token; an int: n_h of them, DeltaProduct's), ``sizes`` (the
    widths of q, the keys, the values), ``qkv``, ``conv``. State: (S [B, H, d_k, d_v], the conv's
    history [B, sum(sizes), k - 1]).
    """

    name: ClassVar[str]
    H: int
    dk: int
    dv: int
    k: int
    chunk: int
    neg: bool
    nh: int | None = None
    sizes: list[int]
    qkv: nn.Linear
    conv: nn.Conv1d | None

    def _init_qkv(
        self, d_model: int, d_state: int, heads: int, neg: bool, conv: int, chunk: int, nh: int | None = None
    ) -> None:
        check_heads(self.name, heads, d_model)
        check_conv(self.name, conv)
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        if nh is not None:
            self.nh = nh
        self.H, self.neg, self.k, self.chunk = heads, bool(neg), conv, chunk
        self.dk, self.dv = d_state, d_model // heads
        n = nh or 1
        self.sizes = [heads * self.dk, n * heads * self.dk, n * heads * self.dv]
        self.qkv = nn.Linear(d_model, sum(self.sizes), bias=False)

    def _init_conv(self) -> None:
        width = sum(self.sizes)
        self.conv = nn.Conv1d(width, width, self.k, groups=width) if self.k > 0 else None

    def init_state(
        self, batch: int, device: Device = None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, Tensor]:
        """(S [batch, H, d_k, d_v], the conv's history [batch, sum(sizes), k - 1]), zeros."""
        dtype = dtype or self.qkv.weight.dtype
        S = torch.zeros(batch, self.H, self.dk, self.dv, device=device, dtype=dtype)
        buf = torch.zeros(batch, sum(self.sizes), max(self.k - 1, 0), device=device, dtype=dtype)
        return (S, buf)

    def _qkv(self, x: Tensor, buf: Tensor, chunk: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Args: x (Tensor): [B, T, d_model] (``chunk``) or [B, d_model] (one step); buf (Tensor): the conv's
        history. Returns (q, k, v, buf): q [..., H, d_k]; k [..., H, d_k] and v [..., H, d_v] (with ``nh``:
        [..., n_h, H, d_k] and [..., n_h, H, d_v]); the history after x."""
        qkv = self.qkv(x)
        if self.conv is not None:
            qkv, buf = (causal_conv if chunk else causal_conv_step)(self.conv, qkv, buf)
        q, k, v = F.silu(qkv).split(self.sizes, dim=-1)
        lead = (self.H,) if self.nh is None else (self.nh, self.H)
        q = F.normalize(q.unflatten(-1, (self.H, self.dk)), dim=-1)
        k = F.normalize(k.unflatten(-1, (*lead, self.dk)), dim=-1)
        return q, k, v.unflatten(-1, (*lead, self.dv)), buf
