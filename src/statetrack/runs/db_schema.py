"""The results database's schema: its tables, the columns each holds, the schema version, and the
migration of an older file in place.

``SCHEMA_VERSION`` is written to the ``meta`` table beside the marker that says the file is ours. A
migration only adds: the tables a newer version has (the schema's ``CREATE ... IF NOT EXISTS``) and the
columns of ``ADDED_COLUMNS`` (NULL in old rows); nothing is rewritten or dropped, so older statetrack
versions still read a migrated file, and the version is raised, never lowered.
"""

from __future__ import annotations

import re
import sqlite3

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

#: the tables that hold the results: a file without one of them is damaged. Every other table of the
#: schema is added to a file that lacks it (one of an older version, or written before the table existed)
RESULT_TABLES = ("meta", "runs", "metrics")

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


def table_sql(name: str, temp: bool = False) -> str:
    """The schema's CREATE TABLE statement of ``name`` (``temp``: a temporary table, outside the file)."""
    m = re.search(rf"CREATE TABLE IF NOT EXISTS {name} \((.*?)\n\);", SCHEMA, re.S)
    assert m, name
    return f"CREATE {'TEMP ' if temp else ''}TABLE IF NOT EXISTS {name} ({m[1]}\n)"


def upgrade(c: sqlite3.Connection) -> None:
    """Bring the database of connection ``c`` (autocommit) to this schema version in place. One
    transaction adds the tables a newer version has and the marker that says the file is ours, so a
    process opening the file meanwhile sees all of it or none; the version is then raised, never lowered.
    Then the columns it lacks are added (:func:`migrate`)."""
    c.executescript(
        "BEGIN IMMEDIATE;" + SCHEMA + "INSERT OR IGNORE INTO meta VALUES ('application', 'statetrack');"
        f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
        f"UPDATE meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version' "
        f"AND CAST(value AS INTEGER) < {SCHEMA_VERSION};"
        "COMMIT;"
    )
    migrate(c)


def migrate(c: sqlite3.Connection) -> None:
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
