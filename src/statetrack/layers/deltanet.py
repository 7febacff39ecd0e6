"""DeltaNet (Yang2024) and DeltaProduct (Siems2025): Householder-product transitions.

Per head h (``heads`` of them), key dim d_k = d_state, value dim d_v = d_model / heads, matrix state
S (d_k, d_v). Per token, n_h sub-steps j = 1..n_h (DeltaNet: n_h = 1):

    S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T        o_t = S_t^T q_t (after the n_h-th sub-step)

so A(x_t) = prod_j (I - beta_j k_j k_j^T). Each factor's eigenvalues are real (1 and 1 - beta_j), but
the product's are complex for n_h >= 2 with neg=true (two reflections make a rotation: this is how
DeltaProduct reaches S_3) and for n_h >= 3: the declared domain is then "complex disc". q, k, v are linear
maps of x_t, passed (as in the flash-linear-attention layers) through an optional short depthwise causal
conv (``conv``, kernel 4 by default, 0 = none) and silu; q and every k_j are L2-normalised per head.
beta_j = sigmoid(w_j^T x_t) in [0, 1]; with ``neg=true`` beta_j = 2 sigmoid(w_j^T x_t) in [0, 2], so the
eigenvalue 1 - beta_j of each factor lies in [-1, 1] (Grazzi2024); the same beta scales the write term.
The head outputs go through a per-head RMSNorm (eps 1e-5, flash-linear-attention's default) and an output
projection to d_model.

Training uses the chunked WY/UT form (``chunk`` steps of the delta rule per chunk, so n_h per token
for DeltaProduct; 0 = the step loop); ``step`` uses the recurrent form. State: (S (B, heads, d_k, d_v), conv buffer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from statetrack.errors import UserError
from statetrack.layers.base import (
    Mixer,
    causal_conv_step,
    check_conv,
    check_heads,
)
from statetrack.ops import causal_conv, delta_rule, delta_step, householder_product, interleave
from statetrack.ops.householder import CHUNK


class DeltaProduct(Mixer):
    name = "deltaproduct"

    def __init__(self, d_model, d_state, nh=2, heads=1, neg=False, conv=4, chunk=CHUNK):
        super().__init__(d_model, d_state)
        if not 1 <= nh <= 16:
            raise UserError(f"{self.name} nh={nh} not in 1..16")
        check_heads(self.name, heads, d_model)
        check_conv(self.name, conv)
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        self.nh, self.H, self.neg, self.k, self.chunk = nh, heads, bool(neg), conv, chunk
        self.dk, self.dv = d_state, d_model // heads
        H, dk, dv = heads, self.dk, self.dv
        self.sizes = [H * dk, nh * H * dk, nh * H * dv]
        self.qkv = nn.Linear(d_model, sum(self.sizes), bias=False)
        self.b_proj = nn.Linear(d_model, nh * H, bias=False)
        self.conv = (
            nn.Conv1d(sum(self.sizes), sum(self.sizes), conv, groups=sum(self.sizes)) if conv > 0 else None
        )
        self.o_norm = nn.RMSNorm(dv, eps=1e-5)  # flash-linear-attention's norm_eps
        self.o_proj = nn.Linear(H * dv, d_model, bias=False)

    def activation_bytes(self):
        # per delta-rule step (n_h per token): q, k, v and the chunk's W, U_v, U, o (d_k or d_v each), the
        # chunk's C x C matrices (K K^T, its inverse, Q K^T) per row, and the state entering the chunk
        C = max(1, self.chunk)
        per_step = 3 * C + 4 * (self.dk + self.dv) + self.dk * self.dv // C
        return 4 * (self.nh * self.H * per_step + 2 * sum(self.sizes) + 4 * self.d_model)

    def init_state(self, batch, device=None, dtype=None):
        dtype = dtype or self.qkv.weight.dtype
        S = torch.zeros(batch, self.H, self.dk, self.dv, device=device, dtype=dtype)
        buf = torch.zeros(batch, sum(self.sizes), max(self.k - 1, 0), device=device, dtype=dtype)
        return (S, buf)

    def _qkvb(self, x, buf, chunk: bool):
        """x (..., d_model) -> q (..., H, dk), k (..., nh, H, dk), v (..., nh, H, dv), beta (..., nh, H), buf."""
        qkv = self.qkv(x)
        if self.conv is not None:
            qkv, buf = (causal_conv if chunk else causal_conv_step)(self.conv, qkv, buf)
        q, k, v = F.silu(qkv).split(self.sizes, dim=-1)
        H, nh = self.H, self.nh
        q = F.normalize(q.unflatten(-1, (H, self.dk)), dim=-1)
        k = F.normalize(k.unflatten(-1, (nh, H, self.dk)), dim=-1)
        v = v.unflatten(-1, (nh, H, self.dv))
        beta = torch.sigmoid(self.b_proj(x)).unflatten(-1, (nh, H))
        if self.neg:
            beta = 2 * beta
        return q, k, v, beta, buf

    def _out(self, o):
        return self.o_proj(self.o_norm(o).flatten(-2))

    def forward(self, x, state=None):
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, buf = state
        q, k, v, beta, buf = self._qkvb(x, buf, chunk=True)
        if self.nh == 1:
            o, S = delta_rule(q, k[:, :, 0], v[:, :, 0], beta[:, :, 0], S, self.chunk, self.neg)
        else:
            o, S = delta_rule(*interleave(q, k, v, beta), S, self.chunk, self.neg)
            o = o[:, self.nh - 1 :: self.nh]
        return self._out(o), (S, buf)

    def step(self, x, state):
        S, buf = state
        q, k, v, beta, buf = self._qkvb(x, buf, chunk=False)
        for j in range(self.nh):
            o, S = delta_step(q, k[:, j], v[:, j], beta[:, j], S)
        return self._out(o), (S, buf)

    def transition(self, x):
        """A(x_t) per token and head, conv history from zeros: (B, T, H, d_k, d_k)."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, _ = self._qkvb(x, buf, chunk=True)
        # (B, T, nh, H, .) -> (B, T, H, nh, .)
        return householder_product(k.transpose(2, 3), beta.transpose(2, 3))

    def eigenvalues(self, x):
        """Eigenvalues of the actual matrix product A(x_t): (B, T, H * d_k) complex."""
        return torch.linalg.eigvals(self.transition(x)).flatten(-2)


class DeltaNet(DeltaProduct):
    name = "deltanet"
    fixed_options = {"nh": 1}

    def __init__(self, d_model, d_state, **kw):
        super().__init__(d_model, d_state, **kw, **self.fixed_options)
