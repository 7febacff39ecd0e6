"""Runs claimed exactly once: any number of sweeps of one study on one database split the work.

Before a sweep starts a run it claims the run's key in the database's ``claims`` table, in one
``BEGIN IMMEDIATE`` transaction that checks, then writes: the key has no complete run (and, for a
sweep with ``--fresh``, none completed since the sweep started), and no live claim of another owner.
The owner is the sweep's process (``host:pid:random``); its worker processes and Ray tasks run under
its claim. While it holds claims a heartbeat thread (:class:`Heartbeat`) stamps them every
``heartbeat_interval(timeout)`` seconds (5 s for the default timeout).

A claim is live while its heartbeat is younger than the timeout (``STATETRACK_CLAIM_TIMEOUT`` seconds,
default 60) and still moves: a sweep also notes, on its own monotonic clock, when it first saw each
claim's heartbeat value, and a heartbeat that has not changed for longer than the timeout is dead however
young its time stamp says it is. So a claim left by a crashed machine whose clock ran ahead (a heartbeat
in the future) is taken over after the timeout like any other; a live owner stamps a new value every
few seconds. On the same machine a claim whose process is gone (checked by pid and process start
time, in the same pid namespace and boot) is dead at once, so a sweep restarted after a kill -9 does
not wait. A sweep that finds a dead claim takes it over and marks the dead owner's ``running`` row of
that key ``interrupted``; if the old owner was only paused (a suspended laptop) and comes back, the
database refuses to complete its row (``Store.finish_run`` completes only a ``running`` row), so a key
is never complete twice. A sweep starts by clearing the claims of owners that are gone
(:meth:`Claims.clear_dead`), so none is left behind by a sweep killed with SIGKILL.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from statetrack.errors import UserError
from statetrack.runs.store import RunStatus, Store

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0


def timeout_from_env() -> float:
    try:
        return max(0.5, float(os.environ.get("STATETRACK_CLAIM_TIMEOUT", DEFAULT_TIMEOUT)))
    except ValueError:
        return DEFAULT_TIMEOUT


def heartbeat_interval(timeout: float) -> float:
    """How often a live owner stamps its claims: a sixth of the timeout, at most 5 s."""
    return max(0.1, min(5.0, timeout / 6))


# -- who we are ---------------------------------------------------------------------------------
_OWNER: dict[int, str] = {}


def owner() -> str:
    """This process as a claim owner: ``host:pid:random`` (a new one after a fork)."""
    pid = os.getpid()
    if pid not in _OWNER:
        _OWNER[pid] = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    return _OWNER[pid]


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    return stat.rpartition(")")[2].split()[19]  # field 22: start time in clock ticks since boot


def _machine() -> str | None:
    """This boot of this machine and this pid namespace: where a pid means the same process."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{ns}" if boot else None


def process_id(pid: int | None = None) -> str | None:
    """``boot/pidns/pid/start``: names one process for as long as the machine runs (Linux), else None."""
    pid = pid or os.getpid()
    where, start = _machine(), _start_time(pid)
    return f"{where}/{pid}/{start}" if where and start else None


def process_gone(process: str | None) -> bool:
    """True only when ``process`` ran on this machine (same boot, same pid namespace) and has ended."""
    if not process:
        return False
    parts = process.rsplit("/", 2)
    if len(parts) != 3 or parts[0] != _machine():
        return False
    pid, start = parts[1], parts[2]
    if not pid.isdigit():
        return False
    return _start_time(int(pid)) != start


# -- claims -------------------------------------------------------------------------------------
class ClaimState(StrEnum):
    """What a claim attempt found."""

    CLAIMED = "claimed"  # ours now: run it
    COMPLETE = RunStatus.COMPLETE.value  # a run of the key is complete (``run_id``)
    FAILED = RunStatus.FAILED.value  # another owner's run of the key failed (``run_id``)
    TAKEN = "taken"  # a live claim of another owner (``by``)


@dataclass
class Outcome:
    """What :meth:`Claims.claim` found (:class:`ClaimState`), with the run or the owner it names."""

    state: ClaimState
    run_id: int | None = None
    by: str | None = None


