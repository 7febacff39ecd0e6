"""A study's derived tables, beside each of its tables: another reading of its score, learnability, the
long-range draw and the failure horizons. ``state_tables`` adds after each table, where it applies:

- ``NAME-every-shorter`` (a ``longest`` score read as written, ``every_shorter: false``): the same table
  with the stricter reading, the metric above the threshold at every shorter test length too; the
  published numbers beside it, its agreement in its caption and not in the report's;
- ``NAME-long`` (a scale with ``test_split: test+long``): the same table (score, selection, seeds) on the
  long-range draw, whose strings have a last half that leaves both labels possible and a label drawn
  independently of it, so a model that reads only the recent past scores 50% (1/C for C labels); n/a
  where a task has no such draw (a window language at that length, or a task that is not regular: the
  caption names the reason);
- ``NAME-learning`` (runs that recorded ``learned_at_step``): per model and task, how many seeds learnt the
  task within the budget (in-distribution validation at the run's ``learned_accuracy`` for
  ``learned_validations`` validations in a row) and the median [min-max] step at which they did, at the
  learning rate selected in the main table: learnability measured beside the accuracy;
- ``NAME-horizon`` (runs that measured horizons, ``horizons: true``): per model and task the failure
  horizon, the length of the shortest witness-family string the model gets wrong over every pair of
  states (docs/long-range.md), median [min-max] over the seeds at the learning rate selected in the main
  table, and the pair of states confused first; ``>=N`` where no family broke a seed up to N, the
  longest test length.

None of them marks a disagreement: the papers measured neither learnability, the long-range draw nor
horizons, and the ``-every-shorter`` table shows the paper's numbers beside a reading that is not the
paper's statistic.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from typing import Literal

from statetrack.config import Split
from statetrack.report.projection import project_steps
from statetrack.report.render import fmt_cell, median_tested
from statetrack.report.selection import TableCell
from statetrack.report.table import StudyTable, caption, named_table, table_runs
from statetrack.runs.store import RunStatus
from statetrack.tasks.long_range import one_suffix

LONG_NOTE = (
    "On the long-range draw (docs/long-range.md): the last ceil(L/2) symbols of each string leave both "
    "labels possible and the label is drawn independently of them, so a model that reads only the "
    "recent past scores 50% (1/C for C labels) while one that tracks the state keeps its score."
)
HORIZON_NOTE = (
    "Failure horizon (ours, beside the papers' statistic): the length of the shortest string the model "
    "gets wrong, over four searches (docs/long-range.md, 'Verified horizons'): EVERY string up to the "
    "exhaustive length (the longest whose prefix tree fits the budget: 20 symbols of two letters, 13 of "
    "three), a margin-guided search beyond it, the witness families of every pair of states of the task's "
    "minimal automaton (u_p W^n v / u_q W^n v, statetrack witnesses TASK) with many access words per "
    "state, and the test draws. Median [min-max] over seeds at the learning rate selected in the main "
    "table, then (q|r): the state the shortest wrong string ends in and the state the model's state is "
    "nearest (families: the pair the family confused); >=N: nothing found wrong up to N (the longest test "
    "length: every string only up to the exhaustive length, beyond it what the searches tried); !: a "
    "test draw scores 90% or more at a length beyond the horizon (the draw's length claim is false "
    "there); *: a run recorded before the exhaustive check and the search, its horizon from the "
    "families alone; n/a: no automaton (a task that is not regular)."
)


LEARNING_NOTE = (
    "Learnt: seeds whose in-distribution validation accuracy reached the run's learned_accuracy "
    "(99% unless the study says otherwise) for learned_validations validations in a row (3) within "
    "the training budget, out of the seeds run, at the learning rate selected in the main table; "
    "then the median [min-max] over those seeds of the step at which they learnt it (the first "
    "validation of that run). 0/n: not learnt in the budget by any seed; then the best seed's best "
    "validation accuracy and the step its curve projects for learned_accuracy (a power law fitted to its "
    "validation error from a quarter of the budget on, statetrack.report.projection; 'flat': the error "
    "fell by less than half per tenfold steps, no projection), with the hours that many steps take "
    "at the run's own pace (its training seconds per step, one thread)."
)


def on_split(results: list, split: Split) -> list:
    """The results with each run's metrics replaced by those of the ``split`` draw."""
    return [(j, r if r is None else replace(r, metrics=r.split(split, j.eval.splits[0]))) for j, r in results]


