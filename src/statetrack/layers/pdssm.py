"""PD-SSM (Terzic2025): a transition that is a one-hot matrix times a complex diagonal, chosen per token.

One complex state h (N = d_state) per sequence and layer::

    h_t = P(x_t) D(x_t) h_{t-1} + B x_t          y_t = W_o [Re h_t, Im h_t] + b_o + D_skip (.) x_t

* P(x_t): a mix of K = ``dict_size`` learned N x N matrices, M_t = sum_k softmax(S x_t)_k A_k, made
  one-hot per column by a hard argmax over each column (the paper's column one-hot P: column n has its
  one in row argmax_m M_t[m, n]). Training passes gradients through the softmax of each column (the
  straight-through estimator, ``ops.pdssm.scan``). ``rows=true`` takes the public code's form instead: P is
  one-hot per ROW (argmax over each row, softmax along it) and the transition is D P;
* D(x_t) = sigmoid(f(x_t)) exp(2 pi i sigmoid(g(x_t))), f and g GELU MLPs of width ``expand`` x N:
  moduli in (0, 1) (BIBO-stable; 1 only where float32 rounds the sigmoid to 1, at f > 16.6), phases in
  (0, 2 pi);
* B complex (N x d_model), the read-out of [Re h, Im h] (with a bias) and the per-channel skip D_skip,
  initialised as in the public code (B and D_skip Glorot-like with halved variance, A_k N(0, 1/N));
* the initial state is e_0 (the first coordinate 1), as in the public code.

The public code's block also applies dropout (0.01) and a post-LayerNorm; here the model's block
(a pre-norm and the residual) wraps the mixer as it wraps every other one.

A(x) = P D has one non-zero entry per column: its eigenvalues are, for each cycle of length L of
sigma (column n -> row sigma(n)), the L-th roots of the product of the cycle's entries, and 0 on the
transient columns, so they lie in the complex disc; modulus 1 needs every entry of a cycle at
modulus 1, i.e. the sigmoid rounded to 1. Products of such matrices are again of this form, and a
one-hot state stays one-hot: with D = I one layer runs any finite automaton with N states (column
form), which the construction ``dfa-pdssm`` builds. Recurrence: ``ops.pdssm.scan.pd_scan``. State: h (B, N)
complex.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Device, Mixer, check_expand
from statetrack.ops import polar
from statetrack.ops.pdssm.reference import pd_matrix, pd_step
from statetrack.ops.pdssm.scan import CHUNK, pd_scan


def _mlp(d_in: int, width: int, d_out: int) -> nn.Sequential:
    """Linear, GELU, Linear, sigmoid: the map to D's moduli (or phases, as fractions of 2 pi)."""
    return nn.Sequential(nn.Linear(d_in, width), nn.GELU(), nn.Linear(width, d_out), nn.Sigmoid())


