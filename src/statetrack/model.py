"""The model: embedding -> blocks from a layer spec -> norm -> head.

A block is ``x + mixer(norm(x))``, optionally followed by ``x + mlp(norm(x))``. Every forward call
takes and returns the list of per-layer states, so the same model trains on short sequences and
evaluates on sequences of any length in fixed memory (``forward`` on chunks, or ``step`` per token).
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from statetrack.config import ModelConfig
from statetrack.layers import Mixer, build_mixer

M = TypeVar("M", bound=Mixer)


def _norm(kind: str, d: int) -> nn.Module:
    return {"rmsnorm": lambda: nn.RMSNorm(d), "layernorm": lambda: nn.LayerNorm(d), "none": nn.Identity}[
        kind
    ]()


class Block(nn.Module):
    """``x + mixer(norm(x))``, then ``x + mlp(x)`` where the config asks for an MLP.

    Args:
        mixer (Mixer): the sequence mixer, [B, T, D] -> [B, T, D] with its state.
        cfg (ModelConfig): the width D, the norm and whether there is an MLP.
    """

    def __init__(self, mixer: Mixer, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.norm = _norm(cfg.norm, d)
        self.mixer = mixer
        self.mlp = (
            nn.Sequential(_norm(cfg.norm, d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            if cfg.mlp
            else None
        )

    def forward(self, x: Tensor, state: Any = None) -> tuple[Tensor, Any]:
        y, state = self.mixer(self.norm(x), state)
        x = x + y
        if self.mlp is not None:
            x = x + self.mlp(x)
        return x, state

    def step(self, x: Tensor, state: Any) -> tuple[Tensor, Any]:
        y, state = self.mixer.step(self.norm(x), state)
        x = x + y
        if self.mlp is not None:
            x = x + self.mlp(x)
        return x, state


class Model(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int, num_classes: int):
        super().__init__()
        self.cfg, self.vocab_size, self.num_classes = cfg, vocab_size, num_classes
        self.embed = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(
            Block(build_mixer(spec, cfg.d_model, cfg.d_state), cfg) for spec in cfg.layers
        )
        self.norm = _norm(cfg.norm, cfg.d_model)
        self.head = nn.Linear(cfg.d_model, num_classes)

    def block(self, i: int) -> Block:
        """The ``i``-th block."""
        b = self.blocks[i]
        assert isinstance(b, Block)
        return b

    def mixer(self, i: int, kind: type[M]) -> M:
        """The ``i``-th layer's mixer, checked to be a ``kind`` (a construction sets a known mixer's weights)."""
        m = self.block(i).mixer
        if not isinstance(m, kind):
            raise TypeError(f"layer {i} is a {type(m).__name__}, not a {kind.__name__}")
        return m

    @property
    def mixers(self) -> list[Mixer]:
        return [self.block(i).mixer for i in range(len(self.blocks))]

    def activation_bytes(self) -> int:
        """Bytes the largest block holds per sequence and time step in a forward pass without gradients
        (``Mixer.activation_bytes`` plus the block's own vectors): what sizes evaluation's chunks."""
        d = self.cfg.d_model
        return max(m.activation_bytes() for m in self.mixers) + 4 * d * (12 if self.cfg.mlp else 4)

    def init_state(self, batch: int) -> list:
        p = self.head.weight
        return [m.init_state(batch, p.device, p.dtype) for m in self.mixers]

    def forward(self, tokens: Tensor, states: list | None = None) -> tuple[Tensor, list]:
        """tokens (B, T) -> logits (B, T, num_classes), new states."""
        x = self.embed(tokens)
        states = states if states is not None else [None] * len(self.blocks)
        new = []
        for block, s in zip(self.blocks, states, strict=True):
            x, s = block(x, s)
            new.append(s)
        return self.head(self.norm(x)), new

    def step(self, token: Tensor, states: list) -> tuple[Tensor, list]:
        """One token per sequence: token (B,) -> logits (B, num_classes), new states."""
        x = self.embed(token)
        new = []
        for i, s in zip(range(len(self.blocks)), states, strict=True):
            x, s = self.block(i).step(x, s)
            new.append(s)
        return self.head(self.norm(x)), new


class WholeModel(nn.Module):
    """A whole model of your own under the protocol: ``body`` maps tokens (Tensor): [B, T] (int64) to hidden
    states [B, T, hidden], causally; a linear head gives the task's classes. Its state is the tokens seen so
    far, so ``train`` (``model=``) and ``evaluate`` take it as they take a ``Model`` (chunked evaluation runs
    the body over the prefix again: the cost grows with the length; docs/extending.md)."""

    def __init__(self, body: nn.Module, hidden: int, num_classes: int):
        super().__init__()
        self.body, self.head, self.num_classes = body, nn.Linear(hidden, num_classes), num_classes

    def init_state(self, batch: int) -> list:
        return [torch.zeros(batch, 0, dtype=torch.long, device=self.head.weight.device)]

    def forward(self, tokens: Tensor, states: list | None = None) -> tuple[Tensor, list]:
        """tokens (B, T) -> logits (B, T, num_classes), new states."""
        seen = states[0] if states else None
        full = tokens if seen is None or seen.shape[1] == 0 else torch.cat([seen, tokens], dim=1)
        h = self.body(full)[:, full.shape[1] - tokens.shape[1] :]
        return self.head(h), [full]

    def step(self, token: Tensor, states: list) -> tuple[Tensor, list]:
        logits, states = self.forward(token[:, None], states)
        return logits[:, 0], states


def build_model(cfg: ModelConfig, task) -> Model:
    """Build the model for a task (its vocabulary and number of classes)."""
    return Model(cfg, task.vocab_size, task.num_classes)