def state_tables(
    study, results: list, tables: list[StudyTable], curves: dict[int, list] | None = None
) -> list[StudyTable]:
    """``tables`` with, after each, its derived tables (the module's docstring) where they apply;
    ``curves`` (run id -> validation curve) lets the learning table project the steps of a cell no seed
    learnt."""
    out = []
    for t in tables:
        out.append(t)
        mine = table_runs(results, t.name)
        if study.score.kind == "longest" and not study.score.every_shorter:
            out.append(_every_shorter_table(study, mine, t))
        if any(r is not None and "learned_at_step" in (r.summary or {}) for _, r in mine):
            out.append(_learning_table(t, mine, curves or {}))
        long = on_split(mine, Split.LONG)
        if any(r is not None and r.metrics for _, r in long):
            out.append(_long_table(study, long, t))
        if any(r is not None and (r.summary or {}).get("horizons") for _, r in mine):
            out.append(_horizon_table(t, mine))
    return out


def _every_shorter_table(study, results: list, main: StudyTable) -> StudyTable:
    """``main`` (a longest-length table read as the paper writes it, shorter lengths not asked) with the
    stricter reading: > threshold at the length and at every shorter test length. The published numbers
    stay beside it; its agreement is counted in its caption, not in the report's."""
    strict = study.model_copy(update={"score": study.score.model_copy(update={"every_shorter": True})})
    t = named_table(strict, main.name, results)
    t.name, t.title = f"{main.name}-every-shorter", f"{main.title}: at every shorter length too"
    compared, differ = 0, []
    for row in t.rows:
        for key, cell in row["cells"].items():
            if cell.differs is not None:
                compared += 1
                if cell.differs:
                    differ.append(f"{row['label']} on {key}")
            cell.differs = None
            row["text"][key] = fmt_cell(cell, strict)
        row["differs"] = dict.fromkeys(row["differs"])
    verdict = (
        f" Read this way, {compared - len(differ)} of {compared} cells with a published number agree with "
        "the paper" + (f"; differ: {', '.join(differ)}." if differ else ".")
        if compared
        else ""
    )
    t.caption = (
        f"The table above read more strictly: the longest test length with {study.metric} > "
        f"{100 * study.score.threshold:g}% at it and at every shorter test length (a run whose accuracy dips "
        "and returns is held only to the dip). The comparison with the paper and the report's agreement use "
        f"the table above, the paper's statistic as it is written; this one is shown beside it.{verdict} "
        + caption(strict, "longest", published=False)
    )
    return t


def _long_table(study, results: list, main: StudyTable) -> StudyTable:
    t = named_table(study, main.name, results)
    t.name, t.title, t.columns = f"{main.name}-long", f"{main.title}: on the long-range draw", {}
    notes: dict[str, set[str]] = {}
    few: dict[str, set[str]] = {}
    for j, r in results:
        if r is not None:
            col = j.column or main.task_columns[0]
            notes.setdefault(col, set()).update(m.note for m in r.metrics if m.accuracy is None and m.note)
            few.setdefault(col, set()).update(
                part
                for m in r.metrics
                if m.accuracy is not None and m.note
                for part in m.note.split("; ")
                if part.startswith(("one suffix", "few suffixes"))
            )
    for row in t.rows:
        row["published"], row["published_text"] = {}, {}
        row["differs"] = dict.fromkeys(row["differs"])
        for key, cell in row["cells"].items():
            cell.published, cell.differs = None, None
            row["text"][key] = "n/a" if cell.selected is None and cell.runs else fmt_cell(cell, study)
    why = "; ".join(f"{col}: {'; '.join(sorted(n))}" for col, n in notes.items() if n)
    narrow = "; ".join(f"{col}: {_suffix_notes(n)}" for col, n in few.items() if n)
    t.caption = (
        f"{LONG_NOTE} Cells as in the table above, on this draw"
        + (f"; n/a = no long-range draw at a length ({why})" if why else "")
        + (f". Few distinct suffixes: {narrow}." if narrow else ".")
    )
    return t


