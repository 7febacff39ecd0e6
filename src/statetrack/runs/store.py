# long: one class over one SQLite file, every read and write of the database in one place
"""Results that last: every run in an embedded SQLite database.

Tables: ``meta`` (marks the file as ours, with its schema version), ``runs`` (full config, versions,
seed, status, checkpoint path and its sha256, the process that ran it, wall time, training summary),
``metrics`` (one row per run and test length, on the run's headline draw), ``split_metrics`` (the same
on the run's other draws, e.g. the long-range draw, per split), ``curves (validation curve), ``traces`` (probe
outputs), ``lm_metrics`` (language models: loss, bits per byte and the per-position buckets per run and
context length) and ``claims`` (which process is running which run of a sweep: ``statetrack.runs.claims``).
A database of an older schema is migrated in place by the first command that writes to it; a migration
only adds tables and columns, so older statetrack versions still read it (the tables, their columns and
the migration: :mod:`statetrack.runs.db_schema`). Written in transactions, WAL journal, so several worker
processes can share one database.

Every file is checked when it is opened, before anything is written: a file that is not SQLite, that
another program made, that is damaged (``PRAGMA quick_check`` on files up to ``QUICK_CHECK_BYTES``, and
every table and column the schema needs), or that a newer statetrack made (its schema version above
``SCHEMA_VERSION``) is refused in one line and never modified (:mod:`statetrack.runs.file_health`). A new
database is built under a temporary name, read back and checked, then given its name: it appears whole or
not at all (a full disk leaves no file). A database that cannot be written (disk full, read-only, no
permission) is named as such, never as damaged. Commands that only read open it with ``readonly=True``:
nothing is written (``query_only``; an older file is not migrated, the tables it lacks read as empty), and
a file or folder this user cannot write is opened read-only (``mode=ro``, or ``immutable`` when no -wal
file shows a writer), so no -wal or -shm file is left behind.

``--db`` must name a regular file or a new path (a folder, a FIFO, ``/dev/null`` or a zero-byte file is
refused in one line), and a database reached through a symbolic link is known by its real path (as SQLite
itself finds its -wal file): its checkpoints live beside the real file, and its runs' rows name it.

A database is data, and no SQL it carries runs: every connection sets ``trusted_schema`` off, and a file
holding triggers or views (the schema has none) is refused by commands that write (a trigger would run on
our inserts) and listed by :meth:`Store.check` (:func:`file_health.foreign_objects`).

The readers return frozen records, their fields typed: :class:`RunRecord` (a ``runs`` row: ``Store.run``,
``runs``, ``find``) and :class:`MetricRow` (a ``metrics`` or ``split_metrics`` row); read their attributes
(``r.summary``), they take no string key. A database may come from others, so every row is read as data:
a row whose JSON columns do not parse, are not objects, or whose status or numbers have the wrong type is
*damaged*. Listings (:meth:`Store.runs`,
hence ``runs``, ``report``, a sweep's reuse) leave it out with one warning line naming its run id;
reading that run alone (:meth:`Store.run`, ``runs show``, ``rerun``) is one error line naming it; and
:meth:`Store.check` (``statetrack runs --check``) lists every damaged row of every table.

Checkpoints live beside the database, in ``<name>.checkpoints/`` (``runs/statetrack.db`` ->
``runs/statetrack.checkpoints/``), one file per run named by its id and a random id of its own
(``run3-1f0c9a2e.safetensors``), so no two runs of any two databases share a file; the row keeps the
path relative to the database's folder (the folder can be moved) and the file's sha256.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from statetrack.errors import UserError, did_you_mean
from statetrack.files import check_writable, file_kind, place_new, reason, sha256_file, sync_dir
from statetrack.progress import warn
from statetrack.runs import db_schema as schema
from statetrack.runs.db_schema import LM_COLUMNS, METRICS_COLUMNS, SCHEMA, SCHEMA_VERSION, table_sql
from statetrack.runs.file_health import (
    check_file,
    connect,
    db_reason,
    foreign_objects,
    is_damaged,
    read_uri,
    uri_path,
    writable,
)
from statetrack.untrusted import load_json
from statetrack.version import __version__

DEFAULT_DB = "runs/statetrack.db"


class RunStatus(StrEnum):
    """A run's ``status`` column. A run starts ``running`` and ends once: ``complete`` (metrics,
    checkpoint and curve written with it), ``failed`` (diverged or raised; the reason in ``error``) or
    ``interrupted`` (a signal, or its sweep gave it up)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RunRecord:
    """A row of the ``runs`` table as the store reads it (``Store.run``, ``runs``, ``find``): its JSON
    columns parsed, its types checked (a row that fails is :class:`Damaged`), its checkpoint path made
    absolute. Columns an older file lacks read as None."""

    id: int
    model: str
    task: str
    seed: int
    #: the run's whole config (``runner.stored_config``): TrainConfig's fields, ``model``, ``eval``
    config: dict[str, Any]
    status: RunStatus
    created: float
    key: str | None = None
    study: str | None = None
    label: str | None = None
    train_min_len: int | None = None
    train_max_len: int | None = None
    #: the versions and machine the run ran on (``store.versions``)
    versions: dict[str, Any] | None = None
    error: str | None = None
    checkpoint: str | None = None
    finished: float | None = None
    wall_time: float | None = None
    #: the training summary (steps run, losses, horizons, ...), once the run ended
    summary: dict[str, Any] | None = None
    uuid: str | None = None
    owner: str | None = None
    checkpoint_sha256: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (the status as its text), e.g. for JSON."""
        return {**asdict(self), "status": str(self.status)}


@dataclass(frozen=True)
class MetricRow:
    """A row of the ``metrics`` table (a run's headline draw) or of ``split_metrics`` (its other draws, the
    split being the key ``Store.split_metrics`` files it under): one test length. Columns an older file
    lacks read as None (its ``token_chance`` as ``token_majority``)."""

    run_id: int
    length: int
    accuracy: float | None = None
    token_accuracy: float | None = None
    sequence_accuracy: float | None = None
    scaled_accuracy: float | None = None
    chance: float | None = None
    n_sequences: int | None = None
    accuracy_low: float | None = None
    accuracy_high: float | None = None
    token_majority: float | None = None
    note: str | None = None
    decided: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (what ``LengthMetrics.from_row`` reads)."""
        return asdict(self)

    @classmethod
    def of(cls, row: dict) -> MetricRow:
        """From a checked row of either table (``split`` and columns this version does not know left out)."""
        if row.get("token_majority") is None and row.get("token_chance") is not None:
            row = {**row, "token_majority": row["token_chance"]}
        known: dict[str, Any] = {k: row.get(k) for k in METRIC_FIELDS}
        return cls(**known)


