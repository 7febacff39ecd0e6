"""Causal decoder self-attention as a mixer: the usual Transformer baseline.

x -> q, k, v (``heads`` heads of d_model / heads) -> causal softmax attention -> output projection.
Positions (option ``pos``): ``rope`` (default: rotary embeddings on q and k, the modern decoder's
choice; head dim must be even), ``sinusoidal`` (the fixed sinusoids of Vaswani2017 added to this
mixer's input before the q/k/v projections -- in a stack every transformer layer adds them, unlike the
original, which adds them once to the embedding) or ``none`` (causal masking alone). ``d_state`` is
not used.

The "state" is the KV cache: (keys, values), each (B, heads, t, d_head) over the t tokens seen so
far; the position of the next token is t. Unlike a recurrent layer its memory grows linearly with the
length (and a token costs O(t)): that is the nature of attention. ``forward`` with a cache attends to
the cache and, causally, to the chunk, so chunked evaluation and ``step`` agree with one long forward.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer, check_heads

#: the KV cache: (keys, values), each [B, heads, t, d_head]
KVCache = tuple[Tensor, Tensor]


def sinusoids(pos: Tensor, d: int, dtype: torch.dtype | None = None) -> Tensor:
    """pos (T,) positions -> (T, d) fixed sinusoidal embeddings."""
    i = torch.arange(0, d, 2, device=pos.device, dtype=torch.float64)
    ang = pos.to(torch.float64)[:, None] * torch.exp(-math.log(10000.0) * i / d)[None]
    pe = torch.zeros(len(pos), d, dtype=torch.float64, device=pos.device)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang[:, : d // 2])
    return pe.to(dtype)


def rope(x: Tensor, pos: Tensor) -> Tensor:
    """Rotary embedding of x (B, H, T, d) at positions pos (T,), pairs (x_2i, x_2i+1)."""
    d = x.shape[-1]
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] * inv[None]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class Transformer(Mixer):
    """Causal softmax self-attention; its state is the KV cache, which grows with the length.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            Not used: the state is the KV cache.
        heads (int):
            H, the number of heads; it must divide d_model, and d_head = d_model / H. Default: 1.
        pos (str):
            The positions: ``rope`` (rotary embeddings on q and k; d_head must be even), ``sinusoidal``
            (fixed sinusoids added to this mixer's input) or ``none`` (causal masking alone).
            Default: ``rope``.

    The state is (keys, values), each [B, H, t, d_head] over the t tokens seen so far.
    """

    name = "transformer"

    def __init__(
        self, d_model: int, d_state: int, heads: int = 1, pos: Literal["rope", "sinusoidal", "none"] = "rope"
    ) -> None:
        super().__init__(d_model, d_state)
        if pos not in ("none", "sinusoidal", "rope"):
            raise UserError(f"unknown transformer pos {pos!r}; allowed: none, rope, sinusoidal")
        check_heads("transformer", heads, d_model)
        self.H, self.dh, self.pos = heads, d_model // heads, pos
        if pos == "rope" and self.dh % 2:
            raise UserError(
                f"transformer pos=rope needs an even head dim, got {self.dh}; "
                "use pos=sinusoidal or pos=none, or another heads"
            )
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> KVCache:
        """An empty cache: (keys, values), each [batch, H, 0, d_head]."""
        dtype = dtype or self.qkv.weight.dtype
        z = torch.zeros(batch, self.H, 0, self.dh, device=device, dtype=dtype)
        return (z, z.clone())

    def forward(self, x: Tensor, state: KVCache | None = None) -> tuple[Tensor, KVCache]:
        """Attention over the cache and, causally, over x.

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, Tensor], optional): the cache (keys, values), each [B, H, t, d_head]
                over the t tokens before x; None: empty.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, T, D] and the cache with x's keys and values
            ([B, H, t + T, d_head] each).
        """
        B, T, D = x.shape
        if state is None:
            state = self.init_state(B, x.device, x.dtype)
        kc, vc = state
        t0 = kc.shape[2]
        pos = torch.arange(t0, t0 + T, device=x.device)
        if self.pos == "sinusoidal":
            x = x + sinusoids(pos, D, x.dtype)
        q, k, v = (y.unflatten(-1, (self.H, self.dh)).transpose(1, 2) for y in self.qkv(x).chunk(3, dim=-1))
        if self.pos == "rope":
            q, k = rope(q, pos), rope(k, pos)
        k, v = torch.cat([kc, k], 2), torch.cat([vc, v], 2)
        # query i (absolute t0 + i) sees keys 0 .. t0 + i
        mask = torch.arange(t0 + T, device=x.device)[None, :] <= pos[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(o.transpose(1, 2).reshape(B, T, D)), (k, v)

    def step(self, x: Tensor, state: KVCache) -> tuple[Tensor, KVCache]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, Tensor]): the cache (keys, values), each [B, H, t, d_head].

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, D] and the cache, one token longer.
        """
        y, state = self.forward(x.unsqueeze(1), state)
        return y.squeeze(1), state
