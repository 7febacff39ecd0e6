"""Ctrl-C, SIGTERM and SIGHUP stop the whole job, and every run they stop is recorded ``interrupted``.

:func:`handled` (used by the command line around every command) turns SIGINT, SIGTERM and SIGHUP (the
terminal closed) into :class:`Interrupted`, a ``KeyboardInterrupt`` that remembers its signal: the runner
marks its run ``interrupted``, a sweep starts no new run, stops its workers and releases its claims, and
the command exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). A
signal the process was started with ignored (``nohup``) stays ignored. The first signal is raised; later
ones are ignored while the first is being handled, so the clean-up itself is not cut short.

Worker processes of a sweep (:func:`install_in_worker`) raise only while a run is in progress
(:func:`job`): a worker that waits for work when the terminal's Ctrl-C reaches it stays quiet and is
shut down by its parent. A worker also ends with its parent (:func:`die_with_parent`): when the sweep's
process is gone, killed with SIGKILL included, the worker records its run ``interrupted`` and exits (an
idle worker exits at once), killed outright if that takes longer than ``ORPHAN_GRACE`` seconds.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from statetrack.errors import Interrupted  # here too: signals.Interrupted is what this module raises

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: the signal a worker receives when the sweep's process ends
PARENT_DIED = signal.SIGUSR1
#: seconds an orphaned worker gets to record its run interrupted before it is killed (SIGALRM)
ORPHAN_GRACE = 10


class Orphaned(Interrupted):
    """The sweep that started this worker process is gone (its process ended, by SIGKILL too)."""

    reason = "interrupted: the sweep's process ended (killed?); run the sweep again to resume"


def exit_code(exc: BaseException) -> int:
    """128 + the signal number: 130 for Ctrl-C (and a plain KeyboardInterrupt), 143 for SIGTERM, 129 for
    SIGHUP."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def describe(exc: BaseException) -> str:
    """'interrupted by SIGTERM' (or SIGINT, SIGHUP) for the error column of an interrupted run."""
    reason = getattr(exc, "reason", None)  # Orphaned says why
    return reason or f"interrupted by {signal.Signals(getattr(exc, 'signum', signal.SIGINT)).name}"


class _State:
    raised: int | None = None  # the signal already raised in this process
    pending: int | None = None  # a signal received by a worker between runs
    in_job = False
    worker = False
    parent: int | None = None  # a worker's parent: the sweep's process
    orphaned = False
    deferring = False  # inside deferred(): a signal waits for the block's end


def _handler(signum: int, _frame: FrameType | None) -> None:
    if (_State.worker and not _State.in_job) or _State.deferring:
        _State.pending = _State.pending or signum
        return
    if _State.raised is not None:  # one interrupt at a time: its clean-up runs to the end
        return
    _State.raised = signum
    raise Interrupted(signum)


@contextmanager
def handled() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` inside the block (main thread only; elsewhere
    the block runs with the handlers it had)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was started with ignored (a background job of a script) stays ignored
    old = {s: signal.signal(s, _handler) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _State.raised = _State.pending = None
    try:
        yield
    finally:
        _restore(old)
        _State.raised = _State.pending = None


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
def job() -> Iterator[None]:
    """A run in a worker: a signal received while the worker was idle interrupts it at once."""
    _State.in_job = True
    try:
        if _State.pending is not None and _State.raised is None:
            _State.raised = _State.pending
            raise Interrupted(_State.pending)
        yield
    finally:
        _State.in_job = False
        if _State.orphaned:  # the run is recorded: nobody is left to give this worker work
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """In a worker process: receive ``PARENT_DIED`` (SIGUSR1) when the process ``parent`` ends, however it
    ends (on Linux ``prctl(PR_SET_PDEATHSIG)``, from the kernel; elsewhere a watchdog thread that looks at
    the parent every second). The handler then interrupts the run in progress, which is recorded, and
    ends the worker (:func:`_orphaned`). Call after :func:`install_in_worker`."""
    _State.parent = parent
    signal.signal(PARENT_DIED, _parent_died)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(PARENT_DIED), 0, 0, 0)
    else:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os.kill(os.getpid(), PARENT_DIED)

        threading.Thread(target=watch, name="statetrack-parent-watchdog", daemon=True).start()
    if os.getppid() != parent:  # it ended before the signal was asked for
        os.kill(os.getpid(), PARENT_DIED)


def _parent_died(signum: int, _frame: FrameType | None) -> None:
    # the kernel sends the signal when the thread that started this process ends: the parent's other
    # threads end with it within milliseconds when the process dies (this process is then the child of
    # another), while a thread that ended alone leaves the parent as it was
    deadline = time.monotonic() + 2.0
    while os.getppid() == _State.parent and time.monotonic() < deadline:
        time.sleep(0.01)
    if os.getppid() != _State.parent:
        _orphaned(signum)


def _orphaned(signum: int) -> None:
    """The parent is gone: an idle worker exits now; one in a run raises :class:`Orphaned` there (the
    runner records the run interrupted, then :func:`job` exits), and SIGALRM kills it after ORPHAN_GRACE
    seconds whatever happens."""
    if not _State.in_job:
        os._exit(1)
    if _State.orphaned:
        return
    _State.orphaned = True
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(ORPHAN_GRACE)
    _State.raised = signum
    raise Orphaned(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """A signal received inside the block is raised when the block ends (under :func:`handled`, and in a
    worker's run): around work a KeyboardInterrupt must not cut (an import that C++ code runs aborts the
    process, "terminate called ...", instead of raising). A flag, not a signal mask: a process-directed
    signal may reach any of torch's threads, and Python then runs the handler in the main thread."""
    if _State.deferring:
        yield
        return
    _State.deferring = True
    try:
        yield
    finally:
        _State.deferring = False
    signum = _State.pending
    if signum is not None and _State.raised is None and (_State.in_job or not _State.worker):
        _State.pending, _State.raised = None, signum
        raise Interrupted(signum)


@contextmanager
def spawning() -> Iterator[None]:
    """Around starting worker processes: they start with SIGINT, SIGTERM and SIGHUP ignored (until
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


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    for s, h in handlers.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)
