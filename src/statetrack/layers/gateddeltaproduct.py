"""Gated DeltaProduct (Siems2025; flash-linear-attention's ``GatedDeltaProduct``): DeltaProduct's n_h
Householder steps per token times Gated DeltaNet's decay gate.

Per head h (``heads``), key dim d_k = d_state, value dim d_v = d_model / heads, state S (d_k, d_v). Per
token, the gate, then n_h sub-steps j = 1..n_h::

    S <- alpha_t S;    S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T;    o_t = S^T q_t (after the last)

so A(x_t) = alpha_t prod_j (I - beta_j k_j k_j^T). q, k_1..k_n_h, v_1..v_n_h are linear maps of x_t through
an optional short depthwise causal conv (``conv``) and silu, q and every k_j L2-normalised per head (no
further query scale, as DeltaNet here); beta_j = sigmoid(w_j^T x_t) in [0, 1] (``neg=true``: 2 sigmoid, in
[0, 2], each factor's eigenvalue 1 - beta_j in [-1, 1]); the gate is Gated DeltaNet's (Mamba-2's):
alpha_t = exp(-exp(A_log) softplus(w_a^T x_t + dt_bias)) in (0, 1]. The head outputs go through a per-head
RMSNorm gated by silu(W_g x_t), then the output projection (fla's layer with its output gate on).

fla's layer defaults to n_h = 2 and negative eigenvalues on; here, as for every mixer of this package,
the default is the [0, 1] form (``neg=false``) and ``neg=true`` is the switch. As DeltaProduct: the
product's eigenvalues are complex for n_h >= 2 with ``neg=true`` (two reflections make a rotation) and for
n_h >= 3; modulus <= 1. Recurrence: ``ops.gated_delta.rule.gated_delta_product`` (fla's kernels on CUDA). State:
(S (B, heads, d_k, d_v), conv buffer).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.layers.deltanet import DeltaProduct
from statetrack.layers.gateddeltanet import decay_gate_init, gated_output
from statetrack.ops import delta_step, householder_product
from statetrack.ops.gated_delta.rule import gated_delta_product


class GatedDeltaProduct(DeltaProduct):
    """Gated DeltaProduct: A(x) = alpha(x) prod_j (I - beta_j k_j k_j^T), n_h steps per token, a decay gate per head.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model]; the value dim is d_model / heads.
        d_state (int): the key dim d_k of each head (the state is [heads, d_k, d_model / heads]).
        nh (int): Householder steps per token, 1 to 16 (n_h); default 2.
        heads (int): the number of heads, a divisor of d_model; default 1.
        neg (bool): beta = 2 sigmoid(.) in [0, 2], so that each factor's eigenvalue 1 - beta reaches -1;
            default False: beta = sigmoid(.) in [0, 1].
        conv (int): the kernel of the short depthwise causal conv over q, k, v, 0 to 64; default 4, 0 = none.
        chunk (int): delta-rule steps per chunk of the chunked training form; default 16, 0 = the step loop.
    """

    name = "gateddeltaproduct"

    def __init__(self, d_model: int, d_state: int, **kw: Any) -> None:
        """DeltaProduct's options (nh, heads, neg, conv, chunk), passed on."""
        super().__init__(d_model, d_state, **kw)
        H = self.H
        self.a_proj = nn.Linear(d_model, H, bias=False)
        self.A_log, self.dt_bias = decay_gate_init(self.name, H)
        self.g_proj = nn.Linear(d_model, H * self.dv, bias=False)

    def _gate(self, x: Tensor) -> Tensor:
        """The log-gate g [..., H] <= 0 for x [..., d_model]."""
        return -torch.exp(self.A_log) * F.softplus(self.a_proj(x) + self.dt_bias)

    def _gated_out(self, o: Tensor, x: Tensor) -> Tensor:
        return gated_output(self, o, x, F.silu)

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (S [B, H, d_k, d_v], the conv's history
        [B, sum(sizes), conv - 1]), None: zeros. Returns: y (Tensor): [B, T, d_model], the state after x."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, buf = state
        q, k, v, beta, buf = self._qkvb(x, buf, chunk=True)
        o, S = gated_delta_product(q, k, v, beta, self._gate(x), S, self.chunk, self.neg)
        return self._gated_out(o, x), (S, buf)

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: as ``forward``'s. Returns: y (Tensor):
        [B, d_model], the state after x (the gate, then the n_h steps)."""
        S, buf = state
        q, k, v, beta, buf = self._qkvb(x, buf, chunk=False)
        S = torch.exp(self._gate(x))[..., None, None] * S
        for j in range(self.nh):
            o, S = delta_step(q, k[:, j], v[:, j], beta[:, j], S)
        return self._gated_out(o, x), (S, buf)

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token and head, conv history from zeros: x [B, T, d_model] -> [B, T, H, d_k, d_k]."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, _ = self._qkvb(x, buf, chunk=True)
        alpha = torch.exp(self._gate(x))[..., None, None]
        return alpha * householder_product(k.transpose(2, 3), beta.transpose(2, 3))
