"""Gated linear attention (Yang2023, GLA): a data-dependent diagonal decay per key channel.

Per head h (``heads``), key dim d_k = d_state, value dim d_v = d_model / heads, state S (d_k, d_v)::

    S_t = diag(w_t) S_{t-1} + k_t v_t^T          o_t = S_t^T q_t / sqrt(d_k)

with q, k, v linear maps of x_t and the gate log w_t = logsigmoid(W_2 W_1 x_t + b) / 16 (a rank-16
map and the paper's gate normaliser 16), so w in (0, 1). The head outputs go through a per-head
RMSNorm gated by silu(W_g x_t), then the output projection (the reference layer's defaults; no short
convolution). Recurrence: ``ops.gla.rule.gla_rule`` (its own sub-chunked form ``ops.gla.chunk``; fla's kernels on
CUDA).
State: S (B, heads, d_k, d_v).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer, check_heads
from statetrack.ops.dplr.reference import dplr_step
from statetrack.ops.gla.rule import gla_rule

GATE_RANK = 16
GATE_NORMALISER = 16.0


#: steps per chunk of the chunked form (``ops.gla.chunk``, sub-chunks of 8 steps)
CHUNK = 16


class GLA(Mixer):
    """Gated linear attention: a data-dependent diagonal decay per key channel, a gated RMSNorm output.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            d_k, the key dimension per head.
        heads (int):
            H, the number of heads; it must divide d_model, and d_v = d_model / H. Default: 1.
        chunk (int):
            Steps per chunk of the chunked training form (>= 0); 0 or 1: the step loop. Default: 16.

    The state is S [B, H, d_k, d_v].
    """

    name = "gla"

    def __init__(self, d_model: int, d_state: int, heads: int = 1, chunk: int = CHUNK) -> None:
        super().__init__(d_model, d_state)
        check_heads(self.name, heads, d_model)
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        self.H, self.chunk = heads, chunk
        self.dk, self.dv = d_state, d_model // heads
        K, V = heads * self.dk, heads * self.dv
        self.sizes = [K, K, V, V]  # q, k, v, output gate
        self.proj = nn.Linear(d_model, sum(self.sizes), bias=False)
        self.gk = nn.Sequential(nn.Linear(d_model, GATE_RANK, bias=False), nn.Linear(GATE_RANK, K))
        self.o_norm = nn.RMSNorm(self.dv, eps=1e-5)
        self.o_proj = nn.Linear(V, d_model, bias=False)

    def activation_bytes(self) -> int:
        C = max(1, self.chunk)
        per_step = 3 * C * self.dk + 4 * self.dk + 3 * self.dv + self.dk * self.dv // C
        return 4 * (self.H * per_step + 2 * sum(self.sizes) + 4 * self.d_model)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Zeros: S [batch, H, d_k, d_v]."""
        dtype = dtype or self.proj.weight.dtype
        return torch.zeros(batch, self.H, self.dk, self.dv, device=device, dtype=dtype)

    def _terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x (..., D) -> q, k, log w (..., H, d_k), v and the output gate (..., H, d_v)."""
        q, k, v, g = self.proj(x).split(self.sizes, dim=-1)
        H, dk, dv = self.H, self.dk, self.dv
        log_w = (F.logsigmoid(self.gk(x)) / GATE_NORMALISER).unflatten(-1, (H, dk))
        q = q.unflatten(-1, (H, dk)) * dk**-0.5
        return q, k.unflatten(-1, (H, dk)), v.unflatten(-1, (H, dv)), log_w, g.unflatten(-1, (H, dv))

    def _out(self, o: Tensor, g: Tensor) -> Tensor:
        """The read-out o and the gate g (..., H, d_v) -> the output (..., D)."""
        return self.o_proj((self.o_norm(o) * F.silu(g)).flatten(-2))

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The training path: the chunked rule over the sequence (``ops.gla.rule.gla_rule``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (Tensor, optional): S [B, H, d_k, d_v] before x; None: zeros.

        Returns:
            (Tensor, Tensor): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        q, k, v, log_w, g = self._terms(x)
        o, S = gla_rule(q, k, v, log_w, state, self.chunk)
        return self._out(o, g), S

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (Tensor): S [B, H, d_k, d_v].

        Returns:
            (Tensor, Tensor): the output [B, D] and the state after x.
        """
        q, k, v, log_w, g = self._terms(x)
        o, S = dplr_step(q, k, v, None, None, log_w, state)
        return self._out(o, g), S

    def eigenvalues(self, x: Tensor) -> Tensor:
        """w_t per key channel (the transition is diagonal) for the inputs x [B, T, D]: [B, T, H * d_k]
        complex."""
        w = torch.exp(self._terms(x)[3]).flatten(-2)
        return w.to(w.dtype.to_complex())
