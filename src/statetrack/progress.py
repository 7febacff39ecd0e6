"""Progress of the Python API (``train``, ``sweep``, ``reproduce``) in a notebook or a plain script.

Each of them takes ``progress``:

* ``None`` (the default): log lines, unless the caller passed callbacks of its own (``on_step``,
  ``on_done``: then they are the progress, as in the command line and the sweep's workers);
* ``True``: log lines; ``False``: nothing;
* a callable: called with one dict per event (``event``: ``validation``, ``run done`` or ``waiting``
  (for runs that other sweeps hold: their run ids), the numbers,
  ``elapsed`` and ``eta`` in seconds, and ``message``: the log line).

The log lines go to the ``statetrack`` logger at INFO, one per validation and one per finished run::

    train rnn on parity: step 400/2000  loss 0.512  val acc 87.5%  elapsed 12s  ETA 48s

Where the program configured no logging, a handler printing the bare lines on stderr is added to that
logger the first time; configure ``logging`` (or ``logging.getLogger("statetrack")``) to change it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from statetrack.untrusted import terminal_text

LOGGER = logging.getLogger("statetrack")

Progress = bool | Callable[[dict], None] | None


def duration(s: float) -> str:
    """``12s``, ``3m05s``, ``1h02m``."""
    s = int(round(s))
    return (
        f"{s}s"
        if s < 60
        else f"{s // 60}m{s % 60:02d}s"
        if s < 3600
        else f"{s // 3600}h{s % 3600 // 60:02d}m"
    )


class _Stderr(logging.StreamHandler):
    """Bare lines on ``sys.stderr`` as it is when each line is written (redirected, or captured)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _default_handler() -> None:
    """A stderr handler of bare lines on the statetrack logger, unless logging is configured already."""
    if LOGGER.handlers or logging.getLogger().handlers:
        return
    h = _Stderr()
    h.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.addHandler(h)
    if LOGGER.level == logging.NOTSET:
        LOGGER.setLevel(logging.INFO)


def to_stderr() -> None:
    """Warnings of the ``statetrack`` logger as bare lines on stderr, whatever logging is configured (the
    command line's choice: one handler, added once)."""
    if not any(isinstance(h, _Stderr) for h in LOGGER.handlers):
        LOGGER.addHandler(_Stderr())
    if LOGGER.level == logging.NOTSET:  # and the progress lines of long work (Ticker)
        LOGGER.setLevel(logging.INFO)


class Ticker:
    """Progress of a long loop over ``total`` items, as one INFO line on the ``statetrack`` logger every
    ``every`` seconds (none for a loop that ends sooner): ``report s: 120,000 of 1,000,000,000 runs of the
    grid read (0.012%)  elapsed 5s  ETA 11h34m``. Durations on the monotonic clock."""

    def __init__(self, title: str, total: int, what: str = "items", every: float = 5.0):
        self.title, self.total, self.what, self.every = title, total, what, every
        self.t0 = self.said = time.monotonic()

    def each(self, items):
        """The items, with a line every ``every`` seconds of the loop over them."""
        for i, x in enumerate(items):
            self.tick(i)
            yield x

    def tick(self, done: int) -> None:
        now = time.monotonic()
        if now - self.said < self.every:
            return
        self.said = now
        el = now - self.t0
        eta = el / done * (self.total - done) if done else 0.0
        _default_handler()
        LOGGER.info(
            terminal_text(
                f"{self.title}: {done:,} of {self.total:,} {self.what} ({100 * done / max(self.total, 1):.2g}%)  "
                f"elapsed {duration(el)}  ETA {duration(eta)}"
            )
        )


def warn(text: str) -> None:
    """A warning line on the ``statetrack`` logger (on stderr where the program configured no logging)."""
    _default_handler()
    LOGGER.warning(terminal_text(text))  # a label from data reaches the terminal as text, never an escape


