"""The optimiser step of the training loop, in two forms with one contract.

* :class:`EagerStep` (CPU): forward, :func:`masked_loss`, a check for a non-finite loss, backward,
  gradient clipping, AdamW (``training.adamw``: torch's update on foreach ops, without importing the
  compiler), the learning-rate schedule; metrics added up on the host. On the CPU a host read costs
  nothing, so this is the plain loop.
* :class:`DeviceStep` (CUDA): the same step without any host synchronisation. The loss is the same
  :func:`masked_loss` (written without a host read), AdamW runs with a device learning rate
  (``capturable``), and the training metrics (last loss, hits, scored positions, the first step whose
  loss was not finite) accumulate in device tensors that are read only at a validation (:meth:`read`).
  With ``cuda_graphs`` each training length's step is captured once as a
  CUDA graph and replayed: one graph per length drawn, all sharing one memory pool (the graphs run one
  after another and keep no tensor alive between replays: inputs, parameters, gradients, optimiser
  state and counters live outside the pool), so memory is that of the longest length, not the sum.
  Capturing a length first runs its step once on a side stream (PyTorch's warm-up rule) and then
  restores the parameters and the optimiser state, so the replayed run is step for step the eager
  one. ``precision='bfloat16'`` runs the forward pass under bf16 autocast (the loss in float32; the
recurrences themselves take float32 inputs under autocast: ``torch.amp.custom_fwd`` on every op of
``statetrack.ops``).

``StepStats`` is what a validation reads: the last training loss, the token accuracy since the last
read, and the first non-finite step (which the training loop turns into ``TrainingDiverged``).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.config import Supervision
from statetrack.errors import UserError
from statetrack.tasks.base import Scoring
from statetrack.tasks.draws import training_batch
from statetrack.training.adamw import AdamW

if TYPE_CHECKING:
    from statetrack.config import TrainConfig
    from statetrack.tasks.base import Task

Schedule = Callable[[int], float]  # step -> learning-rate factor
IGNORE = -100  # the target of an unscored position (no class id is negative)


def masked_loss(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """The training loss: mean cross-entropy over the scored positions, in float32.

    The unscored positions are ignored by ``cross_entropy`` itself (``ignore_index``), not removed by
    boolean indexing, whose output size the host would have to read: a CUDA step, graphed or not,
    computes it without a host sync. Its value is that of the mean over the selected positions (the same
    sum when every position is scored), its gradient that mean's gradient, bit for bit.

    Args:
        logits (Tensor): [B, T, C] scores (any float dtype; the loss is taken in float32).
        targets (Tensor): [B, T] class ids.
        mask (Tensor): [B, T] bool, True where a position is scored.

    Returns:
        Tensor: [] the mean loss (0 when nothing is scored).
    """
    scored = targets.flatten().masked_fill(~mask.flatten(), IGNORE)
    total = F.cross_entropy(logits.float().flatten(0, 1), scored, ignore_index=IGNORE, reduction="sum")
    return total / mask.sum().clamp_min(1)


class TrainingDiverged(RuntimeError):
    def __init__(self, step: int, loss: float, reason: str | None = None):
        super().__init__(reason or f"loss became {loss} at step {step}")
        self.step, self.loss = step, loss


@dataclass
class StepStats:
    loss: float  # the loss of the last step
    hits: int  # right predictions at scored positions since the last read
    total: int  # scored positions since the last read
    bad_step: int = 0  # the first step whose loss was not finite (0: none)
    bad_loss: float = float("nan")

    @property
    def accuracy(self) -> float:
        return self.hits / self.total if self.total else float("nan")


def decay_groups(model: nn.Module, cfg: TrainConfig) -> list:
    """The trainable parameters for AdamW: a plain list, or with ``cfg.no_decay`` two groups, the second
    (names ending with one of ``no_decay``) without weight decay."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not cfg.no_decay:
        return [p for _, p in named]
    skip = [p for n, p in named if n.endswith(tuple(cfg.no_decay))]
    if not skip:
        raise UserError(f"no_decay {list(cfg.no_decay)} names no parameter of {cfg.model.layers}")
    return [
        {"params": [p for n, p in named if not n.endswith(tuple(cfg.no_decay))]},
        {"params": skip, "weight_decay": 0.0},
    ]


