"""Rendering a study table: cell text, and the table as markdown, CSV, LaTeX and a rich console table.

Every renderer reads a table (a :class:`statetrack.report.table.StudyTable`, as the :class:`Table`
protocol below describes it) and writes text; nothing here chooses a number (that is
:mod:`statetrack.report.selection`). The table module imports this one, never the other way round.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass
from typing import Literal, Protocol

from statetrack.experiments import ScoreKind
from statetrack.report.selection import MARK, TableCell
from statetrack.untrusted import csv_cell, markdown_text

#: a study table's kind: the study's score kind, or one of the state-tracking report's extra tables
TableKind = ScoreKind | Literal["learning", "horizon"]


class Table(Protocol):
    """What a renderer reads of a study table."""

    study: str
    name: str
    title: str
    kind: TableKind
    lengths: list[int]
    columns: dict[str, str]  # per_length: published column key -> header
    task_columns: list[str]  # mean / longest: task labels
    rows: list[dict]
    caption: str


def fmt_value(v, study) -> str:
    if v is None:
        return "-"
    if study.score.kind == "longest":
        fail = study.score.fail_below or 1
        return "x" if v < fail else f"{v:g}"
    if study.metric == "scaled_accuracy":
        return f"{v:.3f}"
    return f"{100 * v:.1f}"


def fmt_published(v, study) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return fmt_value(v, study)


#: appended to a cell whose threshold judgement a 95% interval could change
UNSURE = "?"


def fmt_cell(cell: TableCell, study) -> str:
    if cell.selected is None:
        return "n/a" if cell.not_scored else "-"
    s = fmt_value(cell.selected, study)
    if cell.capped:
        s = ">=" + s
    lo, hi = (
        (fmt_value(min(cell.values), study), fmt_value(max(cell.values), study)) if cell.values else ("", "")
    )
    if len(cell.values) > 1 and lo != hi:  # seeds that agree to the shown digits: one number says it all
        med = median_tested(cell.values) if study.score.kind == "longest" else statistics.median(cell.values)
        rng = (
            f"[{lo} to {hi}]" if (lo + hi).count("-") else f"[{lo}-{hi}]"
        )  # -0.022 to -0.020, not -0.022--0.020
        s += f" {rng}" if abs(med - cell.selected) < 1e-12 else f" ({fmt_value(med, study)} {rng})"
    if cell.uncertain:
        s += " " + UNSURE
    if cell.differs:
        s += " " + MARK
    return s


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def fmt(values) -> str:
    if not isinstance(values, (list, tuple)):
        values = [values]
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    lo, hi = f"{100 * min(values):.1f}", f"{100 * max(values):.1f}"
    if len(values) == 1 or lo == hi:  # seeds that agree to the shown digits: one number
        return f"{100 * med:.1f}"
    return f"{100 * med:.1f} [{lo}-{hi}]"


def median_tested(values):
    """The median of lengths that is itself one of them (the lower middle one of an even count): a length
    that was tested, never the mean of two (32 and 256 give 32, not 144)."""
    return statistics.median_low(values)


def fmt_len(values, uncertain: bool = False) -> str:
    vals = [v if v is not None else 0 for v in values]
    if not vals:
        return "-"
    med = median_tested(vals)
    s = "x" if med == 0 else f"{med:g}"
    if len(vals) > 1 and min(vals) != max(vals):
        s += f" [{min(vals) or 'x'}-{max(vals) or 'x'}]"
    return s + (" " + UNSURE if uncertain else "")


def headers(t: Table) -> list[str]:
    if t.kind == "per_length":
        return (
            ["model", "train len", "seeds", "lr", "train acc"]
            + [str(n) for n in t.lengths]
            + [">=90% up to"]
            + [f"paper: {h}" for h in t.columns.values()]
        )
    h = ["model", "train len", "seeds"]
    for c in t.task_columns:
        h += [c] + ([f"paper: {c}"] if c in _published(t) else [])
    return h


def _published(t: Table) -> set[str]:
    """Task columns for which some row has a published value (the others get no 'paper' column)."""
    return {c for c in t.task_columns if any(r["published"].get(c) is not None for r in t.rows)}


@dataclass(frozen=True)
class Cell:
    """A table cell as shown: its text, and whether it differs from the paper beyond the study's tolerance
    (the text carries the mark too, for the plain-text formats)."""

    text: str
    differs: bool = False


def cells(t: Table) -> list[list[Cell]]:
    """The rows of ``t`` as cells, in the order of ``headers(t)``."""
    out = []
    for r in t.rows:
        if t.kind == "per_length":
            first = (r["label"], r["train_lengths"], str(r["seeds"]), r["lr"], fmt(r["train_acc"]))
            out.append(
                [Cell(x) for x in first]
                + [Cell(r["text"][n], bool(r["cells"][n].differs)) for n in t.lengths]
                + [Cell(fmt_len(r["longest"], r.get("longest_uncertain", False)))]
                + [Cell(r["published_text"][k], bool(r["differs"].get(k))) for k in t.columns]
            )
        else:
            row = [Cell(r["label"]), Cell(r["train_lengths"]), Cell(str(r["seeds"]))]
            for c in t.task_columns:
                row.append(Cell(r["text"].get(c, "-"), bool(r["differs"].get(c))))
                if c in _published(t):
                    row.append(Cell(r["published_text"].get(c, "-")))
            out.append(row)
    return out


def cell_texts(t: Table) -> list[list[str]]:
    return [[c.text for c in row] for row in cells(t)]


def markdown(t: Table) -> str:
    return grid_markdown(headers(t), cell_texts(t))


def md_cell(text) -> str:
    """A markdown table cell's text: a ``|`` escaped (else it starts a column), a line break a space (else
    it ends the row), the ``<`` of an HTML tag ``&lt;`` (``untrusted.markdown_text``). Labels come from
    study files and databases, and may hold any of them."""
    return markdown_text(" ".join(str(text).replace("|", "\\|").splitlines()))


def grid_markdown(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table of text cells (every table kind renders through these grid_* functions)."""
    lines = ["| " + " | ".join(map(md_cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(md_cell, c)) + " |" for c in rows]
    return "\n".join(lines)


def csv_rows(t: Table) -> list[dict]:
    out = []
    for r in t.rows:
        for col, cell in r["cells"].items():
            out.append(
                {
                    "study": t.study,
                    "table": t.name,
                    "model": r["label"],
                    "column": col,
                    "selected": cell.selected,
                    "lr": cell.lr,
                    "seeds": len(cell.values),
                    "median": statistics.median(cell.values) if cell.values else None,
                    "min": min(cell.values) if cell.values else None,
                    "max": max(cell.values) if cell.values else None,
                    "capped": cell.capped,
                    "missing_runs": cell.missing,
                    "published": cell.published,
                    "differs": cell.differs,
                }
            )
    return out


def csv_text(t: Table) -> str:
    return grid_csv(csv_rows(t))


def grid_csv(rows: list[dict], fields=None) -> str:
    """The rows as CSV under ``fields`` (default: the first row's keys; a key a row lacks is empty, one
    not in ``fields`` left out); nothing at all for no rows. Every text cell, the header too, is
    ``untrusted.csv_cell``: a label that looks like a formula (``=HYPERLINK(...)``) reads as text."""
    buf = io.StringIO(newline="")
    if rows:
        names = list(rows[0] if fields is None else fields)
        w = csv.DictWriter(buf, fieldnames=names, extrasaction="ignore")
        w.writerow({k: csv_cell(k) for k in names})
        w.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def latex(t: Table) -> str:
    return grid_latex(headers(t), cell_texts(t), t.title, t.caption)


def grid_latex(h: list[str], rows: list[list[str]], title: str, caption: str) -> str:
    def esc(s: str) -> str:
        for a, b in (
            ("\\", r"\textbackslash{}"),
            ("&", r"\&"),
            ("%", r"\%"),
            ("_", r"\_"),
            ("#", r"\#"),
            ("$", r"\$"),
            ("{", r"\{"),
            ("}", r"\}"),
            ("~", r"\textasciitilde{}"),
            ("^", r"\^{}"),
            (">=", r"$\geq$"),
            ("*", r"$^*$"),
        ):
            s = s.replace(a, b)
        return s

    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{l" + "r" * (len(h) - 1) + "}",
        r"\toprule",
        " & ".join(esc(x) for x in h) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(esc(x) for x in c) + r" \\" for c in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(title)}. {esc(caption)}}}", r"\end{table}"]
    return "\n".join(lines)


def rich(t: Table):
    return grid_rich(headers(t), cell_texts(t), t.title, t.caption)


def grid_rich(header: list[str], rows: list[list[str]], title: str, caption: str = ""):
    from rich.markup import escape  # only the console table needs rich (kept off the import of a report)
    from rich.table import Table  # only the console table needs rich (kept off the import of a report)

    out = Table(title=escape(title), show_lines=False, caption=escape(caption) if caption else None)
    for i, h in enumerate(header):
        out.add_column(
            h, justify="left" if i == 0 else "right", style="dim" if h.startswith("paper") else None
        )
    for c in rows:
        out.add_row(*(escape(x) for x in c))
    return out