def _fmt(v: float | None, cap: int) -> str:
    return f">={cap}" if v is None or v == float("inf") else f"{v:g}"


def _selected_lr(mrow: dict, col: str) -> float | None:
    sel = mrow["cells"].get(col)
    return sel.lr if isinstance(sel, TableCell) else None


def _selected_runs(main: StudyTable, mrow: dict, col: str, results: list) -> list:
    """The complete runs of one cell of ``main`` at the learning rate its selection chose."""
    return [r for _, r in selected_pairs(main, mrow, col, results)]


def selected_pairs(main: StudyTable, mrow: dict, col: str, results: list) -> list:
    """(job, result) of the complete runs of one cell of ``main`` at the learning rate its selection
    chose (``results``: the table's own)."""
    lr = _selected_lr(mrow, col)
    return [
        (j, r)
        for j, r in results
        if r is not None
        and r.status == RunStatus.COMPLETE
        and j.label == mrow["label"]
        and (j.column or main.task_columns[0]) == col
        and (lr is None or j.train.lr == lr)
    ]


def recorded(runs: list) -> list:
    """The runs that recorded when they learnt the task in distribution (``learned_at_step``: a step, or
    None for not within the budget); runs from before that measurement did not."""
    return [r for r in runs if "learned_at_step" in (r.summary or {})]


def learning_text(steps: list[int | None]) -> str:
    """'2/3 · 4,500 [3,000-6,000]': seeds that learnt, of those run; their median [min-max] steps ('at the
    start' when every one had it at step 0: a run started from a construction)."""
    learnt = sorted(s for s in steps if s is not None)
    text = f"{len(learnt)}/{len(steps)}"
    if learnt and learnt[-1] == 0:
        text += " · at the start"
    elif learnt:
        text += f" · {statistics.median(learnt):,.0f}"
        if len(learnt) > 1 and learnt[0] != learnt[-1]:
            text += f" [{learnt[0]:,}-{learnt[-1]:,}]"
    return text


def unlearnt_text(runs: list, curves: dict[int, list], target: float) -> str:
    """'best 84.4% · projected 540k steps (26 h)': of a cell that no seed learnt, the best seed's best
    validation accuracy and what its curve projects for the accuracy ``target`` (the runs'
    learned_accuracy; statetrack.report.projection)."""
    best = max(runs, key=lambda r: (r.summary or {}).get("best_val_accuracy") or 0.0)
    s = best.summary or {}
    text = f"best {100 * s['best_val_accuracy']:.1f}%" if s.get("best_val_accuracy") is not None else ""
    curve = curves.get(best.run_id)
    if not curve:
        return text
    p = project_steps(curve, target, s.get("steps_run"))
    more = p.text()
    if p.steps is not None and not p.beyond and s.get("train_time") and s.get("steps_run"):
        more += f" ({p.steps * s['train_time'] / s['steps_run'] / 3600:,.1f} h)"
    return " · ".join(x for x in (text, more) if x)


def _derived_table(
    main: StudyTable, what: str, kind: Literal["learning", "horizon"], caption: str
) -> StudyTable:
    """An empty table beside ``main`` (title ``main.title: what``, name ``main.name-kind``), same columns."""
    return StudyTable(
        main.study,
        f"{main.title}: {what}",
        main.lengths,
        {},
        name=f"{main.name}-{kind}",
        kind=kind,
        task_columns=list(main.task_columns),
        caption=caption,
    )


def _derived_row(mrow: dict) -> dict:
    """A row of a derived table: ``mrow``'s label, training lengths and seeds, no cells yet."""
    keys = ("published", "published_text", "differs", "cells", "text")
    return {"label": mrow["label"], "train_lengths": mrow["train_lengths"], "seeds": mrow["seeds"]} | {
        k: {} for k in keys
    }


