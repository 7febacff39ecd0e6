"""The health of a results database file, checked when it is opened and before anything is written.

A file that is not SQLite, that another program made, that is damaged (``PRAGMA quick_check`` on files up
to ``QUICK_CHECK_BYTES``, and every table and column the schema needs), or that a newer statetrack made
(its schema version above ``SCHEMA_VERSION``) is refused in one line and never modified
(:func:`check_file`). SQLite's errors are put in words that say what to fix (:func:`db_reason`): a full
disk, a read-only file or folder, no permission, a lock held too long. A reader opens a file so that it
writes nothing and leaves no -wal or -shm file behind (:func:`read_uri`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from statetrack.errors import UserError
from statetrack.runs.db_schema import ADDED_COLUMNS, RESULT_TABLES, SCHEMA_VERSION, schema_tables
from statetrack.version import __version__

#: what every refusal of a file ends with: it was not modified
UNTOUCHED = "it was left untouched"


def is_damaged(e: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file itself is bad (not a database, or corrupt)."""
    name = getattr(e, "sqlite_errorname", "") or ""
    if name:
        return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
    return not isinstance(e, sqlite3.OperationalError)


#: on open, ``PRAGMA quick_check`` (every page's structure) runs on files up to this size (about 0.1 s
#: per 64 MiB); bigger files get the schema checks only, and SQLite refuses a damaged page when it reads it
QUICK_CHECK_BYTES = 64 << 20
_quick_checked: set[tuple] = set()  # files found whole in this process: (device, inode, size, mtime)


def uri_path(path: str | os.PathLike) -> str:
    """``path`` for an SQLite ``file:`` URI (absolute, ``?`` and ``#`` escaped)."""
    return Path(path).absolute().as_uri().removeprefix("file://")


def read_uri(path: Path) -> str:
    """The URI a reader opens ``path`` with, so that it writes nothing and leaves no file: read-write under
    ``PRAGMA query_only`` when this user can write the file and its folder (SQLite removes the -wal and
    -shm files at the last close); otherwise read-only, ``mode=ro`` when a -wal file shows that a writer
    has the database open (its log is read), else ``mode=ro&immutable=1`` (no -shm file is created)."""
    base = f"file:{uri_path(path)}"
    if writable(path):
        return f"{base}?mode=rw"
    if os.path.exists(f"{path}-wal"):
        return f"{base}?mode=ro"
    return f"{base}?mode=ro&immutable=1"


def writable(path: Path) -> bool:
    """This user can write the file and create files beside it (the -wal and -shm files)."""
    return os.access(path, os.R_OK | os.W_OK) and os.access(path.absolute().parent, os.W_OK | os.X_OK)


def connect(uri: str, timeout: float = 60) -> sqlite3.Connection:
    """A connection to a database that may come from others: ``trusted_schema`` off, so that no function
    with side effects runs from the file's own schema (a view, a trigger, a default, an index)."""
    con = sqlite3.connect(uri, uri=True, timeout=timeout)
    con.execute("PRAGMA trusted_schema=OFF")
    return con


def foreign_objects(con: sqlite3.Connection) -> list[tuple[str, str]]:
    """The SQL the file carries that the schema does not define: every trigger and view, as (type,
    name). statetrack's schema has neither; a trigger would run its SQL on our writes."""
    return [
        (r[0], r[1])
        for r in con.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY type, name"
        )
    ]


