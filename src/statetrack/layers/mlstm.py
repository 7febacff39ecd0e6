"""The mLSTM layer of xLSTM (Beck2024): a matrix memory with a scalar, exponentially gated update per head.

x -> up-projection to (x_m, z), each of width E = expand * d_model; x_m -> optional depthwise causal
conv (kernel 4) -> silu -> x_c; per head h (``heads``), with key dim d_k = d_state and value dim
d_v = E / heads: q = W_q x_c, k = W_k x_c / sqrt(d_k), v = W_v x_m, and the gates' pre-activations
(ti, tf) = W_{i,f} [q, k, v] + b (forget bias from 3 to 6 across heads, as in the paper's init;
small random gate weights where the reference starts them at zero); the
cell (``ops.mlstm.chunk``)::

    C_t = f_t C_{t-1} + i_t k_t v_t^T,   n_t = f_t n_{t-1} + i_t k_t,   h_t = C_t^T q_t / max(|n_t^T q_t|, 1)

with i_t = exp(ti_t), f_t = sigmoid(tf_t), stored stabilised (C~ = exp(-m) C); then a per-head
LayerNorm, a learned skip from x_c, the gate silu(z) and the down-projection. The transition of the
stored state is the scalar f'_t = exp(log f_t + m_{t-1} - m_t) in [0, 1] per head (a scalar times the
identity). Simplified: the paper's block-diagonal q, k, v projections are dense here. State:
(C~ (B, H, d_k, d_v), n~ (B, H, d_k), m (B, H), conv buffer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import (
    Mixer,
    causal_conv_step,
    check_conv,
    check_expand,
    check_heads,
)
from statetrack.ops import causal_conv
from statetrack.ops.mlstm.chunk import CHUNK, mlstm
from statetrack.ops.mlstm.reference import mlstm_step, mlstm_transition, mlstm_zero_state

#: (C~, n~, m, the convolution's history)
MLSTMState = tuple[Tensor, Tensor, Tensor, Tensor]


class MLSTM(Mixer):
    """xLSTM's mLSTM layer: a matrix memory per head with a scalar, exponentially gated update.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            d_k, the key dimension per head.
        heads (int):
            H, the number of heads; it must divide E = expand * d_model, and d_v = E / H. Default: 1.
        expand (int):
            The inner width E = expand * d_model of the up-projection (1 to 16). Default: 2.
        conv (int):
            The kernel size of the depthwise causal convolution before q and k (0 to 64); 0: no
            convolution. Default: 4.
        chunk (int):
            Steps per chunk of the chunked training form (>= 0); 0 or 1: the step loop. Default: 16.

    The state is (C~ [B, H, d_k, d_v], n~ [B, H, d_k], m [B, H], the convolution's history [B, E, conv - 1]).
    """

    name = "mlstm"

    def __init__(
        self, d_model: int, d_state: int, heads: int = 1, expand: int = 2, conv: int = 4, chunk: int = CHUNK
    ) -> None:
        super().__init__(d_model, d_state)
        check_expand(self.name, expand)
        check_conv(self.name, conv)
        E = expand * d_model
        check_heads(self.name, heads, E, "expand * d_model")
        if chunk < 0:
            raise UserError(f"{self.name} chunk={chunk} must be >= 0 (0 = step loop)")
        self.H, self.k, self.chunk, self.d_inner = heads, conv, chunk, E
        self.dk, self.dv = d_state, E // heads
        H, dk = heads, self.dk
        self.up = nn.Linear(d_model, 2 * E, bias=False)
        self.conv = nn.Conv1d(E, E, conv, groups=E) if conv > 0 else None
        self.qk = nn.Linear(E, 2 * H * dk, bias=False)
        self.v = nn.Linear(E, E, bias=False)
        self.gates = nn.Linear(2 * H * dk + E, 2 * H)  # [input | forget] pre-activations per head
        with torch.no_grad():  # small gate weights: the gates start near their biases, and depend on x
            self.gates.weight.mul_(0.1)
            self.gates.bias[:H].normal_(0.0, 0.1)
            self.gates.bias[H:] = torch.linspace(3.0, 6.0, H)
        self.o_norm = nn.LayerNorm(self.dv, elementwise_affine=True, bias=False)
        self.skip = nn.Parameter(torch.ones(E))
        self.down = nn.Linear(E, d_model, bias=False)

    def activation_bytes(self) -> int:
        C = max(1, self.chunk)
        per_step = 3 * C + 3 * self.dk + 3 * self.dv + self.dk * self.dv // C
        return 4 * (self.H * per_step + 8 * self.d_inner + 2 * self.d_model)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> MLSTMState:
        """Zeros: (C~ [batch, H, d_k, d_v], n~ [batch, H, d_k], m [batch, H], the convolution's history
        [batch, E, conv - 1])."""
        dtype = dtype or self.up.weight.dtype
        buf = torch.zeros(batch, self.d_inner, max(self.k - 1, 0), device=device, dtype=dtype)
        return mlstm_zero_state(batch, self.H, self.dk, self.dv, dtype, device) + (buf,)

    def _terms(
        self, x: Tensor, buf: Tensor, chunk: bool
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x (..., D) and the conv's history -> q, k (..., H, d_k), v (..., H, d_v), the gates' ti and
        log f (..., H), x_c, z (..., E) and the history after x."""
        xm, z = self.up(x).chunk(2, dim=-1)
        xc = xm
        if self.conv is not None:
            xc, buf = (causal_conv if chunk else causal_conv_step)(self.conv, xm, buf)
        xc = F.silu(xc)
        qk = self.qk(xc)
        v = self.v(xm)
        ti, tf = self.gates(torch.cat([qk, v], -1)).chunk(2, dim=-1)
        H, dk, dv = self.H, self.dk, self.dv
        q, k = qk.unflatten(-1, (2, H, dk)).unbind(-3)
        return q, k * dk**-0.5, v.unflatten(-1, (H, dv)), ti, F.logsigmoid(tf), xc, z, buf

    def _out(self, h: Tensor, xc: Tensor, z: Tensor) -> Tensor:
        """The cell's read-out h (..., H, d_v), x_c and z (..., E) -> the output (..., D)."""
        y = self.o_norm(h).flatten(-2) + self.skip * xc
        return self.down(y * F.silu(z))

    def forward(self, x: Tensor, state: MLSTMState | None = None) -> tuple[Tensor, MLSTMState]:
        """The training path: the chunked cell over the sequence (``ops.mlstm.chunk``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, ...], optional): (C~ [B, H, d_k, d_v], n~ [B, H, d_k], m [B, H], the
                convolution's history [B, E, conv - 1]) before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, ...]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        C, n, m, buf = state
        q, k, v, ti, log_f, xc, z, buf = self._terms(x, buf, chunk=True)
        h, cell = mlstm(q, k, v, ti, log_f, (C, n, m), self.chunk)
        return self._out(h, xc, z), (*cell, buf)

    def step(self, x: Tensor, state: MLSTMState) -> tuple[Tensor, MLSTMState]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, ...]): (C~ [B, H, d_k, d_v], n~ [B, H, d_k], m [B, H], the convolution's
                history [B, E, conv - 1]).

        Returns:
            (Tensor, tuple[Tensor, ...]): the output [B, D] and the state after x.
        """
        C, n, m, buf = state
        q, k, v, ti, log_f, xc, z, buf = self._terms(x, buf, chunk=False)
        h, cell = mlstm_step(q, k, v, ti, log_f, (C, n, m))
        return self._out(h, xc, z), (*cell, buf)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """The scalar f'_t per head, along the scale trajectory from the initial state, for the inputs
        x [B, T, D]: [B, T, H] complex."""
        *_, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, _, _, ti, log_f, _, _, _ = self._terms(x, buf, chunk=True)
        f = mlstm_transition(ti, log_f)
        return f.to(f.dtype.to_complex())