RUN_FIELDS = tuple(f.name for f in fields(RunRecord))
METRIC_FIELDS = tuple(f.name for f in fields(MetricRow))


def versions() -> dict:
    import numpy  # heavy: only a run record needs the versions; the store stays light
    import torch  # heavy: only a run record needs the versions; the store stays light

    return {
        "statetrack": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        # the CPU kernels torch dispatches to (AVX512, AVX2, ...): their rounding differs, and a run that
        # rounding can move (a construction started near a sharp read-out) trains differently on each
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


class Store:
    """A results database. ``Store(path)`` opens (or creates) it; methods are transactions.

    ``readonly=True`` is for commands that only read (``runs``, ``report``, ``eval``): the file is never
    written (no migration, SQLite's ``query_only``), and a file or folder this user cannot write is opened
    read-only (module docstring), leaving no ``-wal``/``-shm`` file behind."""

    #: cap on the database size in pages (tests use it to simulate a full disk)
    max_pages: int | None = None

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, create: bool = True, readonly: bool = False):
        self.path = real_path(path)
        self.readonly = readonly
        created = None
        kind = file_kind(self.path)
        if kind not in (None, "missing"):
            raise UserError(
                f"results database {str(path)!r} is {kind}, not a database file; give --db a database "
                "file or a new path"
            )
        if kind is None and _size(self.path) == 0:
            raise UserError(
                f"results database {str(path)!r} is an empty file (0 bytes), not a statetrack database; "
                "it was left untouched (remove it, or give --db another path)"
            )
        if not self.path.exists():
            if not create or readonly:
                raise UserError(f"results database {str(self.path)!r} not found")
            check_writable(self.path.parent, f"cannot create results database {str(self.path)!r}")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = self._create()
        lacking = check_file(self.path, read_uri(self.path), str(self.path), writer=not readonly)
        self._temp_tables = [table_sql(t, temp=True) for t in lacking] if readonly else []
        if readonly:  # an older file is read as it is: the tables it lacks read as empty
            return
        if not writable(self.path):  # SQLite would open it read-only and leave a -wal and -shm behind
            raise UserError(
                f"results database {str(self.path)!r} cannot be written: the file or its folder is "
                "read-only (Permission denied); it was left untouched (commands that only read, "
                "such as runs and report, can use it)"
            )
        try:
            with self.transaction() as c:
                schema.upgrade(c)
        except UserError as e:
            if created is not None:  # the file just made cannot be used (no room for its -shm): not kept
                _remove_created(self.path, created)
                raise UserError(f"cannot create results database {str(self.path)!r}: {e}") from None
            raise

    def _create(self) -> tuple[int, int] | None:
        """A new database appears whole: built under a temporary name, read back and checked, then given
        its name unless another process created it meanwhile (then that one is used). A failure (a full
        disk) leaves no file. Returns the new file's (device, inode); None when another process's won."""
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:12]}.creating")
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                # the schema is committed with a rollback journal, so a commit that does not fit fails
                # here (in WAL mode it could sit in the log and be lost by a checkpoint that fails unseen
                # at close); then the file is switched to WAL and one write transaction made, so that a
                # disk without room for the -wal and -shm files fails now, before the file has its name
                con.execute("PRAGMA synchronous=FULL")
                con.executescript(
                    "BEGIN;" + SCHEMA + "INSERT INTO meta VALUES ('application', 'statetrack');"
                    f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');COMMIT;"
                )
                if con.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
                    raise sqlite3.OperationalError("the new file could not be switched to WAL mode")
                con.executescript(
                    "BEGIN IMMEDIATE; INSERT INTO meta VALUES ('creating', '');"
                    "DELETE FROM meta WHERE key='creating'; COMMIT;"
                )
                if con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
                    raise sqlite3.OperationalError("the new file's write-ahead log could not be checkpointed")
            finally:
                con.close()
            check_file(tmp, f"file:{uri_path(tmp)}?mode=ro&immutable=1", str(self.path))
            st = os.stat(tmp)
            placed = place_new(tmp, self.path)
            sync_dir(self.path.parent)
            return (st.st_dev, st.st_ino) if placed else None
        except UserError as e:
            raise UserError(f"cannot create results database {str(self.path)!r}: {e}") from None
        except (sqlite3.Error, OSError) as e:
            raise UserError(
                f"cannot create results database {str(self.path)!r}: "
                f"{db_reason(self.path, e) if isinstance(e, sqlite3.Error) else reason(e)}"
            ) from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with suppress(OSError):
                    os.unlink(f"{tmp}{suffix}")

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with`` block is one transaction: all of it is written, or none. Rows read
        as ``sqlite3.Row``. ``immediate``: take the write lock at the start (``BEGIN IMMEDIATE``), so that
        what the block reads cannot change before it writes (a check-then-write, as claiming a run)."""
        # a reader looks again each time: a writer may have opened the file meanwhile (then its log is read)
        uri = read_uri(self.path) if self.readonly else f"file:{uri_path(self.path)}?mode=rw"
        try:
            con = connect(uri)
        except sqlite3.Error as e:
            raise UserError(
                f"results database {str(self.path)!r} cannot be opened: {db_reason(self.path, e)}"
            ) from None
        con.row_factory = sqlite3.Row
        con.text_factory = _text  # text that is not UTF-8 (another program's) reads with U+FFFD, not an error
        try:
            con.execute("PRAGMA busy_timeout=60000")
            if self.readonly:
                for sql in self._temp_tables:
                    con.execute(sql)
                con.execute("PRAGMA query_only=1")
            else:
                con.execute("PRAGMA journal_mode=WAL")
            if self.max_pages:
                con.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
            with con:
                if immediate:
                    con.execute("BEGIN IMMEDIATE")
                yield con
        except sqlite3.DatabaseError as e:  # disk full, locked past the timeout, read-only file; damage
            if is_damaged(e):
                raise UserError(f"results database {str(self.path)!r} is damaged ({e})") from None
            if not isinstance(e, sqlite3.OperationalError):
                raise
            raise UserError(
                f"results database {str(self.path)!r}: {db_reason(self.path, e)}; this transaction "
                "was rolled back, earlier results are intact"
            ) from None
        finally:
            con.close()

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        """Where this database's runs keep their checkpoints: ``<folder>/<name>.checkpoints``."""
        return self.path.parent / f"{self.path.stem}.checkpoints"

    def checkpoint_name(self, run_id: int, run_uuid: str) -> Path:
        """The file of run ``run_id``: unique to the run, whatever other database shares the folder."""
        return self.checkpoint_dir / f"run{run_id}-{run_uuid[:8]}.safetensors"

    def _stored_path(self, path: str | os.PathLike) -> str:
        """A checkpoint path as the row keeps it: relative to the database's folder when inside it."""
        p = Path(path).absolute()
        try:
            return str(p.relative_to(self.path.parent.absolute()))
        except ValueError:
            return str(p)

    def checkpoint_problem(self, run: RunRecord) -> str | None:
        """None if the run's checkpoint on disk is the file the run wrote (same sha256), else one line
        saying what is wrong with it. Runs recorded before hashes were stored are not checked."""
        if not run.checkpoint or not run.checkpoint_sha256:
            return None
        have = sha256_file(run.checkpoint)
        if have is None:
            return f"run {run.id}'s checkpoint {run.checkpoint!r} is missing or unreadable"
        if have != run.checkpoint_sha256:
            return (
                f"the file {run.checkpoint!r} is not run {run.id}'s checkpoint: its sha256 "
                f"{have[:12]}... differs from the one recorded ({run.checkpoint_sha256[:12]}...)"
            )
        return None

    # -- writing -----------------------------------------------------------------------------
    def start_run(
        self,
        config: dict,
        study: str | None = None,
        label: str | None = None,
        key: str | None = None,
        uuid: str | None = None,
        owner: str | None = None,
    ) -> int:
        """A new row with status ``running``. ``uuid``: the run's own id (its checkpoint's name);
        ``owner``: the process (or the sweep that claimed the run) that runs it."""
        import uuid as _uuid  # the parameter uuid shadows the module here

        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO runs (key, study, label, model, task, seed, train_min_len, train_max_len, config,"
                " versions, status, created, uuid, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    key,
                    study,
                    label,
                    config["model"]["layers"],
                    config["task"],
                    config["seed"],
                    config.get("train_min_len"),
                    config.get("train_max_len"),
                    json.dumps(config),
                    json.dumps(versions()),
                    RunStatus.RUNNING,
                    time.time(),
                    uuid or _uuid.uuid4().hex,
                    owner,
                ),
            )
            assert cur.lastrowid is not None  # an INSERT always sets it
            return cur.lastrowid

    def finish_run(
        self,
        run_id: int,
        metrics: list,
        checkpoint: str | None,
        wall_time: float,
        summary: dict,
        curve: list[dict] | None = None,
        checkpoint_sha256: str | None = None,
        lm_metrics: list | None = None,
        split_metrics: dict | None = None,
    ) -> bool:
        """Write metrics (and an LM's ``lm_metrics``), curve and the ``complete`` status in one
        transaction. Only a run still ``running`` is completed: returns False (and writes nothing) for a run
        already ended, e.g. one whose claim a sweep took over from a process it found dead."""
        with self.transaction() as c:
            done = c.execute(
                "UPDATE runs SET status=?, checkpoint=?, checkpoint_sha256=?, wall_time=?, finished=?,"
                " summary=? WHERE id=? AND status=?",
                (
                    RunStatus.COMPLETE,
                    self._stored_path(checkpoint) if checkpoint else None,
                    checkpoint_sha256,
                    wall_time,
                    time.time(),
                    json.dumps(summary),
                    run_id,
                    RunStatus.RUNNING,
                ),
            ).rowcount
            if not done:
                return False
            _write_results(c, run_id, metrics, split_metrics or {}, lm_metrics or [], curve or [])
            return True

    def fail_run(
        self,
        run_id: int,
        error: str,
        wall_time: float | None = None,
        summary: dict | None = None,
        status: RunStatus = RunStatus.FAILED,
    ) -> bool:
        """End a running run as ``failed`` (or ``status``, e.g. ``interrupted``) with its reason."""
        with self.transaction() as c:
            return bool(
                c.execute(
                    "UPDATE runs SET status=?, error=?, wall_time=?, finished=?, summary=? WHERE id=? AND status=?",
                    (
                        RunStatus(status),
                        error,
                        wall_time,
                        time.time(),
                        json.dumps(summary or {}),
                        run_id,
                        RunStatus.RUNNING,
                    ),
                ).rowcount
            )

    def interrupt_run(self, run_id: int, error: str, wall_time: float | None = None) -> bool:
        """A run stopped by a signal (or given up by its sweep): ``interrupted``, with the reason."""
        return self.fail_run(run_id, error, wall_time, status=RunStatus.INTERRUPTED)

    def mark_interrupted(self, key: str, before_id: int) -> int:
        """Rows of this key still ``running``, older than run ``before_id`` and recorded before runs had
        owners (claims end the others: ``statetrack.runs.claims``) -> ``interrupted`` (count)."""
        with self.transaction() as c:
            return int(
                c.execute(
                    "UPDATE runs SET status=?, error=?, finished=? "
                    "WHERE key=? AND status=? AND id<? AND owner IS NULL",
                    (
                        RunStatus.INTERRUPTED,
                        f"interrupted; superseded by run {before_id}",
                        time.time(),
                        key,
                        RunStatus.RUNNING,
                        before_id,
                    ),
                ).rowcount
            )

    def set_versions(self, run_id: int, versions: dict) -> None:
        """Record the versions of the process that actually ran the run (e.g. a Ray worker)."""
        with self.transaction() as c:
            c.execute("UPDATE runs SET versions=? WHERE id=?", (json.dumps(versions), run_id))

    def write_traces(self, run_id: int, traces: dict[str, dict]) -> None:
        with self.transaction() as c:
            c.executemany(
                "INSERT OR REPLACE INTO traces VALUES (?,?,?)",
                [(run_id, k, json.dumps(v)) for k, v in traces.items()],
            )

    def traces(self, run_id: int) -> dict[str, dict]:
        with self.transaction() as c:
            return {
                r["probe"]: self._json(r["data"], f"trace {r['probe']!r}", run_id)
                for r in c.execute("SELECT probe, data FROM traces WHERE run_id=?", (run_id,))
            }

    # -- reading -----------------------------------------------------------------------------
    def runs(
        self,
        study: str | None = None,
        status: RunStatus | None = None,
        key: str | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[RunRecord]:
        """The runs (of ``study``, with ``status``, ``key``), in id order: the first ``limit`` of them, or
        the ``last`` ones (the latest)."""
        where, args = _where(study=study, status=status, key=key)
        q = "SELECT * FROM runs" + where + (" ORDER BY id DESC" if last else " ORDER BY id")
        if n := limit or last:
            q += f" LIMIT {int(n)}"
        with self.transaction() as c:
            rows = c.execute(q, args).fetchall()
        if last:
            rows.reverse()
        out = []
        for r in rows:
            try:
                out.append(self._row(r))
            except Damaged as e:  # one damaged row never hides the others: said once, left out
                warn_damaged(self.path, e)
        return out

    def run(self, run_id: int) -> RunRecord:
        """Run ``run_id``'s row; a UserError (:class:`Damaged`) names it when it is damaged."""
        if not 0 <= run_id < 1 << 63:  # beyond SQLite's integers: no such run (not an OverflowError)
            raise UserError(f"no run with id {run_id} in {str(self.path)!r}")
        with self.transaction() as c:
            r = c.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if r is None:
            raise UserError(f"no run with id {run_id} in {str(self.path)!r}")
        return self._row(r)

    def find(self, ref: str | int) -> tuple[RunRecord, list[int]]:
        """The run that ``ref`` names: its id, ``last`` (the latest complete run) or its label (the latest
        complete run so labelled); and the ids of every complete run with that label (more than one: the
        label is ambiguous, and the caller says so). A UserError names a bad reference."""
        ref = str(ref).strip()
        if ref.isdigit():
            return self.run(int(ref)), []
        done = self.runs(status=RunStatus.COMPLETE)
        if ref == "last":
            if not done:
                raise UserError(f"no complete run in {str(self.path)!r} yet, so 'last' names none")
            return done[-1], []
        labelled = [r for r in done if r.label == ref]
        if not labelled:
            labels = sorted({r.label for r in done if r.label})
            raise UserError(
                f"no complete run labelled {ref!r} in {str(self.path)!r}{did_you_mean(ref, labels)}; name "
                f"a run by its id, 'last' or a label: {', '.join(labels) or 'no run has a label'}"
            )
        return labelled[-1], [r.id for r in labelled]

    def metrics(self, run_id: int) -> list[MetricRow]:
        """The run's metrics on its headline draw, by length."""
        return [MetricRow.of(r) for r in self._rows_by_run("metrics", [run_id]).get(run_id, [])]

    def count_runs(self, study: str | None = None, status: RunStatus | None = None) -> int:
        """How many runs (of ``study``, with ``status``) the database holds."""
        where, args = _where(study=study, status=status)
        with self.transaction() as c:
            return int(c.execute("SELECT COUNT(*) FROM runs" + where, args).fetchone()[0])

    def metrics_of(
        self, run_ids: list[int]
    ) -> tuple[dict[int, list[MetricRow]], dict[int, dict[str, list[MetricRow]]]]:
        """``metrics`` and ``split_metrics`` of many runs, a query per table (an export of 20,000 runs opened
        40,000 connections): (run id -> rows, run id -> split -> rows); a run without rows is absent."""
        plain = {
            i: [MetricRow.of(r) for r in rows] for i, rows in self._rows_by_run("metrics", run_ids).items()
        }
        split = {i: _by_split(rows) for i, rows in self._rows_by_run("split_metrics", run_ids).items()}
        return plain, split

    def split_metrics(self, run_id: int) -> dict[str, list[MetricRow]]:
        """The run's metrics on its draws beside the headline one: split -> rows by length."""
        return _by_split(self._rows_by_run("split_metrics", [run_id]).get(run_id, []))

    def _rows_by_run(self, table: str, run_ids: list[int]) -> dict[int, list[dict]]:
        """The checked rows of the metrics ``table`` ('metrics' or 'split_metrics') of the runs ``run_ids``, by
        run id, in order of (split and) length; in one transaction."""
        ids = sorted({int(i) for i in run_ids})
        order = "split, length" if table == "split_metrics" else "length"
        out: dict[int, list[dict]] = {}
        with self.transaction() as c:
            for i in range(0, len(ids), 500):  # within SQLite's limit on bound parameters
                part = ids[i : i + 500]
                marks = ",".join("?" * len(part))
                q = f"SELECT * FROM {table} WHERE run_id IN ({marks}) ORDER BY run_id, {order}"
                for r in c.execute(q, part):
                    row = dict(r)
                    self._check_metrics(row, row["run_id"], table)
                    out.setdefault(row["run_id"], []).append(row)
        return out

    def lm_metrics(self, run_id: int) -> list[dict]:
        """A language model's metrics per context length (``buckets`` decoded)."""
        with self.transaction() as c:
            rows = [
                dict(r)
                for r in c.execute("SELECT * FROM lm_metrics WHERE run_id=? ORDER BY length", (run_id,))
            ]
        for r in rows:
            r["buckets"] = self._json(r["buckets"], "buckets", run_id) if r["buckets"] else []
        return rows

    def schema_version(self) -> int:
        with self.transaction() as c:
            return int(c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    def curve(self, run_id: int) -> list[dict]:
        with self.transaction() as c:
            return [
                self._json(r["data"], "curve", run_id)
                for r in c.execute("SELECT data FROM curves WHERE run_id=? ORDER BY step", (run_id,))
            ]

    def counts(self) -> dict:
        with self.transaction() as c:
            return {
                t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("runs", "metrics", "curves")
            }

    def _json(self, text: str, what: str, run_id: object = None) -> Any:
        """A JSON column of this database, parsed within the limits of ``statetrack.untrusted``; text that
        is not JSON is a :class:`Damaged` row of run ``run_id``."""
        prefix = f"results database {str(self.path)!r}: "
        try:
            return load_json(text, f"{prefix}{what}")
        except (json.JSONDecodeError, TypeError) as e:
            raise Damaged(self.path, run_id, f"its {what} is not valid JSON ({e})") from None
        except UserError as e:  # over the limits for a document (nesting, size): damaged too, not fatal
            raise Damaged(self.path, run_id, f"its {str(e).removeprefix(prefix)}") from None

    def _row(self, r: sqlite3.Row) -> RunRecord:
        """A ``runs`` row as a record, its JSON columns parsed and its types checked (:class:`Damaged`)."""
        d = dict(r)
        run_id = d.get("id")
        for k, required in (("config", True), ("versions", False), ("summary", False)):
            if d.get(k) is None and not required:
                continue
            d[k] = self._json(d[k], k, run_id) if isinstance(d.get(k), str) else d.get(k)
            if not isinstance(d[k], dict):
                raise Damaged(self.path, run_id, f"its {k} is {_kind(d[k])}, not a JSON object")
        if d.get("status") not in set(RunStatus):
            raise Damaged(
                self.path, run_id, f"its status is {d.get('status')!r}; allowed: {', '.join(RunStatus)}"
            )
        for k, types in _RUN_TYPES.items():
            if k in d and not isinstance(d[k], types):
                raise Damaged(self.path, run_id, f"its {k} is {_kind(d[k])}")
        if d.get("checkpoint") and d.get("checkpoint_sha256") and not os.path.isabs(d["checkpoint"]):
            d["checkpoint"] = str(self.path.parent / d["checkpoint"])  # kept relative to the database
        known: dict[str, Any] = {k: d.get(k) for k in RUN_FIELDS}
        return RunRecord(**{**known, "status": RunStatus(d["status"])})

    def _check_metrics(self, row: dict, run_id: int, table: str) -> None:
        """A metrics row's numbers are numbers (or NULL): else the run is :class:`Damaged`."""
        for k, v in row.items():
            if k in ("run_id", "split", "note"):
                continue
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
                raise Damaged(
                    self.path,
                    run_id,
                    f"its {table} row at length {row.get('length')!r} has {k} {_kind(v)}, not a number",
                )

    def check(self) -> list[dict]:
        """Every damaged row of the database: ``{"run_id", "table", "problem"}`` per row (an empty list for a
        database whose rows all read), and every trigger and view the schema does not define (``run_id``
        None: SQL the file carries, which commands that write refuse). What ``statetrack runs --check``
        lists."""
        out = []

        def add(run_id, table, problem):
            out.append({"run_id": run_id, "table": table, "problem": problem})

        with self.transaction() as c:
            for kind, name in foreign_objects(c):
                add(None, name, f"a {kind} that statetrack's schema does not define (SQL from the file)")
            runs = c.execute("SELECT * FROM runs ORDER BY id").fetchall()
            metrics = {
                t: c.execute(f"SELECT * FROM {t} ORDER BY run_id").fetchall()
                for t in ("metrics", "split_metrics")
            }
            blobs = {
                t: c.execute(f"SELECT run_id, {col} AS data FROM {t} ORDER BY run_id").fetchall()
                for t, col in (("curves", "data"), ("traces", "data"), ("lm_metrics", "buckets"))
            }
        for r in runs:
            try:
                self._row(r)
            except Damaged as e:
                add(e.run_id, "runs", e.problem)
        for t, rows in metrics.items():
            for r in rows:
                try:
                    self._check_metrics(dict(r), r["run_id"], t)
                except Damaged as e:
                    add(e.run_id, t, e.problem)
        for t, rows in blobs.items():
            for r in rows:
                if r["data"] is None and t == "lm_metrics":
                    continue
                try:
                    self._json(r["data"], f"{t} data", r["run_id"])
                except Damaged as e:
                    add(e.run_id, t, e.problem)
        return out


def _write_results(
    c: sqlite3.Connection,
    run_id: int,
    metrics: list,
    split_metrics: dict,
    lm_metrics: list,
    curve: list[dict],
) -> None:
    """A completed run's rows: its metrics by test length, on its other draws by split, an LM's metrics by
    context length (buckets as JSON) and its validation curve."""
    c.executemany(
        f"INSERT OR REPLACE INTO metrics (run_id, {', '.join(METRICS_COLUMNS)}) "
        f"VALUES (?{',?' * len(METRICS_COLUMNS)})",
        [(run_id, *(getattr(m, k) for k in METRICS_COLUMNS)) for m in metrics],
    )
    c.executemany(
        f"INSERT OR REPLACE INTO split_metrics (run_id, split, {', '.join(METRICS_COLUMNS)}) "
        f"VALUES (?, ?{',?' * len(METRICS_COLUMNS)})",
        [
            (run_id, split, *(getattr(m, k) for k in METRICS_COLUMNS))
            for split, ms in split_metrics.items()
            for m in ms
        ],
    )
    c.executemany(
        f"INSERT OR REPLACE INTO lm_metrics (run_id, {', '.join(LM_COLUMNS)}) VALUES "
        f"(?{', ?' * len(LM_COLUMNS)})",
        [
            (
                run_id,
                *(
                    json.dumps(getattr(m, k)) if k in ("buckets", "answer_buckets") else getattr(m, k)
                    for k in LM_COLUMNS
                ),
            )
            for m in lm_metrics
        ],
    )
    c.executemany(
        "INSERT OR REPLACE INTO curves VALUES (?,?,?)",
        [(run_id, p["step"], json.dumps(p)) for p in curve],
    )


def _where(**cols: object) -> tuple[str, list]:
    """A WHERE clause matching each column given a value (None: any), and its arguments."""
    given = {c: v for c, v in cols.items() if v is not None}
    return " WHERE 1=1" + "".join(f" AND {c}=?" for c in given), list(given.values())


def _by_split(rows: list[dict]) -> dict[str, list[MetricRow]]:
    """Rows of ``split_metrics`` grouped by their split, in their order."""
    out: dict[str, list[MetricRow]] = {}
    for row in rows:
        out.setdefault(str(row.pop("split")), []).append(MetricRow.of(row))
    return out


class Damaged(UserError):
    """A row of a results database that cannot be read as what statetrack wrote (another program's, or a
    damaged file's): its run id and what is wrong."""

    def __init__(self, path: Path, run_id: object, problem: str) -> None:
        super().__init__(
            f"run {run_id} of {str(path)!r} is damaged: {problem} (statetrack runs --check lists "
            "every damaged row)"
        )
        self.run_id, self.problem = run_id, problem


#: the columns of a ``runs`` row and the types they must have (text where SQLite let other text in)
_RUN_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": int,
    "model": str,
    "task": str,
    "seed": int,
    "key": (str, type(None)),
    "study": (str, type(None)),
    "label": (str, type(None)),
    "train_min_len": (int, type(None)),
    "train_max_len": (int, type(None)),
    "checkpoint": (str, type(None)),
    "checkpoint_sha256": (str, type(None)),
    "uuid": (str, type(None)),
    "owner": (str, type(None)),
    "wall_time": (int, float, type(None)),
    "created": (int, float),
    "finished": (int, float, type(None)),
    "error": (str, type(None)),
}
#: the damaged rows warned of in this command (the command line starts each command with it empty)
warned: set[tuple[str, object]] = set()


def _kind(v: object) -> str:
    """A value's type in words, for a damaged row's message."""
    return "null" if v is None else f"{type(v).__name__} {str(v)[:40]!r}"


def warn_damaged(path: Path, e: Damaged) -> None:
    """One warning line per damaged row and process (a listing, a report or a sweep leaves the run out)."""
    if (str(path), e.run_id) not in warned:
        warned.add((str(path), e.run_id))
        warn(f"warning: {e}; left out")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def real_path(path: str | os.PathLike) -> Path:
    """The database's path with symbolic links resolved when there are any (as SQLite finds the -wal file
    of a linked database beside the real file); the path as given otherwise."""
    given = Path(path)
    real = Path(os.path.realpath(given))
    return given if real == Path(os.path.abspath(given)) else real


def checkpoint_of_run_problem(path: str | Path, extra: dict) -> str | None:
    """For a checkpoint whose metadata names its run and database: one line when that database records
    another file for the run (or another run under its id); None when they agree, or when the database
    or the run cannot be found (a copied file, a moved database)."""
    run_id, run_uuid = extra.get("run_id"), extra.get("run_uuid")
    if not isinstance(run_id, int) or not isinstance(run_uuid, str):
        return None
    names = [extra.get("db")]
    if isinstance(extra.get("db_name"), str):  # the database's folder moved with its checkpoints
        names.append(str(Path(path).absolute().parent.parent / Path(extra["db_name"]).name))
    db = next((n for n in names if isinstance(n, str) and Path(n).is_file()), None)
    if db is None:
        return None
    try:
        row = Store(db, readonly=True).run(run_id)
    except UserError:
        return None
    if row.uuid != run_uuid:
        return (
            f"checkpoint {str(path)!r} says it is run {run_id} of {db!r}, but that database's run {run_id} "
            "is another run"
        )
    if row.checkpoint_sha256 and sha256_file(path) != row.checkpoint_sha256:
        return (
            f"checkpoint {str(path)!r} is not the file run {run_id} of {db!r} recorded (its sha256 differs "
            "from the one in the run's row)"
        )
    return None


def _remove_created(path: Path, ident: tuple[int, int]) -> None:
    """Remove the database this process has just created (it holds the schema only) unless another file
    has taken its name meanwhile."""
    try:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) == ident:
            os.unlink(path)
            for suffix in ("-wal", "-shm"):
                with suppress(OSError):
                    os.unlink(f"{path}{suffix}")
    except OSError:
        pass
