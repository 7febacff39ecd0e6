"""Results that last: every run in an embedded SQLite database.

Tables: ``meta`` (marks the file as ours, with its schema version), ``runs`` (full config, versions,
seed, status, checkpoint path and its sha256, the process that ran it, wall time, training summary),
``metrics`` (one row per run and test length), ``curves`` (validation curve), ``traces`` (probe
outputs), ``lm_metrics`` (language models: loss, bits per byte and the per-position buckets per run and
context length) and ``claims`` (which process is running which run of a sweep: ``statetrack.claims``).
A database of an older schema is migrated in place when opened; a migration only adds tables and
columns, so older statetrack versions still read it. Written in transactions, WAL journal, so several
worker processes can share one database. A file that is not ours, or is damaged, is refused and never
overwritten; a database that cannot be written (disk full, read-only, no permission) is named as such,
never as damaged.

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
from contextlib import contextmanager
from pathlib import Path

from statetrack.errors import UserError
from statetrack.files import check_writable, place_new, reason, sha256_file

DEFAULT_DB = "runs/statetrack.db"
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
  accuracy_low REAL, accuracy_high REAL, token_chance REAL, note TEXT,
  PRIMARY KEY (run_id, length)
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
LM_COLUMNS = ("length", "windows", "tokens", "bytes", "loss", "bpb", "bpb_se", "token_accuracy", "last_accuracy",
              "sequence_accuracy", "answer_tokens", "answer_bpb", "answer_accuracy", "buckets", "answer_buckets")
#: the columns of a metrics row after run_id (the fields of evaluation.LengthMetrics)
METRICS_COLUMNS = ("length", "accuracy", "token_accuracy", "sequence_accuracy", "scaled_accuracy", "chance",
                   "n_sequences", "accuracy_low", "accuracy_high", "token_chance", "note")
#: columns that schema version 2 adds to a version-1 file in place: the run's own id, the process that
#: runs it and its checkpoint's sha256; per-length chance, the accuracy's 95% interval and a note; an
#: LM's answers by distance to their decisive statement
ADDED_COLUMNS = {"runs": (("uuid", "TEXT"), ("owner", "TEXT"), ("checkpoint_sha256", "TEXT")),
                 "metrics": (("accuracy_low", "REAL"), ("accuracy_high", "REAL"), ("token_chance", "REAL"),
                             ("note", "TEXT")),
                 "lm_metrics": (("answer_buckets", "TEXT"),)}


def versions() -> dict:
    import numpy
    import torch

    from statetrack.version import __version__

    return {"statetrack": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "platform": platform.platform(), "machine": platform.machine(),
            "threads": torch.get_num_threads()}


class Store:
    """A results database. ``Store(path)`` opens (or creates) it; methods are transactions."""

    #: cap on the database size in pages (tests use it to simulate a full disk)
    max_pages: int | None = None

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, create: bool = True):
        self.path = Path(path)
        if self.path.exists():
            self._check_ours()
        elif not create:
            raise UserError(f"results database {str(self.path)!r} not found")
        else:
            check_writable(self.path.parent, f"cannot create results database {str(self.path)!r}")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._create()
        with self._conn() as c:
            # one transaction: a process opening the file meanwhile sees all of the schema and the
            # marker that says it is ours, or none of it. The schema's CREATE ... IF NOT EXISTS adds
            # the tables of a newer version to an older file (the migration: additions only); the
            # version is then raised, never lowered
            c.executescript("BEGIN IMMEDIATE;" + SCHEMA +
                            "INSERT OR IGNORE INTO meta VALUES ('application', 'statetrack');"
                            f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
                            f"UPDATE meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version' "
                            f"AND CAST(value AS INTEGER) < {SCHEMA_VERSION};"
                            "COMMIT;")
            self._migrate(c)

    def _create(self) -> None:
        """A new database appears whole: built under a temporary name, then given its name unless another
        process created it meanwhile (then that one is used). A failure (a full disk) leaves no file."""
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:12]}.creating")
        try:
            con = sqlite3.connect(tmp)
            try:
                con.execute("PRAGMA journal_mode=WAL")
                con.executescript("BEGIN;" + SCHEMA +
                                  "INSERT INTO meta VALUES ('application', 'statetrack');"
                                  f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');COMMIT;")
            finally:
                con.close()
            place_new(tmp, self.path)
        except (sqlite3.Error, OSError) as e:
            raise UserError(f"cannot create results database {str(self.path)!r}: "
                            f"{_db_reason(self.path, e) if isinstance(e, sqlite3.Error) else reason(e)}") from None
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(f"{tmp}{suffix}")
                except OSError:
                    pass

    def _migrate(self, c) -> None:
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
        c.execute("UPDATE meta SET value=? WHERE key='schema_version' AND CAST(value AS INTEGER) < ?",
                  (str(SCHEMA_VERSION), SCHEMA_VERSION))
        c.execute("COMMIT")

    def _check_ours(self):
        try:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                app = None
                if "meta" in tables:
                    row = con.execute("SELECT value FROM meta WHERE key='application'").fetchone()
                    app = row[0] if row else None
                ok = con.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            if _damaged(e):
                raise UserError(f"{str(self.path)!r} is not a readable SQLite database ({e}); "
                                "it was left untouched") from None
            raise UserError(f"results database {str(self.path)!r} cannot be opened: {_db_reason(self.path, e)}; "
                            "it was left untouched") from None
        if ok != "ok":
            raise UserError(f"results database {str(self.path)!r} is damaged ({ok}); it was left untouched")
        if tables and app != "statetrack":
            raise UserError(f"{str(self.path)!r} is an SQLite database that statetrack did not create; "
                            "it was left untouched (choose another --db)")

    @contextmanager
    def _conn(self):
        """A connection whose ``with`` block is one transaction: all of it is written, or none."""
        try:
            con = sqlite3.connect(self.path, timeout=60)
        except sqlite3.Error as e:
            raise UserError(f"results database {str(self.path)!r} cannot be opened: "
                            f"{_db_reason(self.path, e)}") from None
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=60000")
            if self.max_pages:
                con.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
            with con:
                yield con
        except sqlite3.OperationalError as e:  # disk full, locked past the timeout, read-only file
            raise UserError(f"results database {str(self.path)!r}: {_db_reason(self.path, e)}; this transaction "
                            "was rolled back, earlier results are intact") from None
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
            return (f"the file {run['checkpoint']!r} is not run {run['id']}'s checkpoint: its sha256 "
                    f"{have[:12]}... differs from the one recorded ({run['checkpoint_sha256'][:12]}...)")
        return None

    # -- writing -----------------------------------------------------------------------------
    def start_run(self, config: dict, study: str | None = None, label: str | None = None,
                  key: str | None = None, uuid: str | None = None, owner: str | None = None) -> int:
        """A new row with status 'running'. ``uuid``: the run's own id (its checkpoint's name);
        ``owner``: the process (or the sweep that claimed the run) that runs it."""
        import uuid as _uuid

        with self._conn() as c:
            cur = c.execute(
                "INSERT INTO runs (key, study, label, model, task, seed, train_min_len, train_max_len, config,"
                " versions, status, created, uuid, owner) VALUES (?,?,?,?,?,?,?,?,?,?, 'running', ?,?,?)",
                (key, study, label, config["model"]["layers"], config["task"], config["seed"],
                 config.get("train_min_len"), config.get("train_max_len"), json.dumps(config),
                 json.dumps(versions()), time.time(), uuid or _uuid.uuid4().hex, owner))
            return int(cur.lastrowid)

    def finish_run(self, run_id: int, metrics: list, checkpoint: str | None, wall_time: float,
                   summary: dict, curve: list[dict] | None = None, checkpoint_sha256: str | None = None,
                   lm_metrics: list | None = None) -> bool:
        """Write metrics (and an LM's ``lm_metrics``), curve and the 'complete' status in one
        transaction. Only a run still 'running' is completed: returns False (and writes nothing) for a run
        already ended, e.g. one whose claim a sweep took over from a process it found dead."""
        with self._conn() as c:
            done = c.execute(
                "UPDATE runs SET status='complete', checkpoint=?, checkpoint_sha256=?, wall_time=?, finished=?,"
                " summary=? WHERE id=? AND status='running'",
                (self._stored_path(checkpoint) if checkpoint else None, checkpoint_sha256, wall_time, time.time(),
                 json.dumps(summary), run_id)).rowcount
            if not done:
                return False
            c.executemany(
                f"INSERT OR REPLACE INTO metrics (run_id, {', '.join(METRICS_COLUMNS)}) "
                f"VALUES (?{',?' * len(METRICS_COLUMNS)})",
                [(run_id, *(getattr(m, k) for k in METRICS_COLUMNS)) for m in metrics])
            c.executemany(
                f"INSERT OR REPLACE INTO lm_metrics (run_id, {', '.join(LM_COLUMNS)}) VALUES "
                f"(?{', ?' * len(LM_COLUMNS)})",
                [(run_id, *(json.dumps(getattr(m, k)) if k in ("buckets", "answer_buckets") else getattr(m, k)
                           for k in LM_COLUMNS))
                 for m in (lm_metrics or [])])
            c.executemany("INSERT OR REPLACE INTO curves VALUES (?,?,?)",
                          [(run_id, p["step"], json.dumps(p)) for p in (curve or [])])
            return True

    def fail_run(self, run_id: int, error: str, wall_time: float | None = None,
                 summary: dict | None = None, status: str = "failed") -> bool:
        """End a running run as 'failed' (or ``status``, e.g. 'interrupted') with its reason."""
        with self._conn() as c:
            return bool(c.execute(
                "UPDATE runs SET status=?, error=?, wall_time=?, finished=?, summary=? WHERE id=? AND status='running'",
                (status, error, wall_time, time.time(), json.dumps(summary or {}), run_id)).rowcount)

    def interrupt_run(self, run_id: int, error: str, wall_time: float | None = None) -> bool:
        """A run stopped by a signal (or given up by its sweep): 'interrupted', with the reason."""
        return self.fail_run(run_id, error, wall_time, status="interrupted")

    def mark_interrupted(self, key: str, before_id: int) -> int:
        """Rows of this key still 'running', older than run ``before_id`` and recorded before runs had
        owners (claims end the others: ``statetrack.claims``) -> 'interrupted' (count)."""
        with self._conn() as c:
            return c.execute("UPDATE runs SET status='interrupted', error=?, finished=? "
                             "WHERE key=? AND status='running' AND id<? AND owner IS NULL",
                             (f"interrupted; superseded by run {before_id}", time.time(), key, before_id)).rowcount

    def set_versions(self, run_id: int, versions: dict) -> None:
        """Record the versions of the process that actually ran the run (e.g. a Ray worker)."""
        with self._conn() as c:
            c.execute("UPDATE runs SET versions=? WHERE id=?", (json.dumps(versions), run_id))

    def write_traces(self, run_id: int, traces: dict[str, dict]) -> None:
        with self._conn() as c:
            c.executemany("INSERT OR REPLACE INTO traces VALUES (?,?,?)",
                          [(run_id, k, json.dumps(v)) for k, v in traces.items()])

    def traces(self, run_id: int) -> dict[str, dict]:
        with self._conn() as c:
            return {r["probe"]: json.loads(r["data"]) for r in
                    c.execute("SELECT probe, data FROM traces WHERE run_id=?", (run_id,))}

    # -- reading -----------------------------------------------------------------------------
    def runs(self, study: str | None = None, status: str | None = None, key: str | None = None,
             limit: int | None = None) -> list[dict]:
        q, args = "SELECT * FROM runs WHERE 1=1", []
        for col, val in (("study", study), ("status", status), ("key", key)):
            if val is not None:
                q += f" AND {col}=?"
                args.append(val)
        q += " ORDER BY id"
        if limit:
            q += f" LIMIT {int(limit)}"
        with self._conn() as c:
            return [self._row(r) for r in c.execute(q, args)]

    def run(self, run_id: int) -> dict:
        with self._conn() as c:
            r = c.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if r is None:
            raise UserError(f"no run with id {run_id} in {str(self.path)!r}")
        return self._row(r)

    def metrics(self, run_id: int) -> list[dict]:
        with self._conn() as c:
            return [dict(r) for r in c.execute("SELECT * FROM metrics WHERE run_id=? ORDER BY length", (run_id,))]

    def lm_metrics(self, run_id: int) -> list[dict]:
        """A language model's metrics per context length (``buckets`` decoded)."""
        with self._conn() as c:
            rows = [dict(r) for r in c.execute("SELECT * FROM lm_metrics WHERE run_id=? ORDER BY length", (run_id,))]
        for r in rows:
            r["buckets"] = json.loads(r["buckets"]) if r["buckets"] else []
        return rows

    def schema_version(self) -> int:
        with self._conn() as c:
            return int(c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    def curve(self, run_id: int) -> list[dict]:
        with self._conn() as c:
            return [json.loads(r["data"]) for r in
                    c.execute("SELECT data FROM curves WHERE run_id=? ORDER BY step", (run_id,))]

    def counts(self) -> dict:
        with self._conn() as c:
            return {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("runs", "metrics", "curves")}


    def _row(self, r: sqlite3.Row) -> dict:
        d = dict(r)
        for k in ("config", "versions", "summary"):
            if d.get(k):
                d[k] = json.loads(d[k])
        if d.get("checkpoint") and d.get("checkpoint_sha256") and not os.path.isabs(d["checkpoint"]):
            d["checkpoint"] = str(self.path.parent / d["checkpoint"])  # kept relative to the database
        return d


def _damaged(e: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file itself is bad (not a database, or corrupt)."""
    name = getattr(e, "sqlite_errorname", "") or ""
    if name:
        return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
    return not isinstance(e, sqlite3.OperationalError)


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
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED"):
        return f"locked by another process for over 60 s ({e})"
    if name.startswith("SQLITE_CANTOPEN"):
        if not folder.is_dir():
            return f"its folder {str(folder)!r} does not exist ({e})"
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
            return f"Permission denied ({e})"
    return str(e)
