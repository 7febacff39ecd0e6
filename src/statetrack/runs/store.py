"""Results that last: every run in an embedded SQLite database.

Tables: ``meta`` (marks the file as ours, with its schema version), ``runs`` (full config, versions,
seed, status, checkpoint path and its sha256, the process that ran it, wall time, training summary),
``metrics`` (one row per run and test length, on the run's headline draw), ``split_metrics`` (the same
on the run's other draws, e.g. the long-range draw, per split), ``curves (validation curve), ``traces`` (probe
outputs), ``lm_metrics`` (language models: loss, bits per byte and the per-position buckets per run and
context length) and ``claims`` (which process is running which run of a sweep: ``statetrack.runs.claims``).
A database of an older schema is migrated in place by the first command that writes to it; a migration
only adds tables and columns, so older statetrack versions still read it. Written in transactions, WAL
journal, so several worker processes can share one database.

Every file is checked when it is opened, before anything is written: a file that is not SQLite, that
another program made, that is damaged (``PRAGMA quick_check`` on files up to ``QUICK_CHECK_BYTES``, and
every table and column the schema needs), or that a newer statetrack made (its schema version above
``SCHEMA_VERSION``) is refused in one line and never modified. A new database is built under a temporary
name, read back and checked, then given its name: it appears whole or not at all (a full disk leaves no
file). A database that cannot be written (disk full, read-only, no permission) is named as such, never
as damaged. Commands that only read open it with ``readonly=True``: nothing is written (``query_only``;
an older file is not migrated, the tables it lacks read as empty), and a file or folder this user cannot
write is opened read-only (``mode=ro``, or ``immutable`` when no -wal file shows a writer), so no -wal or
-shm file is left behind.

``--db`` must name a regular file or a new path (a folder, a FIFO, ``/dev/null`` or a zero-byte file is
refused in one line), and a database reached through a symbolic link is known by its real path (as SQLite
itself finds its -wal file): its checkpoints live beside the real file, and its runs' rows name it.

A database may come from others, so every row is read as data: a row whose JSON columns do not parse, are
not objects, or whose status or numbers have the wrong type is *damaged*. Listings (:meth:`Store.runs`,
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
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from pathlib import Path
from typing import Any

from statetrack.errors import UserError, did_you_mean
from statetrack.files import check_writable, file_kind, place_new, reason, sha256_file, sync_dir
from statetrack.progress import warn
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


SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT,
  study TEXT,
  label TEXT,
  model TEXT NOT NULL,
  task TEXT NOT NULL,
  seed INTEGER NOT NULL,
  train_min_len INTEGER,
  train_max_len INTEGER,
  config TEXT NOT NULL,
  versions TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT,
  checkpoint TEXT,
  created REAL NOT NULL,
  finished REAL,
  wall_time REAL,
  summary TEXT,
  uuid TEXT,
  owner TEXT,
  checkpoint_sha256 TEXT
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key);
CREATE INDEX IF NOT EXISTS runs_study ON runs(study);
CREATE TABLE IF NOT EXISTS metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  length INTEGER NOT NULL,
  accuracy REAL, token_accuracy REAL, sequence_accuracy REAL, scaled_accuracy REAL,
  chance REAL, n_sequences INTEGER,
  accuracy_low REAL, accuracy_high REAL, token_majority REAL, note TEXT, decided INTEGER,
  PRIMARY KEY (run_id, length)
);
CREATE TABLE IF NOT EXISTS split_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  split TEXT NOT NULL,
  length INTEGER NOT NULL,
  accuracy REAL, token_accuracy REAL, sequence_accuracy REAL, scaled_accuracy REAL,
  chance REAL, n_sequences INTEGER,
  accuracy_low REAL, accuracy_high REAL, token_majority REAL, note TEXT, decided INTEGER,
  PRIMARY KEY (run_id, split, length)
);
CREATE TABLE IF NOT EXISTS curves (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  step INTEGER NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS traces (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  probe TEXT NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, probe)
);
CREATE TABLE IF NOT EXISTS lm_metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  length INTEGER NOT NULL,
  windows INTEGER, tokens INTEGER, bytes INTEGER,
  loss REAL, bpb REAL, bpb_se REAL, token_accuracy REAL, last_accuracy REAL, sequence_accuracy REAL,
  answer_tokens INTEGER, answer_bpb REAL, answer_accuracy REAL,
  buckets TEXT, answer_buckets TEXT,
  PRIMARY KEY (run_id, length)
);
CREATE TABLE IF NOT EXISTS claims (
  key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  process TEXT,
  claimed_at REAL NOT NULL,
  heartbeat REAL NOT NULL
);
"""
LM_COLUMNS = (
    "length",
    "windows",
    "tokens",
    "bytes",
    "loss",
    "bpb",
    "bpb_se",
    "token_accuracy",
    "last_accuracy",
    "sequence_accuracy",
    "answer_tokens",
    "answer_bpb",
    "answer_accuracy",
    "buckets",
    "answer_buckets",
)
#: the columns of a metrics row after run_id (the fields of evaluation.LengthMetrics)
METRICS_COLUMNS = (
    "length",
    "accuracy",
    "token_accuracy",
    "sequence_accuracy",
    "scaled_accuracy",
    "chance",
    "n_sequences",
    "accuracy_low",
    "accuracy_high",
    "token_majority",
    "note",
    "decided",
)
#: columns that schema version 2 adds to an older file in place: the run's own id, the process that
#: runs it and its checkpoint's sha256; per-length chance, the accuracy's 95% interval and a note; an
#: LM's answers by distance to their decisive statement; the labels' majority share over the scored
#: positions (``token_majority``; files that stored it as ``token_chance`` keep that column, read under
#: the new name) and whether a length is decided against 90% (``decided``)
ADDED_COLUMNS = {
    "runs": (("uuid", "TEXT"), ("owner", "TEXT"), ("checkpoint_sha256", "TEXT")),
    "metrics": (
        ("accuracy_low", "REAL"),
        ("accuracy_high", "REAL"),
        ("token_majority", "REAL"),
        ("note", "TEXT"),
        ("decided", "INTEGER"),
    ),
    "split_metrics": (("token_majority", "REAL"), ("decided", "INTEGER")),
    "lm_metrics": (("answer_buckets", "TEXT"),),
}


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
        lacking = _check_file(self.path, _read_uri(self.path), str(self.path))
        self._temp_tables = [_table_sql(t, temp=True) for t in lacking] if readonly else []
        if readonly:  # an older file is read as it is: the tables it lacks read as empty
            return
        if not _writable(self.path):  # SQLite would open it read-only and leave a -wal and -shm behind
            raise UserError(
                f"results database {str(self.path)!r} cannot be written: the file or its folder is "
                "read-only (Permission denied); it was left untouched (commands that only read, "
                "such as runs and report, can use it)"
            )
        try:
            with self.transaction() as c:
                # one transaction: a process opening the file meanwhile sees all of the schema and the
                # marker that says it is ours, or none of it. The schema's CREATE ... IF NOT EXISTS adds
                # the tables of a newer version to an older file (the migration: additions only); the
                # version is then raised, never lowered
                c.executescript(
                    "BEGIN IMMEDIATE;"
                    + SCHEMA
                    + "INSERT OR IGNORE INTO meta VALUES ('application', 'statetrack');"
                    f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
                    f"UPDATE meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version' "
                    f"AND CAST(value AS INTEGER) < {SCHEMA_VERSION};"
                    "COMMIT;"
                )
                self._migrate(c)
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
            _check_file(tmp, f"file:{_uri_path(tmp)}?mode=ro&immutable=1", str(self.path))
            st = os.stat(tmp)
            placed = place_new(tmp, self.path)
            sync_dir(self.path.parent)
            return (st.st_dev, st.st_ino) if placed else None
        except UserError as e:
            raise UserError(f"cannot create results database {str(self.path)!r}: {e}") from None
        except (sqlite3.Error, OSError) as e:
            raise UserError(
                f"cannot create results database {str(self.path)!r}: "
                f"{_db_reason(self.path, e) if isinstance(e, sqlite3.Error) else reason(e)}"
            ) from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with suppress(OSError):
                    os.unlink(f"{tmp}{suffix}")

    def _migrate(self, c: sqlite3.Connection) -> None:
        """An older database gains the columns it lacks (``ADDED_COLUMNS``; NULL in old rows, nothing
        rewritten or dropped) in one transaction, looked at again inside it (another process may have
        migrated meanwhile)."""

        def missing():
            out = []
            for table, cols in ADDED_COLUMNS.items():
                have = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                out += [(table, name, kind) for name, kind in cols if name not in have]
            return out

        if not missing():
            return
        c.execute("BEGIN IMMEDIATE")
        for table, name, kind in missing():
            c.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        c.execute(
            "UPDATE meta SET value=? WHERE key='schema_version' AND CAST(value AS INTEGER) < ?",
            (str(SCHEMA_VERSION), SCHEMA_VERSION),
        )
        c.execute("COMMIT")

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with`` block is one transaction: all of it is written, or none. Rows read
        as ``sqlite3.Row``. ``immediate``: take the write lock at the start (``BEGIN IMMEDIATE``), so that
        what the block reads cannot change before it writes (a check-then-write, as claiming a run)."""
        # a reader looks again each time: a writer may have opened the file meanwhile (then its log is read)
        uri = _read_uri(self.path) if self.readonly else f"file:{_uri_path(self.path)}?mode=rw"
        try:
            con = sqlite3.connect(uri, uri=True, timeout=60)
        except sqlite3.Error as e:
            raise UserError(
                f"results database {str(self.path)!r} cannot be opened: {_db_reason(self.path, e)}"
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
            if _damaged(e):
                raise UserError(f"results database {str(self.path)!r} is damaged ({e})") from None
            if not isinstance(e, sqlite3.OperationalError):
                raise
            raise UserError(
                f"results database {str(self.path)!r}: {_db_reason(self.path, e)}; this transaction "
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

    def checkpoint_problem(self, run: dict) -> str | None:
        """None if the run's checkpoint on disk is the file the run wrote (same sha256), else one line
        saying what is wrong with it. Runs recorded before hashes were stored are not checked."""
        if not run.get("checkpoint") or not run.get("checkpoint_sha256"):
            return None
        have = sha256_file(run["checkpoint"])
        if have is None:
            return f"run {run['id']}'s checkpoint {run['checkpoint']!r} is missing or unreadable"
        if have != run["checkpoint_sha256"]:
            return (
                f"the file {run['checkpoint']!r} is not run {run['id']}'s checkpoint: its sha256 "
                f"{have[:12]}... differs from the one recorded ({run['checkpoint_sha256'][:12]}...)"
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
                    for split, ms in (split_metrics or {}).items()
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
                    for m in (lm_metrics or [])
                ],
            )
            c.executemany(
                "INSERT OR REPLACE INTO curves VALUES (?,?,?)",
                [(run_id, p["step"], json.dumps(p)) for p in (curve or [])],
            )
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
    ) -> list[dict]:
        q, args = "SELECT * FROM runs WHERE 1=1", []
        for col, val in (("study", study), ("status", status), ("key", key)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        q += " ORDER BY id"
        if limit:
            q += f" LIMIT {int(limit)}"
        with self.transaction() as c:
            rows = c.execute(q, args).fetchall()
        out = []
        for r in rows:
            try:
                out.append(self._row(r))
            except Damaged as e:  # one damaged row never hides the others: said once, left out
                warn_damaged(self.path, e)
        return out

    def run(self, run_id: int) -> dict:
        """Run ``run_id``'s row; a UserError (:class:`Damaged`) names it when it is damaged."""
        with self.transaction() as c:
            r = c.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if r is None:
            raise UserError(f"no run with id {run_id} in {str(self.path)!r}")
        return self._row(r)

    def find(self, ref: str | int) -> tuple[dict, list[int]]:
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
        labelled = [r for r in done if r["label"] == ref]
        if not labelled:
            labels = sorted({r["label"] for r in done if r["label"]})
            raise UserError(
                f"no complete run labelled {ref!r} in {str(self.path)!r}{did_you_mean(ref, labels)}; name "
                f"a run by its id, 'last' or a label: {', '.join(labels) or 'no run has a label'}"
            )
        return labelled[-1], [r["id"] for r in labelled]

    def metrics(self, run_id: int) -> list[dict]:
        with self.transaction() as c:
            rows = [
                dict(r) for r in c.execute("SELECT * FROM metrics WHERE run_id=? ORDER BY length", (run_id,))
            ]
        for r in rows:
            self._check_metrics(r, run_id, "metrics")
        return rows

    def split_metrics(self, run_id: int) -> dict[str, list[dict]]:
        """The run's metrics on its draws beside the headline one: split -> rows by length."""
        out: dict[str, list[dict]] = {}
        with self.transaction() as c:
            for r in c.execute(
                "SELECT * FROM split_metrics WHERE run_id=? ORDER BY split, length", (run_id,)
            ):
                row = dict(r)
                self._check_metrics(row, run_id, "split_metrics")
                out.setdefault(str(row.pop("split")), []).append(row)
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

    def _row(self, r: sqlite3.Row) -> dict:
        """A ``runs`` row as a dict, its JSON columns parsed and its types checked (:class:`Damaged`)."""
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
        return d

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
        database whose rows all read). What ``statetrack runs --check`` lists."""
        out = []

        def add(run_id, table, problem):
            out.append({"run_id": run_id, "table": table, "problem": problem})

        with self.transaction() as c:
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
    if row.get("uuid") != run_uuid:
        return (
            f"checkpoint {str(path)!r} says it is run {run_id} of {db!r}, but that database's run {run_id} "
            "is another run"
        )
    if row.get("checkpoint_sha256") and sha256_file(path) != row["checkpoint_sha256"]:
        return (
            f"checkpoint {str(path)!r} is not the file run {run_id} of {db!r} recorded (its sha256 differs "
            "from the one in the run's row)"
        )
    return None


def _damaged(e: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file itself is bad (not a database, or corrupt)."""
    name = getattr(e, "sqlite_errorname", "") or ""
    if name:
        return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
    return not isinstance(e, sqlite3.OperationalError)