def foreign_refusal(name: str, foreign: list[tuple[str, str]]) -> UserError:
    """The line that refuses to write a database carrying SQL of its own."""
    listed = ", ".join(f"{kind} {obj!r}" for kind, obj in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
    return UserError(
        f"results database {name!r} carries SQL that statetrack's schema does not define ({listed}); a "
        f"database is data, and no SQL from it runs: commands that write refuse it, {UNTOUCHED} "
        "(commands that only read, such as runs --check and report, can use it)"
    )


def check_file(path: Path, uri: str, name: str, writer: bool = False) -> list[str]:
    """Refuse, in one line, a file that is not a statetrack database this version can use: not SQLite,
    damaged (quick_check, or a table or column the schema needs is missing), made by another program, or
    by a newer statetrack (its schema version above ``SCHEMA_VERSION``); for a ``writer``, one that
    carries triggers or views (:func:`foreign_objects`: their SQL would run on our writes). Nothing is
    written: a read-write ``uri`` is opened under ``query_only``. Returns the tables an older file lacks
    (the migration adds them); every table for an empty file."""
    try:
        con = connect(uri)
        try:
            con.execute("PRAGMA query_only=1")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return list(schema_tables())
            _check_marker(con, tables, name)
            lacking = _lacking_tables(con, tables, name)
            foreign = foreign_objects(con)
            if writer and foreign:
                raise foreign_refusal(name, foreign)
            _quick_check(con, path, name)
            return lacking
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise _refusal(path, name, e) from None


def _check_marker(con: sqlite3.Connection, tables: set[str], name: str) -> None:
    """The file says it is statetrack's, with a schema version this statetrack reads."""
    app = version = None
    if "meta" in tables:
        rows = dict(con.execute("SELECT key, value FROM meta WHERE key IN ('application', 'schema_version')"))
        app, version = rows.get("application"), rows.get("schema_version")
    if app != "statetrack":
        raise UserError(
            f"{name!r} is an SQLite database that statetrack did not create; {UNTOUCHED} (choose another --db)"
        )
    try:
        number = int(version if version is not None else "")  # no version: the error below
    except (TypeError, ValueError):
        raise UserError(
            f"results database {name!r} is damaged: its schema version is {version!r}, not a "
            f"number; {UNTOUCHED}"
        ) from None
    if number > SCHEMA_VERSION:
        raise UserError(
            f"results database {name!r} has schema version {number}, written by a newer "
            f"statetrack; this statetrack ({__version__}) reads versions up to {SCHEMA_VERSION}: "
            f"upgrade statetrack or choose another --db; {UNTOUCHED}"
        )


def _lacking_tables(con: sqlite3.Connection, tables: set[str], name: str) -> list[str]:
    """The schema's tables the file lacks (an older file's: the migration adds them). A missing table of
    results (``RESULT_TABLES``), or a missing column that no migration adds, is damage."""
    added = {(t, c) for t, cols in ADDED_COLUMNS.items() for c, _ in cols}
    lacking = []
    for table, cols in schema_tables().items():
        if table not in tables:
            if table in RESULT_TABLES:
                raise UserError(
                    f"results database {name!r} is damaged: table {table!r} is missing; {UNTOUCHED}"
                )
            lacking.append(table)
            continue
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        gone = [c for c in cols if c not in have and (table, c) not in added]
        if gone:
            raise UserError(
                f"results database {name!r} is damaged: table {table!r} lacks column "
                f"{', '.join(map(repr, gone))}; {UNTOUCHED}"
            )
    return lacking


def _quick_check(con: sqlite3.Connection, path: Path, name: str) -> None:
    """``PRAGMA quick_check`` on a file up to ``QUICK_CHECK_BYTES``, once per process and file version."""
    st = os.stat(path)
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if st.st_size <= QUICK_CHECK_BYTES and ident not in _quick_checked:
        ok = con.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise UserError(f"results database {name!r} is damaged ({ok}); {UNTOUCHED}")
        _quick_checked.add(ident)


def _refusal(path: Path, name: str, e: sqlite3.DatabaseError) -> UserError:
    """The one line that refuses a file SQLite could not read: damaged, not SQLite, or not openable."""
    if is_damaged(e):
        if (getattr(e, "sqlite_errorname", "") or "").startswith("SQLITE_CORRUPT"):
            return UserError(f"results database {name!r} is damaged ({e}); {UNTOUCHED}")
        return UserError(f"{name!r} is not a readable SQLite database ({e}); {UNTOUCHED}")
    return UserError(f"results database {name!r} cannot be opened: {db_reason(path, e)}; {UNTOUCHED}")


def db_reason(path: Path, e: sqlite3.Error) -> str:
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
