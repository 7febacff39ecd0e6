"""The sLSTM layer of xLSTM (Beck2024): scalar memory cells with exponential gating and recurrent
gates, d_model cells in ``heads`` heads of d_h = d_model / heads.

Input pre-activations: the input and forget gates read x after an optional depthwise causal conv
(kernel 4) and silu, the cell input and output gates read x itself (as in the paper's block); each
gate adds R_g h_{t-1} with a block-diagonal R (one d_h x d_h block per head) and a bias (forget bias
from 3 to 6 across the cells). The cell (``ops.slstm.reference``)::

    c_t = f_t c_{t-1} + i_t tanh(tz_t),  n_t = f_t n_{t-1} + i_t,  h_t = sigmoid(to_t) c_t / n_t

with i = exp(ti), f = sigmoid(tf), stabilised. Then a per-head LayerNorm and the output projection
(the paper's block follows it with a gated MLP: here the model's ``mlp`` option). The gates see
h_{t-1}: a non-linear recurrence, outside the linear theorems. State: (h, c, n, m) each (B, heads, d_h),
and the conv buffer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.layers.base import Mixer, causal_conv_step, check_conv, check_heads
from statetrack.ops import causal_conv
from statetrack.ops.slstm.reference import slstm_recurrent, slstm_step, slstm_zero_state


class SLSTM(Mixer):
    """xLSTM's sLSTM layer: scalar cells with exponential gating and gates recurrent in h (non-linear).

    Args:
        d_model (int):
            D, the width of the input and the output: D cells.
        d_state (int):
            Not used: the state is the cells' (h, c, n, m), d_model each.
        heads (int):
            H, the number of heads of the block-diagonal recurrent matrices; it must divide d_model, and
            d_h = d_model / H. Default: 1.
        conv (int):
            The kernel size of the depthwise causal convolution before the input and forget gates
            (0 to 64); 0: no convolution. Default: 4.

    The state is (h, c, n, m) each [B, H, d_h], and the convolution's history [B, D, conv - 1].
    """

    name = "slstm"

    def __init__(self, d_model: int, d_state: int, heads: int = 1, conv: int = 4) -> None:
        super().__init__(d_model, d_state)
        check_heads(self.name, heads, d_model)
        check_conv(self.name, conv)
        self.H, self.dh, self.k = heads, d_model // heads, conv
        d, H, dh = d_model, heads, self.dh
        self.conv = nn.Conv1d(d, d, conv, groups=d) if conv > 0 else None
        self.w_if = nn.Linear(d, 2 * d)  # input and forget gates, from the conv branch
        self.w_zo = nn.Linear(d, 2 * d)  # cell input and output gates, from x
        self.R = nn.Parameter(torch.randn(4, H, dh, dh) / math.sqrt(dh))
        with torch.no_grad():
            self.w_if.bias[d:] = torch.linspace(3.0, 6.0, d)
        self.o_norm = nn.LayerNorm(dh, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def activation_bytes(self) -> int:
        return 4 * 16 * self.d_model

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, ...]:
        """Zeros: (h, c, n, m) each [batch, H, d_h], and the convolution's history [batch, D, conv - 1]."""
        dtype = dtype or self.R.dtype
        buf = torch.zeros(batch, self.d_model, max(self.k - 1, 0), device=device, dtype=dtype)
        return slstm_zero_state(batch, self.H, self.dh, dtype, device) + (buf,)

    def _w(self, x: Tensor, buf: Tensor, chunk: bool) -> tuple[Tensor, Tensor]:
        """x (..., d) -> the gates' input pre-activations (..., 4, H, d_h) and the buffer."""
        xc = x
        if self.conv is not None:
            xc, buf = (causal_conv if chunk else causal_conv_step)(self.conv, x, buf)
        ti, tf = self.w_if(F.silu(xc)).chunk(2, dim=-1)
        tz, to = self.w_zo(x).chunk(2, dim=-1)
        w = torch.stack([ti, tf, tz, to], -2)  # (..., 4, d)
        return w.unflatten(-1, (self.H, self.dh)), buf

    def _out(self, h: Tensor) -> Tensor:
        """h (..., H, d_h) -> the output (..., D)."""
        return self.out(self.o_norm(h).flatten(-2))

    def forward(
        self, x: Tensor, state: tuple[Tensor, ...] | None = None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The training path: the recurrence over the sequence, step by step (``ops.slstm.reference``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, ...], optional): (h, c, n, m) each [B, H, d_h], and the convolution's
                history [B, D, conv - 1], before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, ...]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        cell, buf = state[:-1], state[-1]
        w, buf = self._w(x, buf, chunk=True)
        h, cell = slstm_recurrent(w, self.R, cell)
        return self._out(h), (*cell, buf)

    def step(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, ...]): (h, c, n, m) each [B, H, d_h], and the convolution's history
                [B, D, conv - 1].

        Returns:
            (Tensor, tuple[Tensor, ...]): the output [B, D] and the state after x.
        """
        cell, buf = state[:-1], state[-1]
        w, buf = self._w(x, buf, chunk=False)
        h, cell = slstm_step(w, self.R, cell)
        return self._out(h), (*cell, buf)
