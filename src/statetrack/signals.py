"""Ctrl-C and SIGTERM stop the whole job, and every run they stop is recorded ``interrupted``.

:func:`handled` (used by the command line around every command) turns SIGINT and SIGTERM into
:class:`Interrupted`, a ``KeyboardInterrupt`` that remembers its signal: the runner marks its run
``interrupted``, a sweep starts no new run and stops its workers, and the command exits with 128 + the
signal number (130 for SIGINT, 143 for SIGTERM). The first signal is raised; later ones are ignored
while the first is being handled, so the clean-up itself is not cut short.

Worker processes of a sweep (:func:`install_in_worker`) raise only while a run is in progress
(:func:`job`): a worker that waits for work when the terminal's Ctrl-C reaches it stays quiet and is
shut down by its parent.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM received by this process."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    def __reduce__(self):  # from a worker process to its parent
        return (Interrupted, (self.signum,))


def exit_code(exc: BaseException) -> int:
    """128 + the signal number: 130 for Ctrl-C (and a plain KeyboardInterrupt), 143 for SIGTERM."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def describe(exc: BaseException) -> str:
    """'interrupted by SIGTERM' (or SIGINT) for the error column of an interrupted run."""
    return f"interrupted by {signal.Signals(getattr(exc, 'signum', signal.SIGINT)).name}"


class _State:
    raised: int | None = None  # the signal already raised in this process
    pending: int | None = None  # a signal received by a worker between runs
    in_job = False
    worker = False


def _handler(signum, frame):
    if _State.worker and not _State.in_job:
        _State.pending = _State.pending or signum
        return
    if _State.raised is not None:  # one interrupt at a time: its clean-up runs to the end
        return
    _State.raised = signum
    raise Interrupted(signum)


@contextmanager
def handled():
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the block (main thread only; elsewhere the
    block runs with the handlers it had)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was started with ignored (a background job of a script) stays ignored
    old = {s: signal.signal(s, _handler) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _State.raised = None
    try:
        yield
    finally:
        _restore(old)
        _State.raised = None


def received() -> int | None:
    """The signal this process received (raised, or pending in an idle worker), if any."""
    return _State.raised or _State.pending


def ignored() -> tuple[int, ...]:
    """The signals this process ignores (its workers should ignore them too)."""
    return tuple(int(s) for s in SIGNALS if signal.getsignal(s) is signal.SIG_IGN)


def install_in_worker(ignore: tuple[int, ...] = ()) -> None:
    """In a sweep's worker process: signals interrupt a run in progress, and are noted otherwise
    (those in ``ignore``, ignored by the parent, stay ignored)."""
    _State.worker = True
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN if s in ignore else _handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


@contextmanager
def job():
    """A run in a worker: a signal received while the worker was idle interrupts it at once."""
    _State.in_job = True
    try:
        if _State.pending is not None and _State.raised is None:
            _State.raised = _State.pending
            raise Interrupted(_State.pending)
        yield
    finally:
        _State.in_job = False


@contextmanager
def spawning():
    """Around starting worker processes: they start with SIGINT and SIGTERM ignored (until
    :func:`install_in_worker`), so a Ctrl-C that reaches them while they import is no traceback; this
    process holds the signals back meanwhile and receives them when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    try:
        yield
    finally:
        _restore(old)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _restore(handlers: dict) -> None:
    for s, h in handlers.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)