#: the tables that hold the results: a file without one of them is damaged. Every other table of the
#: schema is added to a file that lacks it (one of an older version, or written before the table existed)
RESULT_TABLES = ("meta", "runs", "metrics")
#: on open, ``PRAGMA quick_check`` (every page's structure) runs on files up to this size (about 0.1 s
#: per 64 MiB); bigger files get the schema checks only, and SQLite refuses a damaged page when it reads it
QUICK_CHECK_BYTES = 64 << 20
_quick_checked: set[tuple] = set()  # files found whole in this process: (device, inode, size, mtime)


def _uri_path(path: str | os.PathLike) -> str:
    """``path`` for an SQLite ``file:`` URI (absolute, ``?`` and ``#`` escaped)."""
    return Path(path).absolute().as_uri().removeprefix("file://")


def _read_uri(path: Path) -> str:
    """The URI a reader opens ``path`` with, so that it writes nothing and leaves no file: read-write under
    ``PRAGMA query_only`` when this user can write the file and its folder (SQLite removes the -wal and
    -shm files at the last close); otherwise read-only, ``mode=ro`` when a -wal file shows that a writer
    has the database open (its log is read), else ``mode=ro&immutable=1`` (no -shm file is created)."""
    base = f"file:{_uri_path(path)}"
    if _writable(path):
        return f"{base}?mode=rw"
    if os.path.exists(f"{path}-wal"):
        return f"{base}?mode=ro"
    return f"{base}?mode=ro&immutable=1"