class PDSSM(Mixer):
    """PD-SSM: A(x) = P(x) D(x), P one-hot per column from a learned dictionary, D complex diagonal.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the number N of complex state coordinates (P and D are N x N).
        dict_size (int): the number K of learned N x N matrices mixed to choose P, 1 to 1024; default 8.
        expand (int): the width of the MLPs giving D's moduli and phases, in units of N, 1 to 16; default 2.
        rows (bool): the public code's form, P one-hot per row and the transition D P; default False: the
            paper's, P one-hot per column and the transition P D.
        chunk (int): steps per chunk of the scan; default 32, 0 = the step loop.
    """

    name = "pdssm"

    def __init__(
        self,
        d_model: int,
        d_state: int,
        dict_size: int = 8,
        expand: int = 2,
        rows: bool = False,
        chunk: int = CHUNK,
    ) -> None:
        super().__init__(d_model, d_state)
        if not 1 <= dict_size <= 1024:
            raise UserError(f"{self.name} dict_size={dict_size} not in 1..1024")
        check_expand(self.name, expand)
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        N, d, K = d_state, d_model, dict_size
        self.rows, self.chunk, self.K = bool(rows), chunk, K
        self.select = nn.Linear(d, K, bias=False)
        self.A_dict = nn.Parameter(torch.randn(K, N, N) / math.sqrt(N))
        self.magnitude = _mlp(d, expand * N, N)
        self.phase = _mlp(d, expand * N, N)
        self.B_re = nn.Parameter(torch.randn(N, d) / math.sqrt(2 * N))
        self.B_im = nn.Parameter(torch.randn(N, d) / math.sqrt(2 * N))
        self.D = nn.Parameter(torch.randn(d) / math.sqrt(d))
        self.readout = nn.Linear(2 * N, d)

    def activation_bytes(self) -> int:
        N = self.d_state
        return 4 * (3 * N * N + 4 * self.K + 12 * N + 8 * self.d_model)

    def init_state(self, batch: int, device: Device = None, dtype: torch.dtype | None = None) -> Tensor:
        """h [batch, N] complex: e_0 (the first coordinate 1), as in the public code."""
        dtype = dtype or self.D.dtype
        h = torch.zeros(batch, self.d_state, device=device, dtype=dtype.to_complex())
        h[:, 0] = 1
        return h

    def _mix(self, x: Tensor) -> Tensor:
        """The dictionary mix M [..., N, N] for inputs x [..., d_model]."""
        w = torch.softmax(self.select(x), dim=-1)
        N = self.d_state
        return (w @ self.A_dict.flatten(1)).unflatten(-1, (N, N))

    def _terms(self, x: Tensor, relax: bool) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """x [..., d_model] -> idx [..., N], d [..., N] complex, b [..., N] complex, soft [..., N, N] or None."""
        axis = -1 if self.rows else -2  # the one of each row (rows) or of each column
        if relax:
            M = self._mix(x)
            idx = M.argmax(axis)
            soft = torch.softmax(M, axis)  # the hard P's relaxation, one-hot axis summing to 1
        else:
            idx, soft = self._hard_index(x, axis), None
        mag = self.magnitude(x)
        ang = 2 * math.pi * self.phase(x)
        d = polar(mag, ang)
        b = torch.complex(x @ self.B_re.T, x @ self.B_im.T)
        return idx, d, b, soft

    def _hard_index(self, x: Tensor, axis: int) -> Tensor:
        """The one-hot map sigma [..., N]: the mix's argmax over P's one-hot axis, computed once per distinct
        input row when at most half the rows are distinct (a layer reading token embeddings sees one row per
        symbol; forming the [N, N] mix per token is what evaluation spends its time on at N = 120)."""
        flat = x.reshape(-1, x.shape[-1])
        uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
        if 2 * uniq.shape[0] > flat.shape[0]:
            return self._mix(x).argmax(axis)
        return self._mix(uniq).argmax(axis)[inverse].reshape(*x.shape[:-1], self.d_state)

    def _out(self, h: Tensor, x: Tensor) -> Tensor:
        """The read-out of [Re h, Im h] plus the skip D_skip x: h [..., N] complex, x [..., d_model]."""
        return self.readout(torch.cat([h.real, h.imag], -1)) + self.D * x

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, T, d_model]; state (Tensor): h [B, N] complex, None: ``init_state``.
        Returns: y (Tensor): [B, T, d_model], h after x. Training (gradients on) passes them through the
        softmax of P's one-hot axis (the straight-through estimator)."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        relax = torch.is_grad_enabled() and self.A_dict.requires_grad
        idx, d, b, soft = self._terms(x, relax)
        h, hT = pd_scan(idx, d, b, state, self.rows, self.chunk, soft)
        return self._out(h, x), hT

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, d_model], one token; state (Tensor): h [B, N] complex.
        Returns: y (Tensor): [B, d_model], h after x."""
        idx, d, b, _ = self._terms(x, relax=False)
        h = pd_step(idx, d, b, state, self.rows)
        return self._out(h, x), h

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token: x [B, T, d_model] -> [B, T, N, N] complex."""
        idx, d, _, _ = self._terms(x, relax=False)
        return pd_matrix(idx, d, self.rows)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of A(x_t): x [B, T, d_model] -> [B, T, N] complex."""
        return torch.linalg.eigvals(self.transition(x))
