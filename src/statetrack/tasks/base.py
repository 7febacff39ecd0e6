"""The Task protocol: what every state-tracking task provides.

A task is tiny: a vocabulary, a number of output classes, a seeded sampler of batches of any length
(the training draw), which positions are scored, and how its test sets are drawn.

Test sets. ``evaluate`` scores the last label of each sequence (after all L inputs) on batches from
``stream_test_batch``, which by default is the training draw. A task whose training draw would make
that label degenerate at long lengths (a constant answer scoring near 100%) declares its own test draw
(``test_draw`` says which, in words; ``test_draw_kind`` says whether it is balanced); e.g. regular
languages draw half accepted and half rejected strings at every length. ``test_unavailable(L)`` names a
length at which no test set can be drawn (no accepted string of length L): evaluation reports it as such
instead of a number. A regular task also returns its ``automaton()``, which gives the long-range test
draw (``statetrack.tasks.draws``: strings whose label the last half cannot decide). Chance at a length
is the majority share of the final label's distribution in the draw scored (``statetrack.tasks.draws``).

What a task is, is said by types, never by strings: how it is scored (:class:`Scoring`), how its test
draw relates to its training draw (:class:`TestDraw`), its algebra where it has one (``algebra()``:
:mod:`statetrack.tasks.algebraic`), and language modelling on a corpus by the class
:class:`CorpusTask` (scored by next-token loss and bits per byte instead of accuracy by length).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from statetrack.tasks.automaton import Automaton

if TYPE_CHECKING:
    from statetrack.lm.corpus import Corpus, Split
    from statetrack.lm.tokens import Tokenizer
    from statetrack.tasks.algebraic import Algebra


class Scoring(StrEnum):
    """Which positions of a sequence carry a scored label."""

    #: every position, labelled with the answer for the prefix read so far
    EVERY = "every"
    #: the last position only
    FINAL = "final"


class TestDraw(StrEnum):
    """How a task's test sequences relate to its training draw (``Task.test_draw`` says it in words)."""

    #: the training draw itself
    TRAINING = "training"
    #: the final label drawn uniformly among the classes first, each sequence uniform among those with it
    BALANCED = "balanced"
    #: a draw of the task's own
    OWN = "own"


@dataclass
class Batch:
    """inputs (B, T) int64 token ids; targets (B, T) int64 class ids; mask (B, T) bool: scored positions."""

    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def __post_init__(self) -> None:
        if not self.inputs.shape == self.targets.shape == self.mask.shape:  # a task's data, not an invariant
            raise ValueError(
                f"a batch's inputs, targets and mask differ in shape: {self.inputs.shape}, "
                f"{self.targets.shape}, {self.mask.shape}"
            )

    def slice(self, start: int, stop: int) -> Batch:
        return Batch(self.inputs[:, start:stop], self.targets[:, start:stop], self.mask[:, start:stop])


class Task(ABC):
    """Base class for tasks. Subclasses set ``name``, ``vocab_size``, ``num_classes``."""

    name: str
    vocab_size: int
    num_classes: int
    #: the positions scored: every position (prefix tasks) or the last one
    scoring: Scoring = Scoring.EVERY
    #: how each token prints (None: its id)
    symbols: Sequence[str] | None = None
    #: how each class prints (None: its id)
    label_names: Sequence[str] | None = None
    #: the length a probe of this task runs at (statetrack.runs.probes), where it has one
    default_length: int | None = None
    #: whether the target at every position is the answer for the prefix read so far (parity of the bits
    #: so far, the value of the expression so far), so that a final-scored task can be trained on every
    #: position (``TrainConfig.supervision``); False where an unscored target means something else
    prefix_labels: bool = False

    @abstractmethod
    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        """Sample ``batch_size`` sequences of exactly ``length`` tokens from ``rng``."""

    def stream_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        """Yield the same batch as ``sample_batch`` in time chunks of at most ``chunk`` steps.

        Tasks whose labels are a running state override this so that memory does not grow with
        ``length``; the default samples the whole batch and slices it.
        """
        batch = self.sample_batch(rng, batch_size, length)
        for start in range(0, length, chunk):
            yield batch.slice(start, min(start + chunk, length))

    def heldout(self, split: str) -> Task:  # noqa: ARG002 - a corpus task's override reads the split
        """The task on its held-out ``split`` ("validation" or "test"). A generated task draws fresh
        sequences from a seeded generator, so it is its own held-out set; a corpus task reads another
        split of its corpus."""
        return self

    #: how ``stream_test_batch`` draws test sequences, in words (``statetrack tasks``, ``sample``)
    test_draw: str = "the training draw"

    def stream_test_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        """The test set at ``length`` (what ``evaluate`` scores), in time chunks. Default: the training
        draw. Call ``test_unavailable(length)`` first: where it names a reason, there is no test set."""
        return self.stream_batch(rng, batch_size, length, chunk)

    def test_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        """The whole test batch of ``stream_test_batch`` at once."""
        return next(iter(self.stream_test_batch(rng, batch_size, length, length)))

    def test_unavailable(self, length: int) -> str | None:  # noqa: ARG002 - overrides read the length
        """Why no test set of this length can be drawn (e.g. no accepted string of that length), or None."""
        return None

    def label_distribution(self) -> np.ndarray | None:
        """Exact distribution of a scored label, where the task knows it (None otherwise)."""
        return None

    #: what the test draw is (:class:`TestDraw`)
    test_draw_kind: TestDraw = TestDraw.TRAINING

    def automaton(self) -> Automaton | None:
        """The finite automaton that computes the task's labels (``statetrack.tasks.automaton``), or None
        for a task that is not regular; built once. It gives exact label distributions, the long-range
        test draw and the witness families."""
        if "_automaton" not in self.__dict__:
            self.__dict__["_automaton"] = self.build_automaton()
        return self.__dict__["_automaton"]

    def build_automaton(self) -> Automaton | None:
        return None

    def algebra(self) -> Algebra | None:
        """What the task is algebraically (:mod:`statetrack.tasks.algebraic`: a group's word problem, a
        regular language, parity on a fixed input, the offset rule), for the oracle; None: no reading."""
        return None

    def chance_level(self) -> float:
        """A summary for listings only, pooled over lengths: evaluation never uses it (its chance is per
        length, from the label distribution of the draw scored; see ``statetrack.tasks.draws``).

        The most frequent label's share: exact where the task knows its label distribution; otherwise
        estimated from a fixed seeded sample of the training draw at lengths 8, 32 and 128.
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

    def params(self) -> dict[str, Any]:
        """The task's parameters, for listings and stored configs."""
        return {}

    def __repr__(self) -> str:
        return f"<Task {self.name}>"


class CorpusTask(Task):
    """Language modelling on a text corpus: next-token prediction, scored by its loss and bits per byte on
    held-out text (:mod:`statetrack.lm.metrics`) instead of accuracy by length. The runner, the evaluation
    and the reports tell it from a state-tracking task by this type."""

    corpus: Corpus
    #: the split the task reads (``heldout`` gives the others)
    split: Split
    tokenizer: Tokenizer

    @abstractmethod
    def heldout(self, split: str) -> CorpusTask:
        """The task on another split of its corpus ("validation" or "test")."""

    @abstractmethod
    def provenance(self) -> dict[str, Any]:
        """What a run's numbers were computed on: the corpus folder, its hashes, the tokenizer."""


def final_mask(batch_size: int, length: int) -> np.ndarray:
    mask = np.zeros((batch_size, length), dtype=bool)
    mask[:, -1] = True
    return mask
