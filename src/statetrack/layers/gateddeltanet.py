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

Recurrence: ``ops.dplr.gated_delta_rule`` (the chunked diagonal-plus-low-rank form; fla's kernels on
CUDA). State: (S (B, heads, d_k, d_v), conv buffer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer, causal_conv_step, check_conv, check_heads, dt_bias_init
from statetrack.ops import causal_conv
from statetrack.ops.dplr import CHUNK, dplr_step, dplr_transition, gated_delta_rule, gated_delta_terms


def decay_gate_init(mixer: str, n: int) -> tuple[nn.Parameter, nn.Parameter]:
    """Mamba-2's decay gate for n heads (or channels): (A_log with A drawn in [0, 16], dt_bias with softplus(dt_bias)
    log-uniform in [1e-3, 1e-1]); the gate is alpha = exp(-exp(A_log) softplus(w^T x + dt_bias))."""
    return (
        nn.Parameter(torch.log(torch.empty(n).uniform_(0, 16))),
        nn.Parameter(dt_bias_init(mixer, n, 1e-3, 1e-1)),
    )


def gated_output(mixer, o: Tensor, x: Tensor, act) -> Tensor:
    """The head outputs o (..., H, d_v) through the per-head RMSNorm ``mixer.o_norm``, times act(``mixer.g_proj``(x)),
    then ``mixer.o_proj``: the output of Gated DeltaNet (act silu), Gated DeltaProduct (silu) and KDA (sigmoid)."""
    gate = act(mixer.g_proj(x)).unflatten(-1, (mixer.H, mixer.dv))
    return mixer.o_proj((mixer.o_norm(o) * gate).flatten(-2))


class DeltaInput:
    """The q, k, v branch of Gated DeltaNet and KDA: one linear map of x_t to (q, k, v) for ``heads`` heads (key dim
    d_state, value dim d_model / heads), an optional short depthwise causal conv (``conv``) and silu, q and k
    L2-normalised per head. Attributes set by :meth:`_init_qkv`: ``H``, ``dk``, ``dv``, ``k`` (the conv's kernel),
    ``chunk``, ``neg``, ``sizes``, ``qkv``, ``conv``. State: (S (B, H, d_k, d_v), the conv's history)."""

    name: str
    H: int
    dk: int
    dv: int
    k: int
    sizes: list[int]
    qkv: nn.Linear
    conv: nn.Conv1d | None

    def _init_qkv(self, d_model: int, d_state: int, heads: int, neg: bool, conv: int, chunk: int) -> None:
        check_heads(self.name, heads, d_model)
        check_conv(self.name, conv)
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        self.H, self.neg, self.k, self.chunk = heads, bool(neg), conv, chunk
        self.dk, self.dv = d_state, d_model // heads
        H = heads
        self.sizes = [H * self.dk, H * self.dk, H * self.dv]
        self.qkv = nn.Linear(d_model, sum(self.sizes), bias=False)
        self.conv = (
            nn.Conv1d(sum(self.sizes), sum(self.sizes), conv, groups=sum(self.sizes)) if conv > 0 else None
        )

    def init_state(self, batch, device=None, dtype=None):
        dtype = dtype or self.qkv.weight.dtype
        S = torch.zeros(batch, self.H, self.dk, self.dv, device=device, dtype=dtype)
        buf = torch.zeros(batch, sum(self.sizes), max(self.k - 1, 0), device=device, dtype=dtype)
        return (S, buf)

    def _qkv(self, x, buf, chunk: bool):
        """x (..., d_model) -> q, k (..., H, d_k), v (..., H, d_v), buf."""
        qkv = self.qkv(x)
        if self.conv is not None:
            qkv, buf = (causal_conv if chunk else causal_conv_step)(self.conv, qkv, buf)
        q, k, v = F.silu(qkv).split(self.sizes, dim=-1)
        H = self.H
        q = F.normalize(q.unflatten(-1, (H, self.dk)), dim=-1)
        k = F.normalize(k.unflatten(-1, (H, self.dk)), dim=-1)
        return q, k, v.unflatten(-1, (H, self.dv)), buf


class GatedDeltaNet(DeltaInput, Mixer):
    name = "gateddeltanet"

    def __init__(self, d_model, d_state, heads=1, neg=False, conv=4, chunk=CHUNK):
        super().__init__(d_model, d_state)
        self._init_qkv(d_model, d_state, heads, neg, conv, chunk)
        H = heads
        self.ab_proj = nn.Linear(d_model, 2 * H, bias=False)  # beta and the gate's Delta
        self.A_log, self.dt_bias = decay_gate_init(self.name, H)
        self.g_proj = nn.Linear(d_model, H * self.dv, bias=False)
        self.o_norm = nn.RMSNorm(self.dv, eps=1e-5)
        self.o_proj = nn.Linear(H * self.dv, d_model, bias=False)

    def activation_bytes(self):
        C = max(1, self.chunk)
        per_step = 4 * C + 4 * (self.dk + self.dv) + self.dk * self.dv // C
        return 4 * (self.H * per_step + 2 * sum(self.sizes) + 4 * self.d_model)

    def _terms(self, x, buf, chunk: bool):
        """x (..., d_model) -> q, k (..., H, d_k), v (..., H, d_v), beta, g (..., H), buf."""
        q, k, v, buf = self._qkv(x, buf, chunk)
        H = self.H
        b, a = self.ab_proj(x).split([H, H], dim=-1)
        beta = torch.sigmoid(b) * (2.0 if self.neg else 1.0)
        g = -torch.exp(self.A_log) * F.softplus(a + self.dt_bias)
        return q, k, v, beta, g, buf

    def _out(self, o, x):
        return gated_output(self, o, x, F.silu)

    def forward(self, x, state=None):
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, buf = state
        q, k, v, beta, g, buf = self._terms(x, buf, chunk=True)
        o, S = gated_delta_rule(q, k, v, beta, g, S, self.chunk, self.neg)
        return self._out(o, x), (S, buf)

    def step(self, x, state):
        S, buf = state
        q, k, v, beta, g, buf = self._terms(x, buf, chunk=False)
        bk, a, b, log_w = gated_delta_terms(k.unsqueeze(1), beta.unsqueeze(1), g.unsqueeze(1))
        o, S = dplr_step(q, bk[:, 0], v, a[:, 0], b[:, 0], log_w[:, 0], S)
        return self._out(o, x), (S, buf)

    def transition(self, x):
        """A(x_t) per token and head, conv history from zeros: (B, T, H, d_k, d_k)."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, g, _ = self._terms(x, buf, chunk=True)
        _, a, b, log_w = gated_delta_terms(k, beta, g)
        return dplr_transition(a, b, log_w, self.dk)

    def eigenvalues(self, x):
        """Eigenvalues of A(x_t) (each acts on every value column of the state): (B, T, H * d_k) complex."""
        return torch.linalg.eigvals(self.transition(x)).flatten(-2)
