"""The Task protocol: what every state-tracking task provides.

A task is tiny: a vocabulary, a number of output classes, a seeded sampler of batches of any length,
which positions are scored, and a chance level derived from the task itself (never typed in).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

import numpy as np


@dataclass
class Batch:
    """inputs (B, T) int64 token ids; targets (B, T) int64 class ids; mask (B, T) bool: scored positions."""

    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def __post_init__(self):
        assert self.inputs.shape == self.targets.shape == self.mask.shape, "batch arrays differ in shape"

    def slice(self, start: int, stop: int) -> "Batch":
        return Batch(self.inputs[:, start:stop], self.targets[:, start:stop], self.mask[:, start:stop])


class Task(ABC):
    """Base class for tasks. Subclasses set ``name``, ``vocab_size``, ``num_classes``."""

    name: str
    vocab_size: int
    num_classes: int
    #: "every" when every position carries a label (prefix tasks), "final" when only the last does.
    scoring: str = "every"
    #: "state" for state-tracking tasks (accuracy by length); "lm" for language modelling (next-token
    #: loss and bits per byte on held-out text), which the runner, evaluation and reports then use
    kind: str = "state"

    @abstractmethod
    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        """Sample ``batch_size`` sequences of exactly ``length`` tokens from ``rng``."""

    def stream_batch(self, rng: np.random.Generator, batch_size: int, length: int,
                     chunk: int) -> Iterator[Batch]:
        """Yield the same batch as ``sample_batch`` in time chunks of at most ``chunk`` steps.

        Tasks whose labels are a running state override this so that memory does not grow with
        ``length``; the default samples the whole batch and slices it.
        """
        batch = self.sample_batch(rng, batch_size, length)
        for start in range(0, length, chunk):
            yield batch.slice(start, min(start + chunk, length))

    def heldout(self, split: str) -> "Task":
        """The task on its held-out ``split`` ("validation" or "test"). A generated task draws fresh
        sequences from a seeded generator, so it is its own held-out set; a corpus task reads another
        split of its corpus."""
        return self

    def label_distribution(self) -> np.ndarray | None:
        """Exact distribution of a scored label, where the task knows it (None otherwise)."""
        return None

    def chance_level(self) -> float:
        """Accuracy of always predicting the most frequent label.

        Exact where the task knows its label distribution; otherwise estimated from a fixed seeded
        sample of scored labels at a few lengths.
        """
        dist = self.label_distribution()
        if dist is not None:
            return float(np.max(dist))
        rng = np.random.default_rng(0)
        counts = np.zeros(self.num_classes)
        for length in (8, 32, 128):
            b = self.sample_batch(rng, 256, length)
            counts += np.bincount(b.targets[b.mask], minlength=self.num_classes)[: self.num_classes]
        return float(counts.max() / counts.sum())

    def params(self) -> dict:
        """The task's parameters, for listings and stored configs."""
        return {}

    def __repr__(self) -> str:
        return f"<Task {self.name}>"


def final_mask(batch_size: int, length: int) -> np.ndarray:
    mask = np.zeros((batch_size, length), dtype=bool)
    mask[:, -1] = True
    return mask
