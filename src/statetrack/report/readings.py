"""Readings of a ``longest`` statistic ("the longest length with accuracy > 90%"), scored from the runs
already stored, without training.

A paper's "longest sequence length achieving accuracy > 90%" leaves three choices open, each a type:

- ``Pooling``: how the seeds of a cell become one number: their ``median`` (the study's rule) or the
  ``best-seed`` (the longest of the seeds), both at the learning rate chosen on the in-distribution
  validation, so that only the pooling changes;
- ``Position``: which accuracy at a length: the ``final`` label (after all L inputs: the study's metric
  ``accuracy``), ``per-token`` (every scored position: ``token_accuracy``) or ``whole-sequence`` (a
  sequence counts only if every scored position is right: ``sequence_accuracy``);
- ``Span``: ``as-worded`` (> threshold at L, whatever the shorter lengths read) or ``every-shorter``
  (> threshold at L and at every shorter test length).

A ``Reading`` is one of each, named ``POOLING/POSITION/SPAN`` (``median/final/as-worded``).
``reading_cells`` re-scores every published cell of a study under each reading through the study's own
tables (:mod:`statetrack.report.table`), and ``readings_markdown`` counts the cells each reading matches.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from enum import StrEnum

from statetrack.errors import allowed
from statetrack.report.render import fmt_value
from statetrack.report.selection import TableCell, compare
from statetrack.report.table import StudyTable, study_tables


class Pooling(StrEnum):
    MEDIAN = "median"
    BEST_SEED = "best-seed"


class Position(StrEnum):
    FINAL = "final"
    PER_TOKEN = "per-token"
    WHOLE_SEQUENCE = "whole-sequence"

    @property
    def metric(self) -> str:
        """The stored metric this position reads (``training.evaluation.LengthMetrics``)."""
        return {
            Position.FINAL: "accuracy",
            Position.PER_TOKEN: "token_accuracy",
            Position.WHOLE_SEQUENCE: "sequence_accuracy",
        }[self]


class Span(StrEnum):
    AS_WORDED = "as-worded"
    EVERY_SHORTER = "every-shorter"


@dataclass(frozen=True)
class Reading:
    pooling: Pooling
    position: Position
    span: Span

    @property
    def name(self) -> str:
        return f"{self.pooling}/{self.position}/{self.span}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> Reading:
        """``median/final/as-worded`` -> the reading; a bad name: a UserError naming the allowed ones."""
        by_name = {r.name: r for r in ALL_READINGS}
        if text not in by_name:
            raise allowed("reading", text, by_name)
        return by_name[text]

    def study(self, study):
        """``study`` scored with this reading's position and span (its pooling is applied to the cells by
        ``reading_tables``: the learning rate is still chosen by the study's rule)."""
        score = study.score.model_copy(update={"every_shorter": self.span is Span.EVERY_SHORTER})
        return study.model_copy(update={"metric": self.position.metric, "score": score})


#: every reading, the study's own first (median over seeds, final position, as worded)
ALL_READINGS = tuple(Reading(p, q, s) for p, q, s in itertools.product(Pooling, Position, Span))


def parse_readings(texts: list[str]) -> list[Reading]:
    """The readings named on a command line; ``all`` for every one."""
    if "all" in texts:
        return list(ALL_READINGS)
    return [Reading.parse(t) for t in texts]


@dataclass
class ReadingCell:
    table: str
    model: str
    column: str
    published: float | str
    reading: Reading
    value: float | None  # None: no run of the cell stored this reading's metric
    capped: bool
    differs: bool | None
    text: str  # as the report writes it: 'x' below the study's fail_below, '>=N' at the longest tested

    def as_dict(self) -> dict:
        return {**asdict(self), "reading": self.reading.name}


def _best_seed(study, cell: TableCell, longest_tested: int) -> TableCell:
    """The cell pooled by its best seed at the learning rate its selection chose."""
    if not cell.values:
        return cell
    best = TableCell(max(cell.values), cell.values, cell.lr, published=cell.published)
    best.capped = best.selected is not None and best.selected >= longest_tested
    best.differs = compare(study, best)
    return best


def reading_tables(study, results: list, reading: Reading, scale: str | None = None) -> list[StudyTable]:
    """The study's tables (``longest`` score) with every cell scored under ``reading``."""
    if study.score.kind != "longest":
        raise ValueError(f"readings apply to a 'longest' score, not {study.score.kind!r}")
    scored = reading.study(study)
    tables = study_tables(scored, results, scale)
    if reading.pooling is Pooling.BEST_SEED:
        for t in tables:
            for row in t.rows:
                for col, cell in row["cells"].items():
                    tested = max(
                        (
                            n
                            for j, _ in results
                            if j.table == t.name
                            and j.label == row["label"]
                            and (j.column or t.task_columns[0]) == col
                            for n in j.eval.lengths
                        ),
                        default=0,
                    )
                    row["cells"][col] = _best_seed(scored, cell, tested)
                    row["differs"][col] = row["cells"][col].differs
    return tables


def reading_cells(
    study, results: list, readings: list[Reading], scale: str | None = None
) -> list[ReadingCell]:
    """Every cell with a published number, under each reading (``results``: (Job, RunResult or None))."""
    out = []
    for reading in readings:
        for t in reading_tables(study, results, reading, scale):
            for row in t.rows:
                for col, cell in row["cells"].items():
                    if cell.published is None:
                        continue
                    text = "-" if cell.selected is None else fmt_value(cell.selected, study)
                    out.append(
                        ReadingCell(
                            t.name,
                            row["label"],
                            col,
                            cell.published,
                            reading,
                            cell.selected,
                            cell.capped,
                            cell.differs,
                            (">=" if cell.capped else "") + text,
                        )
                    )
    return out


def readings_markdown(cells: list[ReadingCell]) -> str:
    """Two tables: per reading, the published cells it matches (of those it could score); then every
    published cell under every reading, beside the paper's number (* = differs)."""
    readings = list(dict.fromkeys(c.reading for c in cells))
    lines = [
        "| reading | cells matched | cells scored | published cells | cells that differ |",
        "|---|---|---|---|---|",
    ]
    for r in readings:
        mine = [c for c in cells if c.reading == r]
        scored = [c for c in mine if c.differs is not None]
        differ = [f"{c.model} {c.column}" for c in scored if c.differs]
        lines.append(
            f"| {r.name} | {sum(1 for c in scored if not c.differs)} | {len(scored)} | {len(mine)} | "
            + (", ".join(differ) if differ else ("-" if scored else "not stored"))
            + " |"
        )
    keys = list(dict.fromkeys((c.table, c.model, c.column) for c in cells))
    by = {(c.table, c.model, c.column, c.reading): c for c in cells}
    lines += [
        "",
        "| table | model | column | paper | " + " | ".join(r.name for r in readings) + " |",
        "|---|---|---|---|" + "---|" * len(readings),
    ]
    for k in keys:
        first = by[(*k, readings[0])]
        texts = []
        for r in readings:
            c = by.get((*k, r))
            texts.append("" if c is None else c.text + (" *" if c.differs else ""))
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {first.published} | " + " | ".join(texts) + " |")
    return "\n".join(lines) + "\n"


def stored_readings(study, db, scale: str, readings: list[Reading], **grid) -> list[ReadingCell]:
    """Every published cell of ``study`` at ``scale`` under each reading, from the runs stored in ``db``
    (``grid``: ``collect``'s seeds, device and max_runs)."""
    from statetrack.report.collect import collect  # the whole report's reader: loaded only when asked

    rep = collect(study, db, scale, **grid)
    return reading_cells(study, rep.results, readings, scale)
