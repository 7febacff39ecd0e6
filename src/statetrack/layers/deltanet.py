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
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import DeltaInput, Mixer
from statetrack.ops import delta_rule, delta_step, householder_product, interleave
from statetrack.ops.deltanet.chunk import CHUNK


class DeltaProduct(DeltaInput, Mixer):
    """DeltaProduct: n_h generalized Householder steps per token, A(x) = prod_j (I - beta_j k_j k_j^T).

    Args:
        d_model (int): the width of the stream, x [B, T, d_model]; the value dim is d_model / heads.
        d_state (int): the key dim d_k of each head (the state is [heads, d_k, d_model / heads]).
        nh (int): Householder steps per token, 1 to 16 (n_h); default 2. With 1 it is DeltaNet.
        heads (int): the number of heads, a divisor of d_model; default 1.
        neg (bool): beta = 2 sigmoid(.) in [0, 2], so that each factor's eigenvalue 1 - beta reaches -1
            (a reflection); default False: beta = sigmoid(.) in [0, 1].
        conv (int): the kernel of the short depthwise causal conv over q, k, v, 0 to 64; default 4, 0 = none.
        chunk (int): delta-rule steps per chunk of the chunked (WY/UT) training form; default 16,
            0 = the step loop.
    """

    name = "deltaproduct"
    nh: int  # always set: n_h keys and values per token

    def __init__(
        self,
        d_model: int,
        d_state: int,
        nh: int = 2,
        heads: int = 1,
        neg: bool = False,
        conv: int = 4,
        chunk: int = CHUNK,
    ) -> None:
        super().__init__(d_model, d_state)
        if not 1 <= nh <= 16:
            raise UserError(f"{self.name} nh={nh} not in 1..16")
        self._init_qkv(d_model, d_state, heads, neg, conv, chunk, nh=nh)
        # beta's projection is made between q, k, v's and the conv's: the order of this mixer's parameters
        # (and so of its initial draws) since its first checkpoints
        self.b_proj = nn.Linear(d_model, nh * heads, bias=False)
        self._init_conv()
        self.o_norm = nn.RMSNorm(self.dv, eps=1e-5)  # flash-linear-attention's norm_eps
        self.o_proj = nn.Linear(heads * self.dv, d_model, bias=False)

    def activation_bytes(self) -> int:
        # per delta-rule step (n_h per token): q, k, v and the chunk's W, U_v, U, o (d_k or d_v each), the
        # chunk's C x C matrices (K K^T, its inverse, Q K^T) per row, and the state entering the chunk
        C = max(1, self.chunk)
        per_step = 3 * C + 4 * (self.dk + self.dv) + self.dk * self.dv // C
        return 4 * (self.nh * self.H * per_step + 2 * sum(self.sizes) + 4 * self.d_model)

    def _qkvb(self, x: Tensor, buf: Tensor, chunk: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Args: x (Tensor): [..., d_model]; buf (Tensor): the conv's history. Returns (q, k, v, beta, buf):
        q [..., H, d_k], k [..., n_h, H, d_k], v [..., n_h, H, d_v], beta [..., n_h, H], the history after x."""
        q, k, v, buf = self._qkv(x, buf, chunk)
        beta = torch.sigmoid(self.b_proj(x)).unflatten(-1, (self.nh, self.H))
        if self.neg:
            beta = 2 * beta
        return q, k, v, beta, buf

    def _out(self, o: Tensor) -> Tensor:
        """The head outputs o [..., H, d_v] through the per-head RMSNorm and the output projection."""
        return self.o_proj(self.o_norm(o).flatten(-2))

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (S [B, H, d_k, d_v], the conv's history
        [B, sum(sizes), conv - 1]), None: zeros. Returns: y (Tensor): [B, T, d_model], the state after x."""
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

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: as ``forward``'s. Returns: y (Tensor):
        [B, d_model], the state after x (the n_h steps of the recurrent form)."""
        S, buf = state
        q, k, v, beta, buf = self._qkvb(x, buf, chunk=False)
        for j in range(self.nh):
            o, S = delta_step(q, k[:, j], v[:, j], beta[:, j], S)
        return self._out(o), (S, buf)

    def transition(self, x: Tensor) -> Tensor:
        """A(x_t) per token and head, conv history from zeros: x [B, T, d_model] -> [B, T, H, d_k, d_k]."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, k, _, beta, _ = self._qkvb(x, buf, chunk=True)
        # (B, T, nh, H, .) -> (B, T, H, nh, .)
        return householder_product(k.transpose(2, 3), beta.transpose(2, 3))

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of the actual matrix product A(x_t): x [B, T, d_model] -> [B, T, H * d_k] complex."""
        return torch.linalg.eigvals(self.transition(x)).flatten(-2)


class DeltaNet(DeltaProduct):
    """DeltaNet: one Householder step per token, S_t = (I - beta k k^T) S_{t-1} + beta k v^T.

    DeltaProduct with n_h = 1 for good.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model]; the value dim is d_model / heads.
        d_state (int): the key dim d_k of each head.
        heads (int): the number of heads, a divisor of d_model; default 1.
        neg (bool): beta in [0, 2] (eigenvalue 1 - beta reaches -1); default False: beta in [0, 1].
        conv (int): the short causal conv's kernel, 0 to 64; default 4, 0 = none.
        chunk (int): steps per chunk of the chunked training form; default 16, 0 = the step loop.
    """

    name = "deltanet"
    fixed_options = {"nh": 1}

    def __init__(
        self,
        d_model: int,
        d_state: int,
        heads: int = 1,
        neg: bool = False,
        conv: int = 4,
        chunk: int = CHUNK,
    ) -> None:
        super().__init__(d_model, d_state, heads=heads, neg=neg, conv=conv, chunk=chunk, **self.fixed_options)