def _writable(path: Path) -> bool:
    """This user can write the file and create files beside it (the -wal and -shm files)."""
    return os.access(path, os.R_OK | os.W_OK) and os.access(path.absolute().parent, os.W_OK | os.X_OK)


_SCHEMA_TABLES: dict[str, list[str]] = {}


def schema_tables() -> dict[str, list[str]]:
    """Every table of the schema and its columns."""
    if not _SCHEMA_TABLES:
        con = sqlite3.connect(":memory:")
        con.executescript(SCHEMA)
        for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        ):
            _SCHEMA_TABLES[name] = [r[1] for r in con.execute(f"PRAGMA table_info({name})")]
        con.close()
    return _SCHEMA_TABLES


def _table_sql(name: str, temp: bool = False) -> str:
    """The schema's CREATE TABLE statement of ``name`` (``temp``: a temporary table, outside the file)."""
    m = re.search(rf"CREATE TABLE IF NOT EXISTS {name} \((.*?)\n\);", SCHEMA, re.S)
    assert m, name
    return f"CREATE {'TEMP ' if temp else ''}TABLE IF NOT EXISTS {name} ({m[1]}\n)"


def _check_file(path: Path, uri: str, name: str) -> list[str]:
    """Refuse, in one line, a file that is not a statetrack database this version can use: not SQLite,
    damaged (quick_check, or a table or column the schema needs is missing), made by another program, or
    by a newer statetrack (its schema version above ``SCHEMA_VERSION``). Nothing is written: a read-write
    ``uri`` is opened under ``query_only``. Returns the tables an older file lacks (the migration adds
    them); every table for an empty file."""
    untouched = "it was left untouched"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=60)
        try:
            con.execute("PRAGMA query_only=1")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return list(schema_tables())
            app = version = None
            if "meta" in tables:
                rows = dict(
                    con.execute("SELECT key, value FROM meta WHERE key IN ('application', 'schema_version')")
                )
                app, version = rows.get("application"), rows.get("schema_version")
            if app != "statetrack":
                raise UserError(
                    f"{name!r} is an SQLite database that statetrack did not create; {untouched} "
                    "(choose another --db)"
                )
            try:
                version = int(version if version is not None else "")  # no version: the error below
            except (TypeError, ValueError):
                raise UserError(
                    f"results database {name!r} is damaged: its schema version is {version!r}, not a "
                    f"number; {untouched}"
                ) from None
            if version > SCHEMA_VERSION:
                raise UserError(
                    f"results database {name!r} has schema version {version}, written by a newer "
                    f"statetrack; this statetrack ({__version__}) reads versions up to {SCHEMA_VERSION}: "
                    f"upgrade statetrack or choose another --db; {untouched}"
                )
            added = {(t, c) for t, cols in ADDED_COLUMNS.items() for c, _ in cols}
            lacking = []
            for table, cols in schema_tables().items():
                if table not in tables:
                    if table in RESULT_TABLES:
                        raise UserError(
                            f"results database {name!r} is damaged: table {table!r} is missing; {untouched}"
                        )
                    lacking.append(table)
                    continue
                have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
                gone = [c for c in cols if c not in have and (table, c) not in added]
                if gone:
                    raise UserError(
                        f"results database {name!r} is damaged: table {table!r} lacks column "
                        f"{', '.join(map(repr, gone))}; {untouched}"
                    )
            st = os.stat(path)
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if st.st_size <= QUICK_CHECK_BYTES and ident not in _quick_checked:
                ok = con.execute("PRAGMA quick_check").fetchone()[0]
                if ok != "ok":
                    raise UserError(f"results database {name!r} is damaged ({ok}); {untouched}")
                _quick_checked.add(ident)
            return lacking
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if _damaged(e):
            name_ = getattr(e, "sqlite_errorname", "") or ""
            if name_.startswith("SQLITE_CORRUPT"):
                raise UserError(f"results database {name!r} is damaged ({e}); {untouched}") from None
            raise UserError(f"{name!r} is not a readable SQLite database ({e}); {untouched}") from None
        raise UserError(
            f"results database {name!r} cannot be opened: {_db_reason(path, e)}; {untouched}"
        ) from None


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


def _db_reason(path: Path, e: sqlite3.Error) -> str:
    """SQLite's error in words that say what to fix: a full disk, a read-only file, no permission."""
    name = getattr(e, "sqlite_errorname", "") or ""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        st = os.statvfs(folder if folder.exists() else ".")
        full = st.f_bavail == 0 or st.f_favail == 0
    except OSError:
        full = False
    if name.startswith("SQLITE_FULL") or (full and name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN"))):
        return f"No space left on device ({e})"
    if name.startswith("SQLITE_READONLY"):
        return f"the file or its folder is read-only ({e})"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"locked by another process for over 60 s ({e})"
    if name.startswith("SQLITE_CANTOPEN"):
        if not folder.is_dir():
            return f"its folder {str(folder)!r} does not exist ({e})"
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
            return f"Permission denied ({e})"
    return str(e)
