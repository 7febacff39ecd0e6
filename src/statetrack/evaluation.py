"""Length-generalization evaluation.

At each test length L a fresh seeded batch of sequences is run through the model in chunks of
``chunk`` steps, carrying the recurrent state, so memory does not grow with L. Metrics:

- ``accuracy``: accuracy of the last scored label of each sequence, i.e. after reading all L inputs
  when the last position is scored (the quantity the papers report as "accuracy at length L");
- ``token_accuracy``: mean accuracy over all scored positions;
- ``sequence_accuracy``: fraction of sequences whose every scored position is right;
- ``scaled_accuracy``: (accuracy - chance) / (1 - chance), chance from the task.

A language-modelling task (``task.kind == "lm"``) is scored on its test split instead, by
``statetrack.lm.metrics`` (loss, bits per byte, loss by position bucket); ``evaluate_run`` chooses, and
gives an LM run the length metrics above too (of next-token prediction: ``accuracy`` at the last
position of each window, ``token_accuracy`` over all of them, chance = the most frequent token's rate).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from statetrack.config import EvalConfig
from statetrack.device import resolve_device
from statetrack.memory import release_free_memory
from statetrack.tasks import Task


@dataclass
class LengthMetrics:
    length: int
    accuracy: float
    token_accuracy: float
    sequence_accuracy: float
    scaled_accuracy: float
    chance: float
    n_sequences: int

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_row(cls, row) -> "LengthMetrics":
        """From a row of the results database's ``metrics`` table."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


def scaled(acc: float, chance: float) -> float:
    return (acc - chance) / (1 - chance) if chance < 1 else 0.0


@torch.no_grad()
def evaluate_length(model, task: Task, length: int, batch_size: int, chunk: int,
                    rng: np.random.Generator, device=None, chance: float | None = None) -> LengthMetrics:
    device = torch.device(device or next(model.parameters()).device)
    chance = task.chance_level() if chance is None else chance
    states = model.init_state(batch_size)
    correct_tok = total_tok = 0
    seq_ok = np.ones(batch_size, dtype=bool)
    last_ok = np.zeros(batch_size, dtype=bool)
    rows = np.arange(batch_size)
    for b in task.stream_batch(rng, batch_size, length, chunk):
        logits, states = model(torch.as_tensor(b.inputs, device=device), states)
        if device.type == "cpu":
            # the heap's free blocks back to the OS after each chunk: peak memory flat in length
            # (batch 64, width 64: 481, 478, 476 MiB at 5,000, 30,000, 100,000 steps; without it the
            # resident set kept growing, 1.3-1.5x from 1,000 to 100,000; statetrack.memory)
            release_free_memory()
        pred = logits.argmax(-1).cpu().numpy()
        hit = pred == b.targets
        correct_tok += int((hit & b.mask).sum())
        total_tok += int(b.mask.sum())
        seq_ok &= ~(b.mask & ~hit).any(axis=1)
        scored = b.mask.any(axis=1)
        last = b.mask.shape[1] - 1 - np.argmax(b.mask[:, ::-1], axis=1)  # last scored position per row
        last_ok = np.where(scored, hit[rows, last], last_ok)
    acc = float(last_ok.mean())
    return LengthMetrics(length, acc, correct_tok / max(total_tok, 1), float(seq_ok.mean()),
                         scaled(acc, chance), chance, batch_size)


def chunk_size(model, cfg: EvalConfig) -> int:
    """Time steps per forward call: ``cfg.chunk``, shrunk so that a chunk's activations in the model's
    largest block stay within ``cfg.memory_mb`` at ``cfg.batch_size`` sequences (memory bounded in batch
    as well as in length)."""
    per_step = cfg.batch_size * model.activation_bytes() if hasattr(model, "activation_bytes") else 0
    if per_step <= 0:
        return cfg.chunk
    return max(1, min(cfg.chunk, (cfg.memory_mb << 20) // per_step))


def evaluate(model, task: Task, cfg: EvalConfig | None = None,
             on_length: Callable[[LengthMetrics], None] | None = None) -> list[LengthMetrics]:
    """Accuracy per test length. Each length gets its own generator seeded from (cfg.seed, length)."""
    cfg = cfg or EvalConfig()
    device = resolve_device(cfg.device)
    model = model.to(device).eval()
    chance = task.chance_level()
    chunk = chunk_size(model, cfg)
    out = []
    for length in cfg.lengths:
        rng = np.random.default_rng([cfg.seed, length])
        m = evaluate_length(model, task, length, cfg.batch_size, chunk, rng, device, chance)
        out.append(m)
        if on_length:
            on_length(m)
    return out


def evaluate_run(model, task: Task, cfg: EvalConfig, on_length: Callable | None = None) -> tuple[list, list]:
    """(length metrics, LM metrics): the second is empty unless ``task.kind == "lm"``."""
    if task.kind != "lm":
        return evaluate(model, task, cfg, on_length), []
    from statetrack.lm.metrics import evaluate_lm

    device = resolve_device(cfg.device)
    model = model.to(device).eval()
    chance = task.chance_level()
    lm = evaluate_lm(model, task.heldout("test").split, task.tokenizer.token_bytes, cfg.lengths, cfg.tokens,
                     cfg.batch_size, cfg.seed, chunk_size(model, cfg), device,
                     on_length=None if on_length is None else lambda m: on_length(lm_length_metrics(m, chance)))
    return [lm_length_metrics(m, chance) for m in lm], lm


def lm_length_metrics(m, chance: float) -> LengthMetrics:
    """A language model's next-token accuracies at one context length, as length metrics."""
    return LengthMetrics(m.length, m.last_accuracy, m.token_accuracy, m.sequence_accuracy,
                         scaled(m.last_accuracy, chance), chance, m.windows)


def longest_generalized(metrics: list[LengthMetrics], threshold: float = 0.9) -> int | None:
    """Longest test length L such that accuracy >= threshold at L and at every shorter test length."""
    best = None
    for m in sorted(metrics, key=lambda m: m.length):
        if m.accuracy < threshold:
            break
        best = m.length
    return best
