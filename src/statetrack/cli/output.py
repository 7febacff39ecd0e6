"""Output shared by every command: consoles, progress bars, tables, JSON Lines."""
from __future__ import annotations

import json
import sys


def console():
    from rich.console import Console

    # a wide console when piped, so tables are not squeezed into 80 columns
    return Console(width=None if sys.stdout.isatty() else 200)


def progress(json_mode: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=True, disable=json_mode or not sys.stderr.isatty(),
                    console=Console(stderr=True))


def emit_rows(rows):
    for r in rows:
        print(json.dumps(r))


def metrics_table(title: str, metrics):
    from rich.table import Table

    from statetrack.evaluation import longest_generalized, uncertain_judgement

    t = Table(title=title)
    for h in ("length", "accuracy", "95% interval", "chance", "scaled", "token acc", "sequence acc"):
        t.add_column(h, justify="right")
    for m in metrics:
        if m.accuracy is None:
            t.add_row(str(m.length), f"n/a ({m.note})", *["-"] * 5)
            continue
        t.add_row(str(m.length), f"{100 * m.accuracy:.1f}", f"{100 * m.accuracy_low:.1f}-{100 * m.accuracy_high:.1f}",
                  f"{100 * m.chance:.1f}", "-" if m.scaled_accuracy is None else f"{m.scaled_accuracy:+.3f}",
                  f"{100 * m.token_accuracy:.1f}", f"{100 * m.sequence_accuracy:.1f}")
    longest = longest_generalized(metrics)
    t.caption = (f"longest length with accuracy >= 90% (and at every shorter test length): {longest or 'none'}"
                 + (" (?: a 95% interval it reads contains 90%)" if uncertain_judgement(metrics) else "")
                 + "; chance: majority rate of the final label in that length's test set")
    return t


def rows_out(a, rows, title, columns):
    """JSON Lines with --json, else a table; ``columns`` maps each header to a cell function."""
    if a.json:
        emit_rows(rows)
        return 0
    from rich.table import Table

    t = Table(title=title)
    for h in columns:
        t.add_column(h)
    for r in rows:
        t.add_row(*(fn(r) for fn in columns.values()))
    console().print(t)
    return 0


def show(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return "-" if v is None else str(v)