class Claims:
    """The claims of one owner (by default this process) on one database."""

    def __init__(self, store: Store, me: str | None = None, timeout: float | None = None):
        self.store, self.me = store, me or owner()
        self.timeout = timeout_from_env() if timeout is None else timeout
        self.process = process_id()
        #: (key, owner) -> (its heartbeat, when this process first saw that value: time.monotonic())
        self._seen: dict[tuple[str, str], tuple[float, float]] = {}

    def unchanged_for(self, row: sqlite3.Row) -> float:
        """Seconds (on this process's monotonic clock) since the heartbeat of claim ``row`` last changed,
        as far as this process has seen it (0 the first time it looks)."""
        ident, now = (row["key"], row["owner"]), time.monotonic()
        beat, since = self._seen.get(ident, (None, now))
        if beat != row["heartbeat"]:
            self._seen[ident] = (row["heartbeat"], now)
            return 0.0
        return now - since

    def dead(self, row: sqlite3.Row, now: float) -> bool:
        """Claim ``row`` is another owner's that stopped: its process ended on this machine, its heartbeat
        is older than the timeout, or it has not moved for longer than the timeout (a time stamp in the
        future, from a machine whose clock is ahead, never keeps a claim alive by itself)."""
        stalled = self.unchanged_for(row) > self.timeout  # looked at first: it notes the value seen
        return now - row["heartbeat"] > self.timeout or stalled or process_gone(row["process"])

    def claim(
        self,
        key: str,
        complete_since: float = 0.0,
        failed_since: float | None = None,
        ignore: tuple[int, ...] = (),
    ) -> Outcome:
        """Claim ``key`` unless it has a run completed at or after ``complete_since``, a run another owner
        failed at or after ``failed_since``, or a live claim of another owner. A dead owner's claim is
        taken over. Runs of ``ignore`` (damaged rows: ``store.Damaged``) count as not there."""
        now = time.time()
        skip = f" AND id NOT IN ({','.join('?' * len(ignore))})" if ignore else ""
        with self.store.transaction(immediate=True) as c:
            done = c.execute(
                f"SELECT id FROM runs WHERE key=? AND status=? AND COALESCE(finished, 0)>=?{skip} "
                "ORDER BY id DESC LIMIT 1",
                (key, RunStatus.COMPLETE, complete_since, *ignore),
            ).fetchone()
            if done:
                return Outcome(ClaimState.COMPLETE, done["id"])
            held = c.execute("SELECT * FROM claims WHERE key=?", (key,)).fetchone()
            if held is not None and held["owner"] != self.me:
                if not self.dead(held, now):
                    return Outcome(ClaimState.TAKEN, by=held["owner"])
                c.execute(
                    "UPDATE runs SET status=?, error=?, finished=? WHERE key=? AND status=? AND owner=?",
                    (
                        RunStatus.INTERRUPTED,
                        f"interrupted: its sweep {held['owner']} stopped (claim taken over by {self.me})",
                        now,
                        key,
                        RunStatus.RUNNING,
                        held["owner"],
                    ),
                )
            elif held is None and failed_since is not None:
                last = c.execute(
                    f"SELECT id, status, owner FROM runs WHERE key=? AND COALESCE(finished, 0)>=?{skip} "
                    "ORDER BY id DESC LIMIT 1",
                    (key, failed_since, *ignore),
                ).fetchone()
                if last is not None and last["status"] == RunStatus.FAILED and last["owner"] != self.me:
                    return Outcome(ClaimState.FAILED, last["id"])
            c.execute(
                "INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?)", (key, self.me, self.process, now, now)
            )
            return Outcome(ClaimState.CLAIMED)

    def clear_dead(self) -> int:
        """Remove every claim whose owner is gone (its process ended on this machine, or its heartbeat is
        older than the timeout) and mark that owner's ``running`` rows of those keys interrupted, in one
        transaction: what a sweep killed with SIGKILL left behind. Returns the number of claims removed."""
        now = time.time()
        with self.store.transaction(immediate=True) as c:
            rows = c.execute(
                "SELECT key, owner, process, heartbeat FROM claims WHERE owner!=?", (self.me,)
            ).fetchall()
            dead = [r for r in rows if self.dead(r, now)]
            for r in dead:
                c.execute(
                    "UPDATE runs SET status=?, error=?, finished=? WHERE key=? AND status=? AND owner=?",
                    (
                        RunStatus.INTERRUPTED,
                        f"interrupted: its sweep {r['owner']} stopped (claim cleared by {self.me})",
                        now,
                        r["key"],
                        RunStatus.RUNNING,
                        r["owner"],
                    ),
                )
                c.execute("DELETE FROM claims WHERE key=? AND owner=?", (r["key"], r["owner"]))
            return len(dead)

    def held_by_others(self) -> set[str]:
        """Keys with a live claim of another owner (a read: a dead claim is not among them)."""
        now = time.time()
        with self.store.transaction() as c:
            rows = c.execute(
                "SELECT key, owner, process, heartbeat FROM claims WHERE owner!=?", (self.me,)
            ).fetchall()
        return {r["key"] for r in rows if not self.dead(r, now)}

    def waits(self, keys: Iterable[str]) -> list[dict[str, Any]]:
        """What a sweep waits for: per key of ``keys`` that another owner claims, ``key``, ``owner``,
        ``run_id`` (its row still running, or None before the row exists), ``age`` (seconds since its
        heartbeat by the time stamp: negative for one in the future), ``unchanged`` (seconds this process
        has seen the same heartbeat) and ``timeout``."""
        keys = list(keys)
        if not keys:
            return []
        now = time.time()
        with self.store.transaction() as c:
            out = []
            for k in keys:
                r = c.execute(
                    "SELECT key, owner, heartbeat FROM claims WHERE key=? AND owner!=?", (k, self.me)
                ).fetchone()
                if r is None:
                    continue
                run = c.execute(
                    "SELECT id FROM runs WHERE key=? AND owner=? AND status=? ORDER BY id DESC LIMIT 1",
                    (k, r["owner"], RunStatus.RUNNING),
                ).fetchone()
                out.append(
                    {
                        "key": k,
                        "owner": r["owner"],
                        "run_id": run["id"] if run else None,
                        "age": now - r["heartbeat"],
                        "unchanged": self.unchanged_for(r),
                        "timeout": self.timeout,
                    }
                )
        return out

    def release(self, key: str, interrupted: str | None = None) -> None:
        """Give ``key`` back; with ``interrupted`` (the reason), first end our run of it still running."""
        with self.store.transaction() as c:
            if interrupted:
                c.execute(
                    "UPDATE runs SET status=?, error=?, finished=? WHERE key=? AND status=? AND owner=?",
                    (RunStatus.INTERRUPTED, interrupted, time.time(), key, RunStatus.RUNNING, self.me),
                )
            c.execute("DELETE FROM claims WHERE key=? AND owner=?", (key, self.me))

    def release_all(self, interrupted: str | None = None) -> int:
        """Give every claim of ours back; with ``interrupted``, end our running rows first. Returns the
        number of runs marked interrupted."""
        with self.store.transaction() as c:
            n = 0
            if interrupted:
                n = c.execute(
                    "UPDATE runs SET status=?, error=?, finished=? WHERE status=? AND owner=?",
                    (RunStatus.INTERRUPTED, interrupted, time.time(), RunStatus.RUNNING, self.me),
                ).rowcount
            c.execute("DELETE FROM claims WHERE owner=?", (self.me,))
            return n

    def beat(self) -> None:
        with self.store.transaction() as c:
            c.execute("UPDATE claims SET heartbeat=? WHERE owner=?", (time.time(), self.me))


