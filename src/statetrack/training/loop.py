"""One training loop for every model.

AdamW (its weight decay skipping the parameters ``no_decay`` names), linear warm-up then cosine decay to
``lr_min`` (one cosine, or cycles with warm restarts: ``restart_steps``, ``restart_mult``), gradient
clipping, a training length drawn per step from [train_min_len, train_max_len] (or, under a length
curriculum, from a range whose top rises in stages: ``TrainConfig.max_length_at``), the loss on the task's
scored positions or on every prefix's answer (``TrainConfig.supervision``), validation on fixed
IN-distribution sequences only (always on the task's own scored positions), early stop after ``patience``
validations without improvement, and the best validated weights kept.

Learnability is measured, not assumed: a run has *learnt* its task at the first step of the first run of
``learned_validations`` validations in a row whose accuracy is at least ``learned_accuracy`` (99% and 3
by default); ``TrainResult.learned_at_step`` records it (None: not within the steps run), and with
``stop_when_learned`` training ends there, ``steps`` being a budget. The starting
weights are validated too, before the first step (step 0 of the curve), and kept unless a later
validation beats them (higher accuracy, or equal accuracy and lower loss): training never returns a
model that validates worse than the one it started from (e.g. a hand-set construction, see
docs/theory.md section 5). The same seed gives the same numbers on the same machine.

A run diverges (:class:`TrainingDiverged`, recorded ``failed`` with the step and the reason) when a
training or validation loss is NaN or infinite, or when a validation loss exceeds
``DIVERGED_FACTOR`` (1000) times the loss of a uniform guess, ln(classes) (693 nats for two classes):
a model a thousand times worse than guessing has left any basin it could have learned in, whatever its
best validation accuracy was.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np
import torch

from statetrack.config import TrainConfig
from statetrack.model import Model, build_model
from statetrack.progress import Progress, TrainProgress, sink
from statetrack.tasks import get_task
from statetrack.tasks.base import CorpusTask, Task
from statetrack.tasks.draws import training_batch
from statetrack.training.device import resolve_device
from statetrack.training.steps import TrainingDiverged, batches, make_step

#: a validation loss above this many times ln(classes) (the loss of a uniform guess) is divergence
DIVERGED_FACTOR = 1e3


def diverged_limit(num_classes: int) -> float:
    """The validation loss above which a run has diverged: DIVERGED_FACTOR x ln(classes)."""
    return DIVERGED_FACTOR * math.log(max(2, num_classes))


class StopReason(StrEnum):
    """Why training ended."""

    BUDGET = "budget"  # every step of ``steps`` was run
    PATIENCE = "patience"  # ``patience`` validations in a row without improvement
    LEARNED = "learned"  # ``stop_when_learned`` and the task was learnt


@dataclass(frozen=True)
class CurvePoint:
    """One validation of a run's learning curve: step 0 is the starting weights, before any step (no
    training loss or accuracy yet); ``train_*`` are over the steps since the previous validation."""

    step: int
    train_loss: float | None
    train_accuracy: float | None
    val_accuracy: float
    val_loss: float
    lr: float

    def as_dict(self) -> dict[str, float | int | None]:
        """The point as the database and the ``on_step`` callbacks take it."""
        return asdict(self)


@dataclass
class TrainResult:
    model: Model
    config: TrainConfig
    best_step: int
    best_val_accuracy: float
    best_val_loss: float
    train_accuracy: float | None
    steps_run: int
    stopped_early: bool
    wall_time: float
    curve: list[CurvePoint] = field(default_factory=list)
    #: the first validation step of the first run of ``learned_validations`` validations in a row at
    #: ``learned_accuracy`` or more (in-distribution); None: not learnt within the steps run
    learned_at_step: int | None = None
    stop_reason: StopReason = StopReason.BUDGET


class Learning:
    """Tracks whether, and from which step, a run has learnt its task (``TrainConfig.learned_accuracy``
    held for ``learned_validations`` validations in a row, step 0's included)."""

    def __init__(self, cfg: TrainConfig):
        self.threshold, self.needed = cfg.learned_accuracy, cfg.learned_validations
        self.streak, self.start = 0, 0
        self.learned_at: int | None = None

    def see(self, step: int, accuracy: float) -> bool:
        """Record one validation; True once the task counts as learnt."""
        if accuracy >= self.threshold:
            self.start = step if self.streak == 0 else self.start
            self.streak += 1
        else:
            self.streak = 0
        if self.learned_at is None and self.streak >= self.needed:
            self.learned_at = self.start
        return self.learned_at is not None


def set_seed(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def validation_loss(logits, targets, mask) -> float:
    """Mean cross-entropy over the scored positions, in float64 and in a form that does not round to 0.

    ``cross_entropy`` in float32 is exactly 0 once every margin l_y - max_(j != y) l_j exceeds about 17
    (1 + e^-m rounds to 1). A model validated at loss 0 can then never improve, and early stopping
    keeps that first checkpoint however much training would still sharpen it. Here the loss of a
    position is log1p(sum_(j != y) exp(l_j - l_y)) when l_y is the largest logit (accurate until exp
    underflows, margins of about 700) and the usual log-sum-exp otherwise."""
    lg, y = logits[mask].double(), targets[mask].unsqueeze(-1)
    d = lg - lg.gather(-1, y)  # l_j - l_y
    others = d.scatter(-1, y, -math.inf)  # j != y only
    loss = torch.where(others.amax(-1) > 0, torch.logsumexp(d, -1), torch.log1p(others.exp().sum(-1)))
    return float(loss.mean())


def validation_set(task: Task, cfg: TrainConfig, device) -> list[tuple]:
    """Fixed in-distribution batches: up to 8 lengths spread over the training range, drawn from the
    task's validation split (``task.heldout``: fresh sequences for generated tasks, held-out text for
    a corpus) by the training strings' draw (``TrainConfig.train_split``)."""
    task = task.heldout("validation")
    rng = np.random.default_rng([cfg.seed, 7919])
    lo, hi = cfg.train_lengths
    lengths = sorted({int(round(x)) for x in np.linspace(lo, hi, min(8, hi - lo + 1))})
    per = max(1, cfg.val_sequences // len(lengths))
    out = []
    for n in lengths:
        b = training_batch(task, cfg.train_split, rng, per, n)
        out.append(tuple(torch.as_tensor(a, device=device) for a in (b.inputs, b.targets, b.mask)))
    return out


@torch.no_grad()
def validate(model, batches) -> tuple[float, float]:
    """(token accuracy over scored positions, mean loss) on fixed batches."""
    model.eval()
    correct = total = 0
    loss = 0.0
    for x, y, m in batches:
        logits, _ = model(x)
        loss += validation_loss(logits, y, m) * int(m.sum())
        correct += int(((logits.argmax(-1) == y) & m).sum())
        total += int(m.sum())
    model.train()
    return correct / total, loss / total


def lr_lambda(cfg: TrainConfig):
    """The learning rate at each step over ``cfg.lr``: linear warm-up, then one cosine over the remaining
    steps, or with ``restart_steps`` cosine cycles with warm restarts (torch's CosineAnnealingWarmRestarts),
    down to ``lr_min``."""
    warm = int(cfg.warmup_frac * cfg.steps)
    floor = cfg.lr_min / cfg.lr

    def f(step):
        if step < warm:
            return (step + 1) / warm
        if cfg.restart_steps is None:
            progress = min((step - warm) / max(1, cfg.steps - warm), 1.0)
        else:
            progress = restart_position(step - warm, cfg.restart_steps, cfg.restart_mult)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def restart_position(t: int, first: int, mult: int) -> float:
    """How far step ``t`` (from 0) is into its cosine cycle, in [0, 1): the cycles last ``first``,
    ``first * mult``, ``first * mult**2``, ... steps (CosineAnnealingWarmRestarts' T_0 and T_mult)."""
    length = first
    while t >= length:
        t -= length
        length *= mult
    return t / length


# long: the training loop, read top to bottom (step, validation, early stop, best weights)
def train(
    cfg: TrainConfig,
    task: Task | None = None,
    model: Model | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    on_train_step: Callable[[int], None] | None = None,
    progress: Progress = None,
) -> TrainResult:
    """Train ``cfg.model`` on ``cfg.task``; returns the best validated model and its curve.

    ``model``: the initial model (e.g. a construction's, see ``runner.initial_model``); by default a
    fresh one built from ``cfg.model``. ``on_step(step, info)`` is called after every validation (for
    progress bars and curves); ``on_train_step(step)`` after every optimiser step (it reads nothing
    from the device). ``progress``: a log line per validation by default, unless ``on_step`` or
    ``on_train_step`` is given (:mod:`statetrack.progress`). Raises TrainingDiverged if the loss becomes
    NaN or infinite.
    """
    t0 = time.monotonic()  # durations on the monotonic clock: a clock set back never makes one negative
    on_step = _logged(cfg, progress, on_step, on_train_step)
    task = task or get_task(cfg.task)
    device = resolve_device(cfg.device)
    set_seed(cfg.seed)
    if model is None:
        model = build_model(cfg.model, task)
    model = model.to(device).train()
    stepper = make_step(model, cfg, lr_lambda(cfg), device)
    rng = np.random.default_rng(cfg.seed)
    val = validation_set(task, cfg, device)
    data = batches(task, rng, cfg, device)
    limit = diverged_limit(task.num_classes)
    lm = isinstance(task, CorpusTask)  # the best checkpoint of a language model: by validation loss alone
    # step 0: the starting weights are the first candidate, kept unless a later validation beats them
    acc, vloss = validate(model, val)
    if not math.isfinite(vloss):
        raise TrainingDiverged(0, vloss)
    curve = [CurvePoint(0, None, None, acc, vloss, stepper.lr())]
    best = Best(model, acc, vloss, by_loss=lm)
    learning = Learning(cfg)
    reason = StopReason.BUDGET
    if not lm:
        learning.see(0, acc)
    if on_step:
        on_step(0, curve[0].as_dict())
    step = 0
    for step in range(1, cfg.steps + 1):
        stepper.step(*next(data), step)
        if on_train_step:
            on_train_step(step)
        if step % cfg.eval_every != 0 and step != cfg.steps:
            continue
        stats = stepper.read()
        if stats.bad_step:
            raise TrainingDiverged(stats.bad_step, stats.bad_loss)
        acc, vloss = validate(model, val)
        check_validation(step, vloss, limit)
        point = CurvePoint(step, stats.loss, stats.accuracy, acc, vloss, stepper.lr())
        curve.append(point)
        best.offer(model, step, acc, vloss)
        learned = not lm and learning.see(step, acc)
        if on_step:
            on_step(step, point.as_dict())
        if learned and cfg.stop_when_learned:
            reason = StopReason.LEARNED
            break
        if best.bad >= cfg.patience:
            reason = StopReason.PATIENCE
            break
    data.close()
    model.load_state_dict(best.state)
    model.eval()
    return TrainResult(
        model,
        cfg,
        best.step,
        best.accuracy,
        best.loss,
        curve[-1].train_accuracy,
        step,
        step < cfg.steps,
        time.monotonic() - t0,
        curve,
        learning.learned_at,
        reason,
    )


def _logged(
    cfg: TrainConfig,
    progress: Progress,
    on_step: Callable[[int, dict], None] | None,
    on_train_step: Callable[[int], None] | None,
) -> Callable[[int, dict], None] | None:
    """``on_step``, followed by a log line per validation where ``progress`` asks for one."""
    out = sink(progress, callbacks=bool(on_step or on_train_step))
    if out is None:
        return on_step
    log = TrainProgress(out, f"train {cfg.model.layers} on {cfg.task}", cfg.steps).on_step
    if on_step is None:
        return log
    first = on_step

    def both(step: int, info: dict) -> None:
        first(step, info)
        log(step, info)

    return both


def check_validation(step: int, vloss: float, limit: float) -> None:
    """Raise TrainingDiverged for a validation loss that is not finite or is over ``limit``."""
    if not math.isfinite(vloss):
        raise TrainingDiverged(step, vloss)
    if vloss > limit:
        uniform = limit / DIVERGED_FACTOR
        raise TrainingDiverged(
            step,
            vloss,
            f"validation loss {vloss:.3g} at step {step} is over "
            f"{DIVERGED_FACTOR:g} times that of a uniform guess ({uniform:.3g}): "
            "training diverged",
        )


class Best:
    """The best validated weights so far: highest validation accuracy, then lowest loss; with ``by_loss``
    (language models, whose next-token accuracy says little) lowest validation loss alone. ``bad``:
    validations since the last improvement."""

    def __init__(self, model: Model, accuracy: float, loss: float, by_loss: bool):
        self.accuracy, self.loss, self.step, self.bad, self.by_loss = accuracy, loss, 0, 0, by_loss
        self.state = copy.deepcopy(model.state_dict())

    def offer(self, model: Model, step: int, accuracy: float, loss: float) -> bool:
        """Keep the model's weights if this validation beats the best; True if it did."""
        if self.by_loss:
            improved = loss < self.loss
        else:
            improved = (accuracy, -loss) > (self.accuracy, -self.loss)
        if not improved:
            self.bad += 1
            return False
        self.accuracy, self.loss, self.step, self.bad = accuracy, loss, step, 0
        self.state = copy.deepcopy(model.state_dict())
        return True
