"""Results that last: every run in an embedded SQLite database.

Tables: ``meta`` (marks the file as ours, with its schema version), ``runs`` (full config, versions,
seed, status, checkpoint path, wall time, training summary), ``metrics`` (one row per run and test
length), ``curves`` (validation curve), ``traces`` (probe outputs) and, from schema version 2,
``lm_metrics`` (language models: loss, bits per byte and the per-position buckets per run and context
length). A database of an older schema is migrated in place when opened; a migration only adds tables
and columns, so older statetrack versions still read it. Written in transactions, WAL journal, so
several worker processes can share one database. A file that is not ours, or is damaged, is refused and
never overwritten.
"""
from __future__ import annotations

import json
import os
import platform
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from statetrack.errors import UserError

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
  summary TEXT
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
  buckets TEXT,
  PRIMARY KEY (run_id, length)
);
"""
LM_COLUMNS = ("length", "windows", "tokens", "bytes", "loss", "bpb", "bpb_se", "token_accuracy", "last_accuracy",
              "sequence_accuracy", "answer_tokens", "answer_bpb", "answer_accuracy", "buckets")


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
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
        with self._conn() as c:
            _migrate_metrics(c)

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
            raise UserError(f"{str(self.path)!r} is not a readable SQLite database ({e}); "
                            "it was left untouched") from None
        if ok != "ok":
            raise UserError(f"results database {str(self.path)!r} is damaged ({ok}); it was left untouched")
        if tables and app != "statetrack":
            raise UserError(f"{str(self.path)!r} is an SQLite database that statetrack did not create; "
                            "it was left untouched (choose another --db)")

    @contextmanager
    def _conn(self):
        """A connection whose ``with`` block is one transaction: all of it is written, or none."""
        con = sqlite3.connect(self.path, timeout=60)
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=60000")
            if self.max_pages:
                con.execute(f"PRAGMA max_page_count={int(self.max_pages)}")
            with con:
                yield con
        except sqlite3.OperationalError as e:  # disk full, locked past the timeout, read-only file
            raise UserError(f"results database {str(self.path)!r}: {e}; this transaction was rolled back, "
                            "earlier results are intact") from None
        finally:
            con.close()

    # -- writing -----------------------------------------------------------------------------
    def start_run(self, config: dict, study: str | None = None, label: str | None = None,
                  key: str | None = None) -> int:
        with self._conn() as c:
            cur = c.execute(
                "INSERT INTO runs (key, study, label, model, task, seed, train_min_len, train_max_len, config,"
                " versions, status, created) VALUES (?,?,?,?,?,?,?,?,?,?, 'running', ?)",
                (key, study, label, config["model"]["layers"], config["task"], config["seed"],
                 config.get("train_min_len"), config.get("train_max_len"), json.dumps(config),
                 json.dumps(versions()), time.time()))
            return int(cur.lastrowid)

    def finish_run(self, run_id: int, metrics: list, checkpoint: str | None, wall_time: float,
                   summary: dict, curve: list[dict] | None = None, lm_metrics: list | None = None) -> None:
        """Write metrics, curve and the 'complete' status in one transaction."""
        with self._conn() as c:
            c.executemany(
                f"INSERT OR REPLACE INTO metrics (run_id, {', '.join(METRICS_COLUMNS)}) "
                f"VALUES (?{',?' * len(METRICS_COLUMNS)})",
                [(run_id, *(getattr(m, k) for k in METRICS_COLUMNS)) for m in metrics])
            c.executemany(
                f"INSERT OR REPLACE INTO lm_metrics (run_id, {', '.join(LM_COLUMNS)}) VALUES "
                f"(?{', ?' * len(LM_COLUMNS)})",
                [(run_id, *(json.dumps(getattr(m, k)) if k == "buckets" else getattr(m, k) for k in LM_COLUMNS))
                 for m in (lm_metrics or [])])
            c.executemany("INSERT OR REPLACE INTO curves VALUES (?,?,?)",
                          [(run_id, p["step"], json.dumps(p)) for p in (curve or [])])
            c.execute("UPDATE runs SET status='complete', checkpoint=?, wall_time=?, finished=?, summary=?"
                      " WHERE id=?", (checkpoint, wall_time, time.time(), json.dumps(summary), run_id))

    def fail_run(self, run_id: int, error: str, wall_time: float | None = None,
                 summary: dict | None = None) -> None:
        with self._conn() as c:
            c.execute("UPDATE runs SET status='failed', error=?, wall_time=?, finished=?, summary=? WHERE id=?",
                      (error, wall_time, time.time(), json.dumps(summary or {}), run_id))

    def mark_interrupted(self, key: str, before_id: int) -> int:
        """Rows of this key still 'running' and older than run ``before_id`` -> 'interrupted' (count)."""
        with self._conn() as c:
            return c.execute("UPDATE runs SET status='interrupted', error=?, finished=? "
                             "WHERE key=? AND status='running' AND id<?",
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
            return [_row(r) for r in c.execute(q, args)]

    def run(self, run_id: int) -> dict:
        with self._conn() as c:
            r = c.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if r is None:
            raise UserError(f"no run with id {run_id} in {str(self.path)!r}")
        return _row(r)

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


# -- the metrics table: its columns, and the in-place migration of older files ----------------------
#: the columns of a metrics row after run_id (the fields of evaluation.LengthMetrics)
METRICS_COLUMNS = ("length", "accuracy", "token_accuracy", "sequence_accuracy", "scaled_accuracy", "chance",
                   "n_sequences", "accuracy_low", "accuracy_high", "token_chance", "note")
#: columns added since schema version 1: per-length chance and the accuracy's 95% interval
_METRICS_ADDED = (("accuracy_low", "REAL"), ("accuracy_high", "REAL"), ("token_chance", "REAL"), ("note", "TEXT"))


def _migrate_metrics(c: sqlite3.Connection) -> None:
    """Bring an older file's metrics table up to date by ADDING the missing columns (NULL in old rows;
    nothing is rewritten or dropped), and record the schema version. One transaction."""
    def missing():
        have = {r["name"] for r in c.execute("PRAGMA table_info(metrics)")}
        version = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return [(n, k) for n, k in _METRICS_ADDED if n not in have], int(version["value"]) if version else 0

    columns, version = missing()
    if not columns and version >= SCHEMA_VERSION:
        return
    c.execute("BEGIN IMMEDIATE")  # then look again: another process may have migrated meanwhile
    columns, version = missing()
    for name, kind in columns:
        c.execute(f"ALTER TABLE metrics ADD COLUMN {name} {kind}")
    if version < SCHEMA_VERSION:
        c.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


def _row(r: sqlite3.Row) -> dict:
    d = dict(r)
    for k in ("config", "versions", "summary"):
        if d.get(k):
            d[k] = json.loads(d[k])
    return d
