"""Length-generalization evaluation.

At each test length L a fresh seeded batch of sequences is run through the model in chunks of
``chunk`` steps, carrying the recurrent state, so memory does not grow with L.

The sequences come from a draw of the task (``statetrack.tasks.draws``): its test draw (``test``; e.g.
half accepted and half rejected strings for a regular language) or the long-range draw (``long``: the
last half of each string leaves both labels possible, so the recent past cannot decide the label);
``EvalConfig.test_split`` says which (``test+long``: both; the first is the run's headline). Metrics:

- ``accuracy``: accuracy of the last scored label of each sequence, i.e. after reading all L inputs
  when the last position is scored (the quantity the papers report as "accuracy at length L"), with
  its Wilson 95% interval ``accuracy_low`` - ``accuracy_high`` over the ``n_sequences`` sequences;
- ``chance``: the majority share of that label's distribution in the draw at this length, i.e. the
  expected accuracy of the best constant answer: exact where the task can compute it, else over 10,000
  sequences of the same draw (``draws.label_distribution``), never the majority of the few sequences
  scored;
- ``token_majority``: the majority share of the labels over every scored position of the sequences
  scored (a property of that batch, not a chance level: no chance line is drawn from it);
- ``token_accuracy``: mean accuracy over all scored positions;
- ``sequence_accuracy``: fraction of sequences whose every scored position is right;
- ``scaled_accuracy``: (accuracy - chance) / (1 - chance): 0 for the best constant answer, 1 for a
  perfect model; None when every sequence has the same final label (a fixed-input task).

Test sets. Each (seed, split, length) has its own stream of sequences (``draws.test_rng``), so the test
sets of two lengths are independent. The number of sequences follows the interval: ``batch_size``
sequences first; while the accuracy's Wilson interval contains the 90% threshold of the
length-generalization judgement (``THRESHOLD``), as many fresh sequences again, at most
``EvalConfig.doublings`` times (default 4: up to 16 x ``batch_size``). The interval that decides is
Bonferroni-corrected over the looks (level 1 - 0.05 / (doublings + 1): 99% for 4 doublings), so the
procedure as a whole decides a length wrongly at most 5% of the time; ``decided`` records whether its
last interval excludes 90%, and a length still undecided says so in ``note`` and makes the judgement
uncertain (``uncertain_judgement``), never decided by one unlucky batch. The stored interval
``accuracy_low`` - ``accuracy_high`` stays the 95% one, over all the sequences scored.

A length at which the draw has no sequences (``draws.unavailable``, e.g. no accepted string of that
length, or a window language in the long-range draw) is not scored: its metrics are None and ``note``
says why.

A language-modelling task (a ``CorpusTask``) is scored on its test split instead, by
``statetrack.lm.metrics`` (loss, bits per byte, loss by position bucket); ``evaluate_run`` chooses, and
gives an LM run the length metrics above too (of next-token prediction: ``accuracy`` at the last
position of each window, ``token_accuracy`` over all of them, chance = the most frequent
target token's share among the tokens scored).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass

import numpy as np
import torch

from statetrack.config import EvalConfig, Split
from statetrack.errors import UserError
from statetrack.lm.metrics import evaluate_lm
from statetrack.tasks import Task, draws
from statetrack.tasks.base import CorpusTask
from statetrack.training.device import resolve_device
from statetrack.training.memory import gib, trim_if_grown
from statetrack.training.verify import draw_failures, horizons_record

#: what watches a long evaluation (:func:`watched`): called after each chunk with (length, tokens done
#: in this batch, tokens of the batch)
_WATCH: ContextVar[Callable[[int, int, int], None] | None] = ContextVar("statetrack_eval_watch", default=None)


@contextmanager
def watched(callback: Callable[[int, int, int], None]) -> Iterator[None]:
    """Within the block, every evaluation calls ``callback(length, tokens done, tokens of the batch)``
    after each chunk: what a progress line of a long evaluation (tokens, rate, ETA) is made from."""
    token = _WATCH.set(callback)
    try:
        yield
    finally:
        _WATCH.reset(token)


#: the 97.5% quantile of the standard normal distribution (two-sided 95% intervals)
Z95 = 1.959963984540054
#: the accuracy a length-generalization judgement reads (``longest_generalized``)
THRESHOLD = 0.9


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``successes / n`` (95% by default); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at p = 0 and p = 1 the bound is exactly 0 (1); the closed form leaves a rounding error there
    return (0.0 if successes == 0 else max(0.0, center - half)), (
        1.0 if successes == n else min(1.0, center + half)
    )


@dataclass
class LengthMetrics:
    length: int
    accuracy: float | None
    token_accuracy: float | None
    sequence_accuracy: float | None
    scaled_accuracy: float | None
    chance: float | None
    n_sequences: int
    accuracy_low: float | None = None  # Wilson 95% interval of accuracy (filled in when not given)
    accuracy_high: float | None = None
    token_majority: float | None = None  # the majority share of the labels at every scored position scored
    note: str | None = None  # why a length is not scored, undecided, or scaled accuracy undefined
    decided: bool | None = None  # the decision interval excludes THRESHOLD (None: not recorded)

    def __post_init__(self):
        if self.accuracy is not None and self.n_sequences and self.accuracy_low is None:
            self.accuracy_low, self.accuracy_high = wilson(
                round(self.accuracy * self.n_sequences), self.n_sequences
            )

    def as_dict(self) -> dict:
        return asdict(self)

    def interval(self, metric: str = "accuracy") -> tuple[float, float] | None:
        """The 95% interval of ``accuracy`` or, through this length's chance, of ``scaled_accuracy``
        (None for other metrics and for lengths that are not scored)."""
        if self.accuracy is None or self.accuracy_low is None or self.accuracy_high is None:
            return None
        if metric == "accuracy":
            return self.accuracy_low, self.accuracy_high
        if metric == "scaled_accuracy" and self.chance is not None:
            low, high = scaled(self.accuracy_low, self.chance), scaled(self.accuracy_high, self.chance)
            return None if low is None or high is None else (low, high)  # None: chance 1
        return None

    @classmethod
    def from_row(cls, row) -> LengthMetrics:
        """From a row of the results database's ``metrics`` table: a mapping of its columns, or a record
        with ``as_dict()`` (``runs.store.MetricRow``); columns a row lacks stay None."""
        if hasattr(row, "as_dict"):
            row = row.as_dict()
        keys = row.keys()
        got = {k: row[k] for k in cls.__dataclass_fields__ if k in keys}
        if got.get("token_majority") is None and "token_chance" in keys:  # the name older files use
            got["token_majority"] = row["token_chance"]
        if got.get("decided") is not None:
            got["decided"] = bool(got["decided"])
        return cls(**got)


def scaled(acc: float, chance: float) -> float | None:
    """(acc - chance) / (1 - chance); None when chance is 1 (every scored label the same)."""
    return (acc - chance) / (1 - chance) if chance < 1 else None


def chance_at(task: Task, length: int, split: Split = Split.TEST) -> float:
    """The majority share of the final label's distribution in the split's draw at ``length``
    (``draws.label_distribution``: exact where the task can compute it, else over 10,000 draws)."""
    dist, _ = draws.label_distribution(task, split, length)
    return float(np.max(dist))


class _Tally:
    """What the batches scored at one length add up to."""

    def __init__(self, num_classes: int):
        self.n = self.right = self.seq_ok = self.tok_right = self.tok_total = 0
        self.labels = np.zeros(num_classes, dtype=np.int64)


@torch.no_grad()
def _score_batch(
    model,
    task: Task,
    length: int,
    batch_size: int,
    chunk: int,
    rng: np.random.Generator,
    device,
    split: Split,
    tally: _Tally,
) -> None:
    """Run ``batch_size`` fresh sequences of the split's draw and add their counts to ``tally``."""
    states = model.init_state(batch_size)
    seq_ok = np.ones(batch_size, dtype=bool)
    last_ok = np.zeros(batch_size, dtype=bool)
    has_scored = np.zeros(batch_size, dtype=bool)
    rows = np.arange(batch_size)
    watch, done = _WATCH.get(), 0
    for b in draws.stream(task, split, rng, batch_size, length, chunk):
        logits, states = model(torch.as_tensor(b.inputs, device=device), states)
        if watch is not None:
            done += b.inputs.size
            watch(length, done, batch_size * length)
        if device.type == "cpu":
            # the heap's free blocks back to the OS once the resident set has grown: peak memory flat in
            # length (without it the resident set kept growing, 1.3-1.5x from 1,000 to 100,000 steps at
            # batch 64, width 64; trimming after every chunk faulted every page in again, 37% of the CPU
            # time as system time; statetrack.training.memory)
            trim_if_grown()
        pred = logits.argmax(-1).cpu().numpy()
        hit = pred == b.targets
        tally.tok_right += int((hit & b.mask).sum())
        tally.tok_total += int(b.mask.sum())
        tally.labels += np.bincount(b.targets[b.mask], minlength=task.num_classes)[: task.num_classes]
        seq_ok &= ~(b.mask & ~hit).any(axis=1)
        scored = b.mask.any(axis=1)
        last = b.mask.shape[1] - 1 - np.argmax(b.mask[:, ::-1], axis=1)  # last scored position per row
        last_ok = np.where(scored, hit[rows, last], last_ok)
        has_scored |= scored
    tally.n += int(has_scored.sum())
    tally.right += int(last_ok[has_scored].sum())
    tally.seq_ok += int(seq_ok[has_scored].sum())