class EagerStep:
    """The step as plain PyTorch calls; the host reads the loss (one finite check per step)."""

    def __init__(self, model: nn.Module, cfg: TrainConfig, schedule: Schedule):
        self.model, self.clip, self.schedule, self.base_lr = model, cfg.clip, schedule, cfg.lr
        # torch.optim.AdamW's update on foreach ops, without importing the compiler (training.adamw); the
        # learning rate as LambdaLR sets it: base_lr * schedule(steps taken); no_decay's parameters in a
        # group without weight decay (decay_groups)
        self.opt = AdamW(decay_groups(model, cfg), lr=cfg.lr * schedule(0), weight_decay=cfg.weight_decay)
        self.last_loss, self.hits, self.total = torch.tensor(float("nan")), 0, 0

    def step(self, x: Tensor, y: Tensor, m: Tensor, step: int) -> None:
        logits, _ = self.model(x)
        loss = masked_loss(logits, y, m)
        if not torch.isfinite(loss):
            raise TrainingDiverged(step, float(loss.detach()))
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.opt.params, self.clip)
        self.opt.step()
        self.opt.lr = self.base_lr * self.schedule(step)
        with torch.no_grad():
            self.hits += int(((logits.argmax(-1) == y) & m).sum())
            self.total += int(m.sum())
        self.last_loss = loss.detach()

    def read(self) -> StepStats:
        out = StepStats(float(self.last_loss), self.hits, self.total)
        self.hits = self.total = 0
        return out

    def lr(self) -> float:
        return float(self.opt.lr)