class Heartbeat:
    """A daemon thread that keeps this owner's claims live while the block runs.

    A beat that fails is logged (logger ``statetrack.runs.claims``) and counted in ``failures``; the next beat
    tries again. A locked or full database (a UserError) is expected now and then and logged as a
    warning; any other error is a bug, logged with its traceback, kept in ``error`` and raised when the
    block ends (unless the block raised), so that it is never lost."""

    def __init__(self, claims: Claims):
        self.claims = claims
        self.failures = 0
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="statetrack-heartbeat", daemon=True)

    def _loop(self) -> None:
        every = heartbeat_interval(self.claims.timeout)
        while not self._stop.wait(every):
            self.beat()

    def beat(self) -> None:
        """One beat; a failure is logged and counted (the class docstring)."""
        try:
            self.claims.beat()
        except UserError as e:  # a locked or full database: the next beat tries again
            self.failures += 1
            log.warning("heartbeat of %s failed (%d so far): %s", self.claims.me, self.failures, e)
        except Exception as e:  # a bug in beat(): logged, counted, raised when the block ends
            self.failures += 1
            self.error = self.error or e
            log.exception("heartbeat of %s failed (%d so far)", self.claims.me, self.failures)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.error is not None and exc_type is None:
            raise RuntimeError(
                f"the heartbeat failed {self.failures} times; the first error: {self.error!r}"
            ) from self.error
