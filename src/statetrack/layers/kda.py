"""Kimi Delta Attention (KDA; Kimi Linear, arXiv 2510.26692; flash-linear-attention's ``KimiDeltaAttention``):
Gated DeltaNet with a per-channel (diagonal) decay gate.

Per head h (``heads``), key dim d_k = d_state, value dim d_v = d_model / heads, state S (d_k, d_v)::

    S_t = (I - beta_t k_t k_t^T) diag(alpha_t) S_{t-1} + beta_t k_t v_t^T          o_t = S_t^T q_t

q, k, v are linear maps of x_t through an optional short depthwise causal conv (``conv``) and silu, q and k
L2-normalised per head (no further query scale, as the other delta rules here); beta_t = sigmoid(w_b^T x_t)
in [0, 1] (``neg=true``: 2 sigmoid, in [0, 2], fla's ``allow_neg_eigval``); the gate per key channel is
alpha_t = exp(-exp(A_log_h) softplus(f(x_t) + dt_bias)) in (0, 1] with f a rank-d_v map (d_model -> d_v ->
heads d_k), A drawn in [1, 16] per head and dt_bias per channel (Mamba's dt init), as in fla's layer. The
head outputs go through a per-head RMSNorm gated by sigmoid(g(x_t)), g a rank-d_v map with a bias, then
the output projection.

A(x) = (I - beta k k^T) diag(alpha) is similar to diag(alpha)^1/2 (I - beta k k^T) diag(alpha)^1/2, a
symmetric matrix: its eigenvalues are real, in [0, 1] for beta in [0, 1] and in [-1, 1] with ``neg=true``
(-1 only where alpha and beta round to their limits). Recurrence: ``ops.kda.rule.kda_rule`` (its own sub-chunked
form ``ops.kda.chunk``; fla's kernels on CUDA). State: (S (B, heads, d_k, d_v), conv buffer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.layers.base import DeltaInput, Mixer, dt_bias_init
from statetrack.layers.gateddeltanet import gated_output
from statetrack.ops.dplr.reference import dplr_step, dplr_transition
from statetrack.ops.kda.reference import kda_terms
from statetrack.ops.kda.rule import kda_rule

#: steps per chunk of the chunked form (``ops.kda.chunk``, sub-chunks of 8 steps)
CHUNK = 16


class KDA(DeltaInput, Mixer):
    """Kimi Delta Attention: A(x) = (I - beta k k^T) diag(alpha), a decay gate alpha per key channel.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model]; the value dim is d_model / heads.
        d_state (int): the key dim d_k of each head (the state is [heads, d_k, d_model / heads]).
        heads (int): the number of heads, a divisor of d_model; default 1.
        neg (bool): beta = 2 sigmoid(.) in [0, 2] (fla's ``allow_neg_eigval``), so that the eigenvalues reach
            -1; default False: beta = sigmoid(.) in [0, 1].
        conv (int): the kernel of the short depthwise causal conv over q, k, v, 0 to 64; default 4, 0 = none.
        chunk (int): steps per chunk of the chunked training form; default 16, 0 = the step loop.
    """

    name = "kda"

    def __init__(
        self, d_model: int, d_state: int, heads: int = 1, neg: bool = False, conv: int = 4, chunk: int = CHUNK
    ) -> None:
        super().__init__(d_model, d_state)
        self._init_qkv(d_model, d_state, heads, neg, conv, chunk)
        self._init_conv()
        H, dk, dv = heads, self.dk, self.dv
        self.b_proj = nn.Linear(d_model, H, bias=False)
        self.f_proj = nn.Sequential(nn.Linear(d_model, dv, bias=False), nn.Linear(dv, H * dk, bias=False))
        self.A_log = nn.Parameter(torch.log(torch.empty(H).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(dt_bias_init(self.name, H * dk, 1e-3, 1e-1))
        self.g_proj = nn.Sequential(nn.Linear(d_model, dv, bias=False), nn.Linear(dv, H * dv))
        self.o_norm = nn.RMSNorm(dv, eps=1e-5)
        self.o_proj = nn.Linear(H * dv, d_model, bias=False)

    def activation_bytes(self) -> int:
        C = max(1, self.chunk)
        per_step = 6 * C * self.dk + 6 * self.dk + 3 * self.dv + self.dk * (self.dk + self.dv) // C
        return 4 * (self.H * per_step + 2 * sum(self.sizes) + 6 * self.d_model)

    def _terms(
        self, x: Tensor, buf: Tensor, chunk: bool
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x [..., d_model] -> q, k, log_w [..., H, d_k], v [..., H, d_v], beta [..., H], buf."""
        q, k, v, buf = self._qkv(x, buf, chunk)
        beta = torch.sigmoid(self.b_proj(x)) * (2.0 if self.neg else 1.0)
        f = (self.f_proj(x) + self.dt_bias).unflatten(-1, (self.H, self.dk))
        log_w = -torch.exp(self.A_log).unsqueeze(-1) * F.softplus(f)
        return q, k, v, beta, log_w, buf

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (S [B, H, d_k, d_v], the conv's history
        [B, sum(sizes), conv - 1]), None: zeros. Returns: y (Tensor): [B, T, d_model], the state after x."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, buf = state
        q, k, v, beta, log_w, buf = self._terms(x, buf, chunk=True)
        o, S = kda_rule(q, k, v, beta, log_w, S, self.chunk, self.neg)
        return gated_output(self, o, x, torch.sigmoid), (S, buf)

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: as ``forward``'s. Returns: y (Tensor):
        [B, d_model], the state after x."""
        S, buf = state
        q, k, v, beta, log_w, buf = self._terms(x, buf, chunk=False)
        bk, a, b = kda_terms(k, beta, log_w)
        o, S = dplr_step(q, bk, v, a, b, log_w, S)
        return gated_output(self, o, x, torch.sigmoid), (S, buf)

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token and head, conv history from zeros: x [B, T, d_model] -> [B, T, H, d_k, d_k]."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, log_w, _ = self._terms(x, buf, chunk=True)
        _, a, b = kda_terms(k, beta, log_w)
        return dplr_transition(a, b, log_w, self.dk)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of A(x_t): x [B, T, d_model] -> [B, T, H * d_k] complex with zero imaginary parts,
        from the similar symmetric matrix diag(alpha)^1/2 (I - beta k k^T) diag(alpha)^1/2."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, log_w, _ = self._terms(x, buf, chunk=True)
        s = torch.exp(log_w / 2)
        u = s * k
        sym = torch.diag_embed(s * s) - beta[..., None, None] * u.unsqueeze(-1) * u.unsqueeze(-2)
        ev = torch.linalg.eigvalsh(sym).flatten(-2)
        return ev.to(ev.dtype.to_complex())