class DeviceStep:
    """The step on a CUDA device, never waiting on the host (see the module docstring)."""

    def __init__(
        self,
        model: nn.Module,
        cfg: TrainConfig,
        schedule: Schedule,
        device: torch.device,
        graphs: bool = True,
    ):
        self.model, self.clip, self.schedule, self.base_lr = model, cfg.clip, schedule, cfg.lr
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.lr_t = torch.tensor(float(cfg.lr * schedule(0)), device=device)
        cuda = device.type == "cuda"  # (the CPU runs this class in the tests, without graphs)
        self.opt = torch.optim.AdamW(
            decay_groups(model, cfg),
            lr=self.lr_t,
            weight_decay=cfg.weight_decay,
            capturable=cuda,
            foreach=cuda,
        )
        self.bf16 = cfg.precision == "bfloat16"
        z = lambda dtype: torch.zeros((), dtype=dtype, device=device)  # noqa: E731
        self.count, self.first_bad = z(torch.int64), z(torch.int64)
        self.hits, self.total = z(torch.int64), z(torch.int64)
        self.loss_last, self.bad_loss = z(torch.float32), z(torch.float32)
        self.graphs_on = graphs
        self.graphs: dict[int, tuple] = {}
        self.pool = torch.cuda.graph_pool_handle() if graphs else None
        self.next_lr = float(cfg.lr * schedule(0))

    # -- the step's work, the same eagerly and inside a graph -------------------------------------------
    def _body(self, x: Tensor, y: Tensor, m: Tensor) -> None:
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with ctx:
            logits, _ = self.model(x)
        loss = masked_loss(logits, y, m)
        for p in self.params:  # gradients stay where they are (outside the graphs' pool)
            if p.grad is not None:
                p.grad.zero_()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip, foreach=True)
        self.opt.step()
        with torch.no_grad():
            self.count.add_(1)
            bad = ~torch.isfinite(loss)
            first = (self.first_bad == 0) & bad
            self.first_bad.copy_(torch.where(first, self.count, self.first_bad))
            self.bad_loss.copy_(torch.where(first, loss.detach(), self.bad_loss))
            self.loss_last.copy_(loss.detach())
            self.hits.add_(((logits.argmax(-1) == y) & m).sum())
            self.total.add_(m.sum())

    def _snapshot(self):
        return (
            [p.detach().clone() for p in self.params],
            {
                id(p): {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()}
                for p, s in self.opt.state.items()
            },
        )

    def _restore(self, snap: tuple[list[Tensor], dict]) -> None:
        params, state = snap
        with torch.no_grad():
            for param, value in zip(self.params, params, strict=True):
                param.copy_(value)
            for p, s in self.opt.state.items():
                old = state.get(id(p))
                for k, v in s.items():
                    if torch.is_tensor(v):
                        v.copy_(old[k]) if old is not None else v.zero_()

    def _capture(self, x, y, m):
        """Warm up this length on a side stream, undo the warm-up, then capture its step."""
        statics = tuple(t.clone() for t in (x, y, m))
        counters = (self.count, self.first_bad, self.hits, self.total, self.loss_last, self.bad_loss)
        saved = [t.clone() for t in counters]
        snap = self._snapshot()
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._body(*statics)
            torch.cuda.current_stream().wait_stream(side)
            self._restore(snap)
            graph = torch.cuda.CUDAGraph()
            # thread_local: the batch thread may pin memory while this thread captures
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                self._body(*statics)
        finally:  # capturing runs nothing; the warm-up is undone: weights, optimiser and counters as before
            self._restore(snap)
            for t, v in zip(counters, saved, strict=True):
                t.copy_(v)
        return graph, statics

    def step(self, x: Tensor, y: Tensor, m: Tensor, step: int) -> None:
        self.lr_t.fill_(self.base_lr * self.schedule(step - 1))
        self.next_lr = self.base_lr * self.schedule(step)
        if not self.graphs_on:
            self._body(x, y, m)
            return
        n = x.shape[1]
        if n not in self.graphs:
            try:
                self.graphs[n] = self._capture(x, y, m)
            except RuntimeError as e:  # an op that cannot be captured: this run steps eagerly instead
                warnings.warn(
                    f"CUDA graph capture failed ({str(e).splitlines()[0]}); this run trains "
                    "without graphs (still without host reads per step)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                torch.cuda.synchronize()
                self.graphs_on = False
                self._body(x, y, m)
                return
        graph, (sx, sy, sm) = self.graphs[n]
        sx.copy_(x, non_blocking=True)
        sy.copy_(y, non_blocking=True)
        sm.copy_(m, non_blocking=True)
        graph.replay()

    def read(self) -> StepStats:
        vals = torch.stack(
            [
                self.loss_last.double(),
                self.hits.double(),
                self.total.double(),
                self.first_bad.double(),
                self.bad_loss.double(),
            ]
        ).tolist()  # one host read
        self.hits.zero_()
        self.total.zero_()
        return StepStats(vals[0], int(vals[1]), int(vals[2]), int(vals[3]), vals[4])

    def lr(self) -> float:
        return self.next_lr


def make_step(
    model: nn.Module, cfg: TrainConfig, schedule: Schedule, device: torch.device
) -> EagerStep | DeviceStep:
    """EagerStep on the CPU; DeviceStep (graphs per ``cfg.cuda_graphs``) on CUDA; both minimise
    :func:`masked_loss`."""
    if device.type == "cuda":
        return DeviceStep(model, cfg, schedule, device, graphs=cfg.cuda_graphs)
    return EagerStep(model, cfg, schedule)


# -- batches ---------------------------------------------------------------------------------------------
#: a training batch: inputs [B, T] (int64), targets [B, T] (int64), mask [B, T] (bool)
TrainBatch = tuple[Tensor, Tensor, Tensor]


def _each(f: Callable[[Any], Tensor], arrays: tuple[Any, Any, Any]) -> TrainBatch:
    x, y, m = arrays
    return f(x), f(y), f(m)


def batches(
    task: Task, rng: np.random.Generator, cfg: TrainConfig, device: torch.device, prefetch: int = 4
) -> Generator[TrainBatch, None, None]:
    """Training batches (x, y, mask) on ``device``: one length drawn per step from the training range (its
    top rising by stages under a length curriculum, ``TrainConfig.max_length_at``), then a batch of that
    length from the draw ``TrainConfig.train_split`` names, from ``rng`` in that order. With
    ``supervision: every`` the mask covers every position (each target is then its prefix's label). On the
    CPU they are made when asked for; on CUDA a thread makes them ahead (the same draws in the same order)
    into pinned memory, and the copies to the device do not wait."""
    lo = cfg.train_min_len
    every = cfg.supervision == Supervision.EVERY and task.scoring != Scoring.EVERY
    step = 0

    def draw() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nonlocal step
        step += 1
        n = int(rng.integers(lo, cfg.max_length_at(step) + 1))
        b = training_batch(task, cfg.train_split, rng, cfg.batch_size, n)
        return b.inputs, b.targets, np.ones_like(b.mask) if every else b.mask

    if device.type != "cuda":
        while True:
            yield _each(lambda a: torch.as_tensor(a, device=device), draw())
    q: queue.Queue = queue.Queue(maxsize=prefetch)
    stop = threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                item = _each(lambda a: torch.from_numpy(np.ascontiguousarray(a)).pin_memory(), draw())
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # noqa: BLE001 - handed to the training loop, which raises it
            q.put(e)

    thread = threading.Thread(target=work, daemon=True, name="statetrack-batches")
    thread.start()
    try:
        while True:
            item = q.get()
            if isinstance(item, BaseException):
                raise item
            yield _each(lambda a: a.to(device, non_blocking=True), item)
    finally:
        stop.set()
