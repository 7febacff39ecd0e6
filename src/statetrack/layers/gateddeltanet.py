"""Gated DeltaNet (Yang2025): the delta rule times a decay gate, A(x_t) = alpha_t (I - beta_t k_t k_t^T).

Per head h (``heads`` of them), key dim d_k = d_state, value dim d_v = d_model / heads, state S (d_k, d_v)::

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T          o_t = S_t^T q_t

q, k, v are linear maps of x_t through an optional short depthwise causal conv (``conv``, kernel 4) and
silu, q and k L2-normalised per head (as DeltaNet here: no further query scale); beta_t =
sigmoid(w_b^T x_t) in [0, 1] (``neg=true``: 2 sigmoid, in [0, 2], so that the factor's eigenvalue
alpha (1 - beta) reaches -1: the extension of Grazzi2024); the gate is Mamba-2's,
alpha_t = exp(g_t), g_t = -exp(A_log) softplus(w_a^T x_t + dt_bias) (A drawn in [0, 16], dt_bias
Mamba's dt init), so alpha in (0, 1] (1 exactly once g rounds to 0). The head outputs go through a
per-head RMSNorm gated by silu(W_g x_t), then the output projection.

Recurrence: ``ops.gated_delta.rule.gated_delta_rule`` (the chunked diagonal-plus-low-rank form; fla's kernels on
CUDA). State: (S (B, heads, d_k, d_v), conv buffer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.layers.base import DeltaInput, Mixer, dt_bias_init
from statetrack.ops.dplr.chunk import CHUNK
from statetrack.ops.dplr.reference import dplr_step, dplr_transition
from statetrack.ops.gated_delta.reference import gated_delta_terms
from statetrack.ops.gated_delta.rule import gated_delta_rule


def decay_gate_init(mixer: str, n: int) -> tuple[nn.Parameter, nn.Parameter]:
    """Mamba-2's decay gate for n heads (or channels): (A_log with A drawn in [0, 16], dt_bias with softplus(dt_bias)
    log-uniform in [1e-3, 1e-1]); the gate is alpha = exp(-exp(A_log) softplus(w^T x + dt_bias))."""
    return (
        nn.Parameter(torch.log(torch.empty(n).uniform_(0, 16))),
        nn.Parameter(dt_bias_init(mixer, n, 1e-3, 1e-1)),
    )


class GatedHeads(Protocol):
    """A mixer whose head outputs are normalised and gated (:func:`gated_output`)."""

    @property
    def H(self) -> int: ...
    @property
    def dv(self) -> int: ...
    @property
    def g_proj(self) -> nn.Module: ...
    @property
    def o_norm(self) -> nn.Module: ...
    @property
    def o_proj(self) -> nn.Module: ...


def gated_output(mixer: GatedHeads, o: Tensor, x: Tensor, act: Callable[[Tensor], Tensor]) -> Tensor:
    """The head outputs o [..., H, d_v] through the per-head RMSNorm ``mixer.o_norm``, times act(``mixer.g_proj``(x)),
    then ``mixer.o_proj``: the output of Gated DeltaNet (act silu), Gated DeltaProduct (silu) and KDA (sigmoid);
    x [..., d_model] -> [..., d_model]."""
    gate = act(mixer.g_proj(x)).unflatten(-1, (mixer.H, mixer.dv))
    return mixer.o_proj((mixer.o_norm(o) * gate).flatten(-2))


class GatedDeltaNet(DeltaInput, Mixer):
    """Gated DeltaNet: S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, a decay gate alpha per head.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model]; the value dim is d_model / heads.
        d_state (int): the key dim d_k of each head (the state is [heads, d_k, d_model / heads]).
        heads (int): the number of heads, a divisor of d_model; default 1.
        neg (bool): beta = 2 sigmoid(.) in [0, 2], so that the factor's eigenvalue alpha (1 - beta) reaches -1;
            default False: beta = sigmoid(.) in [0, 1].
        conv (int): the kernel of the short depthwise causal conv over q, k, v, 0 to 64; default 4, 0 = none.
        chunk (int): steps per chunk of the chunked training form; default 16, 0 = the step loop.
    """

    name = "gateddeltanet"

    def __init__(
        self, d_model: int, d_state: int, heads: int = 1, neg: bool = False, conv: int = 4, chunk: int = CHUNK
    ) -> None:
        super().__init__(d_model, d_state)
        self._init_qkv(d_model, d_state, heads, neg, conv, chunk)
        self._init_conv()
        H = heads
        self.ab_proj = nn.Linear(d_model, 2 * H, bias=False)  # beta and the gate's Delta
        self.A_log, self.dt_bias = decay_gate_init(self.name, H)
        self.g_proj = nn.Linear(d_model, H * self.dv, bias=False)
        self.o_norm = nn.RMSNorm(self.dv, eps=1e-5)
        self.o_proj = nn.Linear(H * self.dv, d_model, bias=False)

    def activation_bytes(self) -> int:
        C = max(1, self.chunk)
        per_step = 4 * C + 4 * (self.dk + self.dv) + self.dk * self.dv // C
        return 4 * (self.H * per_step + 2 * sum(self.sizes) + 4 * self.d_model)

    def _terms(
        self, x: Tensor, buf: Tensor, chunk: bool
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x [..., d_model] -> q, k [..., H, d_k], v [..., H, d_v], beta, g (the log-gate) [..., H], buf."""
        q, k, v, buf = self._qkv(x, buf, chunk)
        H = self.H
        b, a = self.ab_proj(x).split([H, H], dim=-1)
        beta = torch.sigmoid(b) * (2.0 if self.neg else 1.0)
        g = -torch.exp(self.A_log) * F.softplus(a + self.dt_bias)
        return q, k, v, beta, g, buf

    def _out(self, o: Tensor, x: Tensor) -> Tensor:
        return gated_output(self, o, x, F.silu)

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (S [B, H, d_k, d_v], the conv's history
        [B, sum(sizes), conv - 1]), None: zeros. Returns: y (Tensor): [B, T, d_model], the state after x."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, buf = state
        q, k, v, beta, g, buf = self._terms(x, buf, chunk=True)
        o, S = gated_delta_rule(q, k, v, beta, g, S, self.chunk, self.neg)
        return self._out(o, x), (S, buf)

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: as ``forward``'s. Returns: y (Tensor):
        [B, d_model], the state after x."""
        S, buf = state
        q, k, v, beta, g, buf = self._terms(x, buf, chunk=False)
        bk, a, b, log_w = gated_delta_terms(k.unsqueeze(1), beta.unsqueeze(1), g.unsqueeze(1))
        o, S = dplr_step(q, bk[:, 0], v, a[:, 0], b[:, 0], log_w[:, 0], S)
        return self._out(o, x), (S, buf)

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token and head, conv history from zeros: x [B, T, d_model] -> [B, T, H, d_k, d_k]."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, g, _ = self._terms(x, buf, chunk=True)
        _, a, b, log_w = gated_delta_terms(k, beta, g)
        return dplr_transition(a, b, log_w, self.dk)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of A(x_t) (each acts on every value column of the state): x [B, T, d_model] ->
        [B, T, H * d_k] complex."""
        return torch.linalg.eigvals(self.transition(x)).flatten(-2)