def decision_z(doublings: int) -> float:
    """The z of the interval that decides a length against ``THRESHOLD`` when the sequences may be doubled
    up to ``doublings`` times: two-sided level 1 - 0.05 / (doublings + 1), a Bonferroni bound over the
    looks, so that the whole sequential procedure decides wrongly at most 5% of the time (1.96 for one
    look, 2.576 for five)."""
    return statistics.NormalDist().inv_cdf(1 - 0.025 / (doublings + 1))


def straddles(right: int, n: int, z: float, threshold: float = THRESHOLD) -> bool:
    """Whether the Wilson interval of ``right / n`` at ``z`` contains ``threshold`` strictly inside."""
    lo, hi = wilson(right, n, z)
    return lo < threshold < hi


@torch.no_grad()
def evaluate_length(
    model,
    task: Task,
    length: int,
    batch_size: int,
    chunk: int,
    rng: np.random.Generator,
    device=None,
    split: Split = Split.TEST,
    doublings: int = 0,
) -> LengthMetrics:
    """Metrics of ``model`` on ``batch_size`` sequences of the split's draw at ``length``; while the
    accuracy's interval at ``decision_z(doublings)`` contains ``THRESHOLD``, as many fresh sequences again
    (so 2, 4, ... times ``batch_size``), at most ``doublings`` times. ``decided`` says whether the last
    interval excludes the threshold."""
    split = draws.check_split(split)
    reason = draws.unavailable(task, split, length)
    if reason:
        return LengthMetrics(length, None, None, None, None, None, 0, note=reason)
    device = torch.device(device or next(model.parameters()).device)
    tally = _Tally(task.num_classes)
    z = decision_z(doublings)
    for look in range(doublings + 1):
        for _ in range(max(1, tally.n // batch_size)):  # as many sequences again, in batches of batch_size
            _score_batch(model, task, length, batch_size, chunk, rng, device, split, tally)
        if tally.n == 0 or not straddles(tally.right, tally.n, z) or look == doublings:
            break
    if tally.n == 0:
        return LengthMetrics(length, None, None, None, None, None, 0, note="no scored position")
    acc = tally.right / tally.n
    chance = chance_at(task, length, split)
    notes = []
    decided = not straddles(tally.right, tally.n, z)
    if not decided:
        lo, hi = wilson(tally.right, tally.n, z)
        notes.append(
            f"undecided at {100 * THRESHOLD:g}%: its {100 * (1 - 0.05 / (doublings + 1)):.4g}% interval "
            f"{100 * lo:.1f}-{100 * hi:.1f} after {tally.n:,} sequences contains it"
        )
    if split is Split.LONG and (few := draws.long_plan(task, length).note):
        notes.append(few)
    if chance >= 1:
        notes.append(
            "every sequence has the same final label (a constant answer is right): scaled accuracy undefined"
        )
    return LengthMetrics(
        length,
        acc,
        tally.tok_right / max(tally.tok_total, 1),
        tally.seq_ok / tally.n,
        scaled(acc, chance),
        chance,
        tally.n,
        token_majority=float(tally.labels.max() / max(tally.tok_total, 1)),
        decided=decided,
        note="; ".join(notes) or None,
    )


def _state_bytes(model) -> int:
    """Bytes of one sequence's recurrent state (the tensors of ``model.init_state(1)``; a meta-device model
    counts them without memory)."""
    stack, n = [model.init_state(1)] if hasattr(model, "init_state") else [], 0
    while stack:
        s = stack.pop()
        if isinstance(s, torch.Tensor):
            n += s.numel() * s.element_size()
        elif isinstance(s, (list, tuple)):
            stack.extend(s)
        elif isinstance(s, dict):
            stack.extend(s.values())
    return n


def check_eval_memory(model, cfg: EvalConfig, available: tuple[int, str] | None = None) -> None:
    """Refuse, before it starts, an evaluation that cannot fit: ``cfg.batch_size`` sequences' activations
    for one time step (the smallest chunk) over ``cfg.memory_mb``, or, given ``available`` (bytes, where:
    ``memory.available``), that step with the sequences' recurrent states over what is available. Counts
    the largest block's activations, the logits and the inputs, targets and masks per sequence and step."""
    if not hasattr(model, "activation_bytes"):
        return
    classes = model.head.out_features if hasattr(model.head, "out_features") else 1
    step = cfg.batch_size * (model.activation_bytes() + 4 * classes + 32)
    if step > cfg.memory_mb << 20:
        raise UserError(
            f"an evaluation batch of {cfg.batch_size:,} sequences needs {gib(step)} for one time step, over "
            f"the budget of {cfg.memory_mb:,} MiB even in chunks of one step; lower the batch (eval's "
            "--batch-size, train's --eval-batch) or raise the budget (--memory-mb, --eval-memory-mb)"
        )
    if available is not None:
        state = cfg.batch_size * _state_bytes(model)
        if step + state > available[0]:
            raise UserError(
                f"an evaluation batch of {cfg.batch_size:,} sequences needs at least {gib(step + state)} "
                f"({gib(state)} of recurrent state, {gib(step)} for one time step) and {gib(available[0])} "
                f"is {available[1]}; lower the batch (eval's --batch-size, train's --eval-batch)"
            )


def chunk_size(model, cfg: EvalConfig) -> int:
    """Time steps per forward call: ``cfg.chunk``, shrunk so that a chunk's activations in the model's
    largest block stay within ``cfg.memory_mb`` at ``cfg.batch_size`` sequences (memory bounded in batch
    as well as in length); a batch whose one step alone is over it is refused (:func:`check_eval_memory`)."""
    check_eval_memory(model, cfg)
    per_step = cfg.batch_size * model.activation_bytes() if hasattr(model, "activation_bytes") else 0
    if per_step <= 0:
        return cfg.chunk
    return max(1, min(cfg.chunk, (cfg.memory_mb << 20) // per_step))


def evaluate(
    model,
    task: Task,
    cfg: EvalConfig | None = None,
    on_length: Callable[[LengthMetrics], None] | None = None,
    split: Split | None = None,
) -> list[LengthMetrics]:
    """Accuracy per test length on the ``split`` draw (default: the first of ``cfg.test_split``). Each
    length gets its own generator seeded from (cfg.seed, split, length) (``draws.test_rng``), and up to
    ``cfg.doublings`` doublings of its sequences where the 90% judgement is undecided."""
    cfg = cfg or EvalConfig()
    split = draws.check_split(split) if split is not None else cfg.splits[0]
    device = resolve_device(cfg.device)
    model = model.to(device).eval()
    chunk = chunk_size(model, cfg)
    out = []
    for length in cfg.lengths:
        m = evaluate_length(
            model,
            task,
            length,
            cfg.batch_size,
            chunk,
            draws.test_rng(cfg.seed, split, length),
            device,
            split,
            cfg.doublings,
        )
        out.append(m)
        if on_length:
            on_length(m)
    return out


def evaluate_more(
    model, task: Task, cfg: EvalConfig, metrics: Sequence[LengthMetrics] = ()
) -> tuple[dict[str, list[LengthMetrics]], dict]:
    """What a run scores beside its headline: the metrics of every other split of ``cfg.test_split``
    ({split: metrics}), and with ``cfg.horizons`` the failure horizons up to the longest test length:
    the witness families of every pair of states (``horizon.measure_horizons``: "pairs", one row per pair,
    "family_horizon", the shortest family string it gets wrong) and the verified horizon
    (``verify.verify``: every string up to the exhaustive length, the margin-guided search, families with
    many access words and the test draws of ``metrics`` and the other splits): "horizon", the length of
    the shortest wrong string any of them found (None: none), "rests_on" (what the claim rests on, in
    words) and "verified" (each search's result). Empty for a task without an automaton; language
    models: nothing."""
    if isinstance(task, CorpusTask):
        return {}, {}
    more: dict[str, list[LengthMetrics]] = {s: evaluate(model, task, cfg, split=s) for s in cfg.splits[1:]}
    horizons: dict = {}
    if cfg.horizons and task.automaton() is not None:
        device = resolve_device(cfg.device)
        model = model.to(device).eval()
        drawn = [*metrics, *(m for ms in more.values() for m in ms)]
        horizons = horizons_record(model, task, max(cfg.lengths), draws=draw_failures(drawn), device=device)
    return more, horizons


def evaluate_run(model, task: Task, cfg: EvalConfig, on_length: Callable | None = None) -> tuple[list, list]:
    """(length metrics, LM metrics): the second is empty unless ``task`` is a ``CorpusTask``."""
    if not isinstance(task, CorpusTask):
        return evaluate(model, task, cfg, on_length), []

    device = resolve_device(cfg.device)
    model = model.to(device).eval()
    lm = evaluate_lm(
        model,
        task.heldout("test").split,
        task.tokenizer.token_bytes,
        cfg.lengths,
        cfg.tokens,
        cfg.batch_size,
        cfg.seed,
        chunk_size(model, cfg),
        device,
        on_length=None if on_length is None else lambda m: on_length(lm_length_metrics(m)),
        windows=cfg.windows,
        watch=_WATCH.get(),  # a long evaluation's progress lines (tokens, rate, ETA), as for the tasks
    )
    return [lm_length_metrics(m) for m in lm], lm


def lm_length_metrics(m) -> LengthMetrics:
    """A language model's next-token accuracies at one context length, as length metrics; chance: the
    most frequent target token's share among the tokens scored."""
    return LengthMetrics(
        m.length,
        m.last_accuracy,
        m.token_accuracy,
        m.sequence_accuracy,
        scaled(m.last_accuracy, m.last_chance),
        m.last_chance,
        m.windows,
        token_majority=m.token_majority,
    )


def longest_generalized(metrics: list[LengthMetrics], threshold: float = THRESHOLD) -> int | None:
    """Longest test length L such that accuracy >= threshold at L and at every shorter test length
    (lengths that are not scored, accuracy None, are skipped)."""
    best = None
    for m in sorted(metrics, key=lambda m: m.length):
        if m.accuracy is None:
            continue
        if m.accuracy < threshold:
            break
        best = m.length
    return best


def uncertain_judgement(
    metrics: list[LengthMetrics],
    threshold: float = THRESHOLD,
    metric: str = "accuracy",
    strict: bool = False,
    every_shorter: bool = True,
) -> bool:
    """Whether a longest-length judgement (``longest_generalized``: metric >= threshold; ``strict``:
    metric > threshold) could change within the intervals: at a length it reads (every scored length up
    to and including the first that fails; ``every_shorter`` False, the judgement that ignores shorter
    lengths: every scored length from the longest down to and including the first that passes), the
    length is undecided (``decided`` False: its decision interval contains ``THRESHOLD`` after every
    doubling) or, where no decision was recorded (another metric or threshold, an older run), the
    metric's 95% interval contains the threshold."""
    for m in sorted(metrics, key=lambda m: m.length, reverse=not every_shorter):
        value = getattr(m, metric)
        if value is None:
            continue
        if metric == "accuracy" and threshold == THRESHOLD and m.decided is not None:
            if not m.decided:
                return True
        elif (ci := m.interval(metric)) is not None and ci[0] < threshold < ci[1]:
            return True
        fails = value < threshold or (strict and value == threshold)
        if fails == every_shorter:
            break
    return False
