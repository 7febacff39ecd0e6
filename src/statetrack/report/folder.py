"""A report folder's record of what it holds, and the guard that keeps a report from being replaced by a
smaller one.

``index.json`` in a report folder holds one record per study written there (by ``write_report``, the
markdown / CSV / LaTeX files, and by ``write_html``, the page): its scale, seeds per cell, runs of the grid
and how many were complete, the files written, the finding's first sentence, and what ``index.html`` shows.

A report replaces the one already in the folder only when it holds at least as much: the same scale, at
least as many seeds per cell and at least as many complete runs. Otherwise writing it is refused with one
line (a ``ReportExists`` error: the command line's exit code 2) that says what each holds and how to go on:
``--force`` (``force=True``) replaces it, ``--out DIR`` writes elsewhere. A folder written before these
records were kept has its extent read from the markdown's "Runs of the grid" line and the CSV's seeds.
Reading a record never runs anything: it is JSON, and a record that cannot be read counts as none.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from statetrack.errors import UserError
from statetrack.files import check_writable, write_file
from statetrack.untrusted import name_problem, read_head, read_json

INDEX = "index.json"


class ReportExists(UserError):
    """Writing a report would replace one that holds more (another scale, more seeds or more runs)."""


def read_index(folder) -> dict[str, dict]:
    """The records of ``folder``/index.json (an unreadable, damaged or absent file: none), keyed by study
    name; a record under a key that is not a study name (``untrusted.name_problem``) is dropped: the file
    may come from others, and the index builds its links from these names."""
    try:
        data = read_json(Path(folder) / INDEX, "report index", follow=False)  # a link reads as no index
    except (OSError, ValueError, UserError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict) and name_problem(k) is None}


def update_record(folder, study: str, record: dict) -> dict[str, dict]:
    """Merge ``record`` into the study's record in ``folder``/index.json (the files written before and
    not now stay named); returns every record."""
    records = read_index(folder)
    old = records.get(study, {})
    records[study] = {**old, **{k: v for k, v in record.items() if v is not None or k not in old}}
    write_file(Path(folder) / INDEX, json.dumps(records, indent=1, sort_keys=True) + "\n", what="report")
    return records


@dataclass(frozen=True)
class Extent:
    """How much a report holds: its scale, seeds per cell, and complete runs of the grid."""

    scale: str | None
    seeds: int | None
    complete: int | None

    def text(self) -> str:
        parts = [
            f"{self.complete} complete run{'s' if self.complete != 1 else ''}"
            if self.complete is not None
            else "an unknown number of runs",
            f"{self.seeds} seed{'s' if self.seeds != 1 else ''} per cell" if self.seeds is not None else "",
            f"scale {self.scale}" if self.scale else "",
        ]
        return ", ".join(p for p in parts if p)


def _legacy_extent(folder: Path, study: str) -> Extent | None:
    """The extent of a report written without a record: from its markdown and CSV (None: no report)."""
    md = folder / f"{study}.md"
    if not md.is_file():
        return None
    try:  # the folder may come from others: its files read where they are (no link), the first bytes only
        text = read_head(md, 200_000, follow=False).decode(errors="replace")
    except OSError:
        return Extent(None, None, None)
    done = re.search(r"Runs of the grid: \d+; complete: (\d+)", text)
    scale = re.search(r"\(scale `([^`]+)`\)", text)
    seeds = None
    try:
        head = read_head(folder / f"{study}.csv", 2_000_000, follow=False).decode(errors="replace")
        rows = list(csv.DictReader(io.StringIO(head)))
        counts = [int(r["seeds"]) for r in rows if (r.get("seeds") or "").isdigit()]
        seeds = max(counts) if counts else None
    except (OSError, csv.Error, KeyError):
        pass
    return Extent(scale[1] if scale else None, seeds, int(done[1]) if done else None)


def existing(folder, study: str) -> Extent | None:
    """What the report of ``study`` already in ``folder`` holds (None: there is none)."""
    folder = Path(folder)
    r = read_index(folder).get(study)
    if r is not None and (r.get("page") or r.get("markdown")):

        def num(k):
            return r[k] if isinstance(r.get(k), int) else None

        return Extent(
            r.get("scale") if isinstance(r.get("scale"), str) else None, num("seeds"), num("complete")
        )
    return _legacy_extent(folder, study)


def smaller(old: Extent, new: Extent) -> str:
    """Why ``new`` holds less than ``old`` ('' when it holds at least as much)."""
    if old.scale is not None and new.scale is not None and old.scale != new.scale:
        return f"another scale ({new.scale}, not {old.scale})"
    if old.seeds is not None and new.seeds is not None and new.seeds < old.seeds:
        return f"fewer seeds per cell ({new.seeds}, not {old.seeds})"
    if old.complete is not None and new.complete is not None and new.complete < old.complete:
        return f"fewer complete runs ({new.complete}, not {old.complete})"
    if old.complete is None and old.scale is None and old.seeds is None:
        return "an unknown relation to it (the earlier report's extent cannot be read)"
    return ""


def check_replace(folder, study: str, new: Extent, force: bool = False) -> None:
    """Refuse (``ReportExists``, one line) to write a report of ``study`` into ``folder`` that would replace
    one holding more; ``force``: replace it anyway."""
    if force:
        return
    old = existing(folder, study)
    if old is None:
        return
    why = smaller(old, new)
    if why:
        raise ReportExists(
            f"not replacing the report of {study} in {str(folder)!r}: it holds {old.text()}; this "
            f"one has {why}; write it elsewhere with --out DIR, or replace it with --force "
            "(force=True in Python)"
        )


def check_out(folder, study: str, new: Extent, force: bool = False) -> None:
    """Before a report is made: files can be written in ``folder``, and the report of ``study`` there holds
    no more than ``new`` (``check_replace``); each refusal is one line."""
    check_writable(folder, f"cannot write the report in {str(folder)!r}")
    check_replace(folder, study, new, force)


@dataclass(frozen=True)
class Placement:
    """Where a reproduction writes its report and at how many seeds per cell (``seeds``: None keeps the
    scale's); ``note`` says what changed and why ('' when nothing did)."""

    folder: Path
    seeds: int | None
    note: str = ""


def place_report(folder, study: str, new: Extent) -> Placement:
    """Where a reproduction that chose neither its folder nor its seeds writes, so that rerunning it never
    fails on a report written since (``statetrack reproduce`` without --out, --seeds or --force):

    - the folder holds no report of ``study`` or one holding no more than ``new``: there, as asked;
    - it holds one at the same scale with more seeds per cell: it *reuses* them, reproducing at those seeds
      (the sweep reuses the runs the database holds and trains only those it lacks), so the report there
      is rewritten at its own extent;
    - it holds one at another scale (or with more complete runs): it writes *beside* it, in the sibling
      folder ``<folder>-<scale>-<seeds>seed``, and leaves it as it is.
    """
    folder = Path(folder)
    old = existing(folder, study)
    why = "" if old is None else smaller(old, new)
    if old is None or not why:
        return Placement(folder, new.seeds)
    if old.scale == new.scale and old.seeds is not None and new.seeds is not None and old.seeds > new.seeds:
        return Placement(
            folder,
            old.seeds,
            f"{str(folder)!r} holds the report of {study} at {old.text()}: reproducing it at {old.seeds} "
            f"seeds per cell, reusing the runs the database holds (--seeds {new.seeds} --out DIR: a report "
            "of its own)",
        )
    beside = folder.with_name(f"{folder.name}-{new.scale}-{new.seeds}seed")
    return Placement(
        beside,
        new.seeds,
        f"{str(folder)!r} holds a report of {study} with {old.text()} (this one would have {why}): writing "
        f"this one beside it, in {str(beside)!r} (--force replaces that one)",
    )
