"""RWKV-7 "Goose" time mixing (Peng2025): a vector decay plus a rank-one generalised delta rule, with
separate removal and replacement keys.

Per head h (``heads``), key dim d_k = d_state, value dim d_v = d_model / heads, state S (d_k, d_v)
(the transpose of the paper's wkv state)::

    S_t = diag(w_t) S_{t-1} - (kappa_t (.) a_t) (kappa_t^T S_{t-1}) + k~_t v_t^T          o_t = S_t^T r_t

* token shift: each input is mixed with the previous one, x_c = x_t + mu_c (x_{t-1} - x_t), c in
  (r, w, k, v, a, g), mu_c learned per channel;
* r = W_r x_r (the receptance, RWKV's query), k = W_k x_k, v = W_v x_v;
* the decay w_t = exp(-e^(-1/2) sigmoid(w_0 + W_2 tanh(W_1 x_w))) in (0.545, 1), per key channel;
* the in-context learning rate a_t = sigmoid(a_0 + A_2 A_1 x_a) in (0, 1), per key channel;
* the removal key kappa = normalise(k (.) k_k) per head; the replacement key k~ = k (.) (1 + (a - 1) (.) k_a);
* output: a per-head LayerNorm of o_t, plus the bonus ((r (.) k~ (.) r_k) summed per head) v_t, times
  the gate g_t = G_2 sigmoid(G_1 x_g), then the output projection.

So A(x_t) = diag(w_t) - (kappa (.) a) kappa^T: a diagonal plus a rank-one matrix. With a in (0, 1)
it is similar to the symmetric diag(w) - u u^T, u = sqrt(a) (.) kappa, |u| < 1 (conjugate by
diag(sqrt(a))), so its eigenvalues are real and lie in (min w - 1, 1] contained in (-1/2, 1]: -1 is out of
reach, which decides parity (docs/science.md, rule T1c). Simplified: the value residual across layers
(v_first) is left out (a mixer here sees only its own layer), and the low-rank maps have rank
``lora``. Recurrence: ``ops.dplr.rwkv7.rwkv7_rule`` (fla's kernels on CUDA). State: (S, the previous input x_{t-1}).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer, check_heads
from statetrack.ops.dplr.reference import dplr_step, dplr_transition
from statetrack.ops.dplr.rwkv7 import rwkv7_rule, rwkv7_terms

#: the decay's floor: log w >= -e^(-1/2) (w > 0.545), as in the paper
W_SCALE = math.exp(-0.5)
MIXES = ("r", "w", "k", "v", "a", "g")

#: (S [B, H, d_k, d_v], the previous input x_{t-1} [B, D])
RWKV7State = tuple[Tensor, Tensor]


#: steps per chunk of the chunked form: with a decay per key channel the chunk's (C, C, d_k) factors
#: dominate, and 8 is about twice as fast as 16 for training (batch 32, lengths up to 40, d 16) and for
#: evaluation (64 x 1,000) on the 2-core CPU
CHUNK = 8


class RWKV7(Mixer):
    """RWKV-7's time mixing: a vector decay plus a rank-one generalised delta rule per head.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            d_k, the key dimension per head.
        heads (int):
            H, the number of heads; it must divide d_model, and d_v = d_model / H. Default: 1.
        lora (int):
            The rank (>= 1) of the low-rank maps of the decay, the in-context learning rate and the
            output gate. Default: 8.
        chunk (int):
            Steps per chunk of the chunked training form (>= 0); 0 or 1: the step loop. Default: 8.

    The state is (S [B, H, d_k, d_v], the previous input x_{t-1} [B, D]).
    """

    name = "rwkv7"

    def __init__(self, d_model: int, d_state: int, heads: int = 1, lora: int = 8, chunk: int = CHUNK) -> None:
        super().__init__(d_model, d_state)
        check_heads(self.name, heads, d_model)
        if lora < 1:
            raise UserError(f"{self.name} lora={lora} must be >= 1")
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        self.H, self.chunk = heads, chunk
        self.dk, self.dv = d_state, d_model // heads
        K, V, d = heads * self.dk, heads * self.dv, d_model
        self.mu = nn.Parameter(torch.rand(len(MIXES), d))
        self.r_proj, self.k_proj = nn.Linear(d, K, bias=False), nn.Linear(d, K, bias=False)
        self.v_proj = nn.Linear(d, V, bias=False)
        self.w0 = nn.Parameter(torch.linspace(-5.0, 1.0, K))
        self.w1, self.w2 = nn.Linear(d, lora, bias=False), nn.Linear(lora, K, bias=False)
        self.a0 = nn.Parameter(torch.zeros(K))
        self.a1, self.a2 = nn.Linear(d, lora, bias=False), nn.Linear(lora, K, bias=False)
        self.g1, self.g2 = nn.Linear(d, lora, bias=False), nn.Linear(lora, V, bias=False)
        for m in (self.w2, self.a2):
            nn.init.zeros_(m.weight)  # the low-rank corrections start at 0, as in the reference init
        self.k_k = nn.Parameter(torch.full((K,), 0.85))
        self.k_a = nn.Parameter(torch.ones(K))
        self.r_k = nn.Parameter(0.1 * torch.randn(heads, self.dk))
        self.o_norm = nn.LayerNorm(self.dv, eps=64e-5)
        self.o_proj = nn.Linear(V, d, bias=False)

    def activation_bytes(self) -> int:
        C = max(1, self.chunk)
        per_step = 6 * C * self.dk + 6 * self.dk + 3 * self.dv + self.dk * (self.dk + self.dv) // C
        return 4 * (self.H * per_step + 12 * self.d_model)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> RWKV7State:
        """Zeros: (S [batch, H, d_k, d_v], the previous input [batch, D])."""
        dtype = dtype or self.r_proj.weight.dtype
        S = torch.zeros(batch, self.H, self.dk, self.dv, device=device, dtype=dtype)
        return (S, torch.zeros(batch, self.d_model, device=device, dtype=dtype))

    def _terms(
        self, x: Tensor, x_prev: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x (B, T, d) and the input before it (B, d) -> r, k~, kappa, a, log_w (B, T, H, d_k), v, g
        (B, T, H, d_v)."""
        shifted = torch.cat([x_prev.unsqueeze(1), x[:, :-1]], 1)
        xr, xw, xk, xv, xa, xg = (x + m * (shifted - x) for m in self.mu)
        H, dk, dv = self.H, self.dk, self.dv
        r = self.r_proj(xr).unflatten(-1, (H, dk))
        k = self.k_proj(xk)
        v = self.v_proj(xv).unflatten(-1, (H, dv))
        log_w = (-W_SCALE * torch.sigmoid(self.w0 + self.w2(torch.tanh(self.w1(xw))))).unflatten(-1, (H, dk))
        a = torch.sigmoid(self.a0 + self.a2(self.a1(xa)))
        g = self.g2(torch.sigmoid(self.g1(xg))).unflatten(-1, (H, dv))
        kappa = F.normalize((k * self.k_k).unflatten(-1, (H, dk)), dim=-1)
        kt = (k * (1 + (a - 1) * self.k_a)).unflatten(-1, (H, dk))
        return r, kt, kappa, a.unflatten(-1, (H, dk)), log_w, v, g

    def _out(self, o: Tensor, r: Tensor, kt: Tensor, v: Tensor, g: Tensor) -> Tensor:
        """The read-out o, v, g (..., H, d_v) and r, k~ (..., H, d_k) -> the output (..., D)."""
        bonus = (r * kt * self.r_k).sum(-1, keepdim=True) * v
        return self.o_proj(((self.o_norm(o) + bonus) * g).flatten(-2))

    def forward(self, x: Tensor, state: RWKV7State | None = None) -> tuple[Tensor, RWKV7State]:
        """The training path: the chunked rule over the sequence (``ops.dplr.rwkv7.rwkv7_rule``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, Tensor], optional): (S [B, H, d_k, d_v], the previous input [B, D])
                before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        S, x_prev = state
        r, kt, kappa, a, log_w, v, g = self._terms(x, x_prev)
        o, S = rwkv7_rule(r, kt, v, log_w, kappa, a, S, self.chunk)
        return self._out(o, r, kt, v, g), (S, x[:, -1])

    def step(self, x: Tensor, state: RWKV7State) -> tuple[Tensor, RWKV7State]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, Tensor]): (S [B, H, d_k, d_v], the previous input [B, D]).

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, D] and the state after x.
        """
        S, x_prev = state
        r, kt, kappa, a, log_w, v, g = (t[:, 0] for t in self._terms(x.unsqueeze(1), x_prev))
        ra, rb = rwkv7_terms(kappa, a)
        o, S = dplr_step(r, kt, v, ra, rb, log_w, S)
        return self._out(o, r, kt, v, g), (S, x)

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token and head for the inputs x [B, T, D], previous input zeros: [B, T, H, d_k, d_k]."""
        _, x_prev = self.init_state(x.shape[0], x.device, x.dtype)
        _, _, kappa, a, log_w, _, _ = self._terms(x, x_prev)
        ra, rb = rwkv7_terms(kappa, a)
        return dplr_transition(ra, rb, log_w, self.dk)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of A(x_t) for the inputs x [B, T, D]: [B, T, H * d_k] complex with zero imaginary
        parts, computed from the similar symmetric matrix diag(w) - u u^T, u = sqrt(a) (.) kappa (exact where
        a > 0; a is a sigmoid)."""
        _, x_prev = self.init_state(x.shape[0], x.device, x.dtype)
        _, _, kappa, a, log_w, _, _ = self._terms(x, x_prev)
        u = torch.sqrt(a) * kappa
        sym = torch.diag_embed(torch.exp(log_w)) - u.unsqueeze(-1) * u.unsqueeze(-2)
        ev = torch.linalg.eigvalsh(sym).flatten(-2)
        return ev.to(ev.dtype.to_complex())