def _learning_table(main: StudyTable, results: list, curves: dict[int, list] | None = None) -> StudyTable:
    t = _derived_table(main, "learnt within the budget, and at which step", "learning", LEARNING_NOTE)
    for mrow in main.rows:
        row = _derived_row(mrow)
        for col in main.task_columns:
            done = recorded(_selected_runs(main, mrow, col, results))
            if not done:
                continue
            steps = [r.summary["learned_at_step"] for r in done]
            learnt = [s for s in steps if s is not None]
            cell = TableCell(statistics.median(learnt) if learnt else None, learnt, None, runs=len(done))
            text = learning_text(steps)
            if not learnt:
                target = next(j.train.learned_accuracy for j, r in results if r is done[0])
                text = " · ".join(x for x in (text, unlearnt_text(done, curves or {}, target)) if x)
            row["cells"][col], row["text"][col], row["differs"][col] = cell, text, None
        t.rows.append(row)
    return t


def _horizon_table(main: StudyTable, results: list) -> StudyTable:
    t = _derived_table(main, "failure horizons", "horizon", HORIZON_NOTE)
    for mrow in main.rows:
        row = _derived_row(mrow)
        for col in main.task_columns:
            done = _selected_runs(main, mrow, col, results)
            if not done:
                continue
            hs = [h for h in ((r.summary or {}).get("horizons") for r in done) if h]
            if not any(h.get("pairs", h.get("families")) or h.get("verified") for h in hs):  # not regular
                row["cells"][col], row["text"][col] = TableCell(runs=len(done)), "n/a"
                continue
            cap = max(h["horizon_max"] for h in hs)
            # a seed without a failure counts as beyond the longest length tested
            vals = [h["horizon"] if h["horizon"] is not None else float("inf") for h in hs]
            med = median_tested(vals)  # a length some seed failed at, never between two
            # numbers in every cell: a horizon beyond the longest length tested is that length, flagged
            # as a lower bound (capped: '>=N', the CSV's capped column)
            cell = TableCell(
                min(med, cap),
                [min(v, cap) for v in vals],
                _selected_lr(mrow, col),
                runs=len(hs),
                capped=med == float("inf"),
            )
            text = _fmt(med, cap)
            if len(vals) > 1 and min(vals) != max(vals):
                text += f" [{_fmt(min(vals), cap)}-{_fmt(max(vals), cap)}]"
            # the pair of states confused first, in the seed that broke first
            first = min((h for h in hs if h["horizon"] is not None), key=lambda h: h["horizon"], default=None)
            pair = _confused(first)
            if pair:
                text += f" ({'|'.join(pair)})"
            if _draw_overclaims(done):
                text += " !"
            if any("verified" not in h for h in hs):
                text += " *"
            row["cells"][col], row["text"][col], row["differs"][col] = cell, text, None
        t.rows.append(row)
    return t


def _confused(h: dict | None) -> list[str] | None:
    """The states of the shortest wrong string (where it ends, the nearest), else the family's pair."""
    if h is None:
        return None
    w = h.get("shortest_wrong")
    if w and w.get("length") == h["horizon"]:
        return [w["state"], w["confused_with"] or "?"]
    return h.get("pair")


def _draw_overclaims(runs: list) -> bool:
    """Whether a run's test draw holds 90% to a length beyond its verified horizon."""
    for r in runs:
        s = r.summary or {}
        h, longest = s.get("horizons") or {}, s.get("longest_90")
        if h.get("horizon") is not None and longest is not None and longest >= h["horizon"]:
            return True
    return False


def _suffix_notes(notes: set[str]) -> str:
    """A column's few-suffix notes in one sentence: the lengths where one suffix alone qualifies, each with
    that suffix written with powers ('(1 0)^125', not 250 symbols), then any other note."""
    ones: dict[str, list[tuple[int, str]]] = {}
    rest = []
    for note in notes:
        if (found := one_suffix(note)) is None:
            rest.append(note)
        else:
            word, what, length = found
            ones.setdefault(what, []).append((length, word))
    parts = [
        "one suffix at length "
        + ", ".join(f"{n} ({w})" for n, w in sorted(found))
        + f": the only suffix of its length that leaves {what} possible, so every string of the long-range "
        "test of that length ends with it"
        for what, found in sorted(ones.items())
    ]
    return "; ".join(parts + sorted(rest, key=_at_length))


def _at_length(note: str) -> int:
    """The test length a suffix note speaks of (its order in the caption)."""
    m = re.search(r"at length (\d+)", note)
    return int(m.group(1)) if m else 0