def describe_waits(waits: list[dict]) -> str:
    """One line naming the runs a sweep waits for (``Claims.waits``): their run ids, their sweeps, and
    how old their heartbeats are (one in the future: that machine's clock is ahead, and the claim is
    taken over once its heartbeat stays unchanged for the timeout)."""

    def one(w: dict) -> str:
        run = f"run {w['run_id']}" if w["run_id"] is not None else f"key {w['key']} (no row yet)"
        if w["age"] < -1:
            beat = (
                f"heartbeat {-w['age']:.0f} s in the future (its clock is ahead); taken over if it stays "
                f"unchanged for {w['timeout']:.0f} s (unchanged for {w['unchanged']:.0f} s)"
            )
        else:
            beat = f"heartbeat {max(0.0, w['age']):.0f} s ago"
        return f"{run} (sweep {w['owner']}, {beat})"

    return f"waiting for {len(waits)} run(s) that other sweeps hold: " + "; ".join(map(one, waits))


def sink(progress: Progress, callbacks: bool) -> Callable[[dict], None] | None:
    """Where the events of one call go: ``progress`` as given, or (None) the log unless ``callbacks``."""
    if progress is None:
        progress = not callbacks
    if progress is False:
        return None
    if progress is True:
        _default_handler()
        return lambda event: LOGGER.info(event["message"])
    return progress


class TrainProgress:
    """``train``'s validations as events: ``on_step(step, info)``."""

    def __init__(self, out: Callable[[dict], None], title: str, steps: int):
        self.out, self.title, self.steps, self.t0 = out, title, steps, time.monotonic()

    def on_step(self, step: int, info: dict) -> None:
        el = time.monotonic() - self.t0
        eta = el / step * (self.steps - step) if step else 0.0
        loss = "" if info.get("train_loss") is None else f"loss {info['train_loss']:.3f}  "  # None: step 0
        msg = (
            f"{self.title}: step {step}/{self.steps}  {loss}val acc {100 * info['val_accuracy']:.1f}%  "
            f"elapsed {duration(el)}  ETA {duration(eta)}"
        )
        self.out(
            {"event": "validation", **info, "steps": self.steps, "elapsed": el, "eta": eta, "message": msg}
        )


class SweepProgress:
    """A sweep's validations and finished runs as events: ``on_step(job, step, info)``, ``on_done(job, res)``."""

    def __init__(self, out: Callable[[dict], None], title: str, runs: int):
        self.out, self.title, self.runs, self.finished, self.t0 = out, title, runs, 0, time.monotonic()

    @staticmethod
    def name(job) -> str:
        return f"{job.label} / {job.column or job.train.task} lr {job.train.lr:g} seed {job.seed}"

    def on_step(self, job, step: int, info: dict) -> None:
        loss = "" if info.get("train_loss") is None else f"loss {info['train_loss']:.3f}  "
        el = time.monotonic() - self.t0
        msg = (
            f"{self.title}: {self.name(job)}: step {step}/{job.train.steps}  {loss}val acc "
            f"{100 * info['val_accuracy']:.1f}%  elapsed {duration(el)}"
        )
        self.out(
            {
                "event": "validation",
                "run": self.name(job),
                **info,
                "steps": job.train.steps,
                "elapsed": el,
                "message": msg,
            }
        )

    def on_wait(self, waits: list[dict]) -> None:
        self.out(
            {
                "event": "waiting",
                "runs": waits,
                "elapsed": time.monotonic() - self.t0,
                "message": f"{self.title}: {describe_waits(waits)}",
            }
        )

    def on_done(self, job, res) -> None:
        self.finished += 1
        el = time.monotonic() - self.t0
        eta = el / self.finished * (self.runs - self.finished)
        longest = (res.summary or {}).get("longest_90")
        what = ("reused" if res.reused else res.status) + (f", longest >=90% {longest}" if longest else "")
        msg = (
            f"{self.title}: run {self.finished}/{self.runs} done: {self.name(job)} ({what})  "
            f"elapsed {duration(el)}  ETA {duration(eta)}"
        )
        self.out(
            {
                "event": "run done",
                "run": self.name(job),
                "run_id": res.run_id,
                "status": res.status,
                "reused": res.reused,
                "finished": self.finished,
                "runs": self.runs,
                "elapsed": el,
                "eta": eta,
                "message": msg,
            }
        )
