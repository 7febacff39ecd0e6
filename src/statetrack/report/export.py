"""Every run of a results database as one table, for pandas, R or a spreadsheet (``statetrack runs export``).

One row per (run, draw, test length): the run's keys (``records.RUN_KEYS``), ``length``, ``split`` and the
metrics there (``records.METRIC_KEYS``), then the run's config as dotted ``config.*`` columns
(``config.lr``, ``config.model.layers``) and its scalar summary as ``summary.*`` columns. A run with no
metrics (failed, running) has one row with empty metrics. CSV needs nothing; parquet needs pyarrow.
"""

from __future__ import annotations

import io
from pathlib import Path

from statetrack.errors import UserError
from statetrack.files import write_chosen
from statetrack.report.compare import flat_config
from statetrack.report.render import grid_csv
from statetrack.runs.records import LENGTH_KEYS, run_object, split_rows
from statetrack.runs.store import RunStatus, Store

FORMATS = ("csv", "parquet")


def export_rows(db, study: str | None = None, status: RunStatus | str | None = None) -> list[dict]:
    """The rows of the export (see the module docstring), the runs in id order."""
    store = Store(db, readonly=True)
    rows = []
    runs = store.runs(study=study, status=RunStatus(status) if status else None)
    metrics, splits = store.metrics_of([r.id for r in runs])
    for r in runs:
        extra = {
            f"config.{k}": (",".join(map(str, v)) if isinstance(v, list) else v)
            for k, v in flat_config(r.config).items()
        }
        extra.update(
            {
                f"summary.{k}": v
                for k, v in (r.summary or {}).items()
                if isinstance(v, (int, float, str, bool)) or v is None
            }
        )
        headline = ((r.config or {}).get("eval") or {}).get("test_split", "test").split("+")[0]
        got = split_rows(run_object(r), metrics.get(r.id, []), splits.get(r.id, {}), headline)
        got = got or [{**run_object(r), **dict.fromkeys(LENGTH_KEYS[len(run_object(r)) :])}]
        rows += [{**x, **extra} for x in got]
    return rows


def _columns(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys([*LENGTH_KEYS, *(k for r in rows for k in r)]))


def csv_text(rows: list[dict]) -> str:
    """The rows as CSV, every label or name that looks like a formula read as text (``render.grid_csv``)."""
    return grid_csv(rows, _columns(rows)) or ",".join(LENGTH_KEYS) + "\r\n"


def parquet_bytes(rows: list[dict]) -> bytes:
    """The rows as a parquet file (pyarrow; a UserError in one line where it is not installed)."""
    try:
        import pyarrow as pa  # optional: only this export needs it
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(
            "--format parquet needs pyarrow, which is not installed (pip install pyarrow); "
            "--format csv needs nothing"
        ) from None
    cols = _columns(rows)
    data = {c: [r.get(c) for r in rows] for c in cols}
    for c, vs in data.items():  # a column of mixed types (a config key that is a number here, a name there)
        kinds = {type(v) for v in vs if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            data[c] = [None if v is None else str(v) for v in vs]
    buf = io.BytesIO()
    pq.write_table(pa.table(data), buf)
    return buf.getvalue()


def export_runs(
    db, fmt: str = "csv", out=None, study: str | None = None, status: RunStatus | str | None = None
) -> str | Path:
    """Every run of ``db`` (of ``study``, with ``status``) as CSV or parquet (``fmt``): written to ``out``
    (whole or not at all) and its path returned, or, without ``out``, the CSV text returned."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if fmt == "parquet" and out is None:
        parquet_bytes([])  # a missing pyarrow is said first
        raise UserError("--format parquet writes a binary file: give --out FILE.parquet")
    rows = export_rows(db, study, status)
    if fmt == "csv":
        text = csv_text(rows)
        return text if out is None else write_chosen(Path(out), text, what="export")
    return write_chosen(Path(out), parquet_bytes(rows), what="export")
