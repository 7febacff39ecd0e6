"""What a study found, in a few sentences: the headline at the top of its report and of its card in the
index, computed from the report's tables (nothing here is written by hand).

* the agreement with the paper: how many cells with a published number agree within the study's tolerance,
  and each cell that differs (ours beside the paper's);
* per table of accuracy at each length, how far each model holds (the '>=90% up to' length, grouped);
* for a study with the oracle's verdicts, its one-sentence count;
* why differences are expected: what the scale reported changes from the paper's protocol (steps, seeds,
  test lengths), read from the study file, and which runs are missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statetrack.report.lm_tables import LMTable
from statetrack.report.render import fmt_len, fmt_published
from statetrack.report.table import StudyTable

#: the cells that differ listed in the headline (the rest are counted; all are marked in the tables)
SHOWN = 8


@dataclass
class Finding:
    """The headline of a report: ``agreement`` (one sentence), ``differs`` (one item per cell that differs
    from the paper: model, column, ours, paper), ``holds`` (one sentence per per-length table), ``theory``
    (the verdicts' count, or ''), ``why`` (what the scale changes from the paper's protocol, or '') and
    ``missing`` (how many runs of the grid have no complete record)."""

    agreement: str
    differs: list[str] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    theory: str = ""
    why: str = ""
    missing: int = 0
    compared: int = 0
    agree: int = 0

    def shown_differs(self, at_most: int = SHOWN) -> list[str]:
        """The cells that differ, at most ``at_most`` of them, then how many more (all are marked in the
        tables)."""
        if len(self.differs) <= at_most:
            return list(self.differs)
        return [*self.differs[:at_most], f"and {len(self.differs) - at_most} more, marked * in the tables"]

    def lines_md(self) -> list[str]:
        """The finding as markdown paragraphs (the differing cells as a list)."""
        out = [f"**{self.agreement}**", ""]
        if self.differs:
            out += ["Cells that differ (ours, then the paper's; marked * in the tables):", ""]
            out += [f"- {x}" for x in self.shown_differs()] + [""]
        for x in [*self.holds, self.theory, self.why]:
            if x:
                out += [x, ""]
        return out

    def lines(self) -> list[str]:
        """The finding as plain sentences (markdown, the terminal)."""
        out = [self.agreement]
        if self.differs:
            out.append("Differs: " + "; ".join(self.shown_differs()) + ".")
        out += self.holds
        if self.theory:
            out.append(self.theory)
        if self.why:
            out.append(self.why)
        return out


def _holds(t) -> str:
    """'Longest test length with accuracy >= 90% (and at every shorter one): 10000, the longest tested: RNN;
    32: Neg. Mamba (len 8); none (below 90% at 16): S4D, Mamba.' for a per-length table ('' for other
    kinds)."""
    if t.kind != "per_length" or not t.lengths:
        return ""
    groups: dict[str, list[str]] = {}
    for r in t.rows:
        if r["longest"]:  # the runs' longest lengths (None: none held): the median of the tested ones
            groups.setdefault(fmt_len(r["longest"]).split(" ")[0], []).append(r["label"])
    if not groups:
        return ""
    top = max(t.lengths)

    def key(text: str) -> int:
        return 0 if text == "x" else int(float(text.removeprefix(">=")))

    parts = []
    for text in sorted(groups, key=key, reverse=True):
        names = ", ".join(groups[text])
        if text == "x":
            parts.append(f"none (below 90% at {min(t.lengths)}): {names}")
        elif key(text) >= top:
            parts.append(f"{top}, the longest tested: {names}")
        else:
            parts.append(f"{text}: {names}")
    where = "" if t.name == "main" else f" in table {t.name}"
    return (
        f"Longest test length with accuracy >= 90% (and at every shorter one){where}: "
        + "; ".join(parts)
        + "."
    )


def _scale_text(study, scale: str, seeds: int | None = None) -> str:
    sc = study.scales.get(scale)
    if sc is None:
        return ""
    seeds = sc.seeds if seeds is None else seeds
    own = [
        f"{name}: {over['steps']:,}"
        for overrides in (sc.model_train, sc.task_train, sc.cells_train())
        for name, over in overrides.items()
        if "steps" in over
    ]
    steps = f"{sc.steps:,} training steps" + (" (" + "; ".join(own) + ")" if own else "")
    return f"{steps}, {seeds} seed{'s' if seeds > 1 else ''} per cell, test lengths up to {max(sc.test_lengths):,}"


def protocol_changes(study, scale: str) -> list[str] | None:
    """How a scale departs from the study's paper scale, cell by cell over the cells both run: their
    training steps, learning-rate grids, widths (d_model) and longest test length, and the seeds per cell;
    e.g. ``["fewer steps", "smaller models"]`` (``"fewer steps in some cells, more in others"`` where
    both). [] for the paper scale; None where there is nothing to compare (no paper scale, or no cell
    that both scales run)."""
    if scale == "paper":
        return []
    if scale not in study.scales or "paper" not in study.scales:
        return None

    def knobs(name: str) -> dict:  # cell -> (steps, learning rates, width, longest test length)
        return {
            (c.table, c.label, c.column): (
                c.fields["steps"],
                len(c.lrs),
                c.fields["model"].d_model,
                max(c.eval.lengths),
            )
            for c in study.grid_cells(name)
        }

    ours, paper = knobs(scale), knobs("paper")
    both = ours.keys() & paper.keys()
    if not both:
        return None
    names = [
        ("steps", "fewer", "more"),
        ("learning rates", "fewer", "more"),
        ("models", "smaller", "larger"),
        ("test lengths", "shorter", "longer"),
    ]
    sc, pa = study.scales[scale].seeds, study.scales["paper"].seeds
    out = [] if sc == pa else [f"{'fewer' if sc < pa else 'more'} seeds"]
    for i, (what, less, more) in enumerate(names):
        lo = any(ours[c][i] < paper[c][i] for c in both)
        hi = any(ours[c][i] > paper[c][i] for c in both)
        if lo and hi:
            out.append(f"{less} {what} in some cells, {more} in others")
        elif lo or hi:
            out.append(f"{less if lo else more} {what}")
    return out


def why(study, scale: str, seeds: int | None = None) -> str:
    """What the reported scale changes from the paper's protocol ('' at the paper's scale, or for a study
    without one); ``seeds``: those per cell of the report (the scale's own by default)."""
    if scale == "paper" or "paper" not in study.scales:
        return ""
    return (
        f"Why differences are expected: this is the {scale} scale ({_scale_text(study, scale, seeds)}); the "
        f"paper's protocol (--scale paper) has {_scale_text(study, 'paper')}."
    )


def difference_items(t: StudyTable | LMTable, study) -> tuple[str, list[str]]:
    """(headline, one item per cell that differs from the paper beyond the tolerance). An LM table has no
    published cells: its items are its verdict lines, with no headline."""
    if isinstance(t, LMTable):
        return "", list(t.notes)
    out = []
    for r in t.rows:
        for col, d in r["differs"].items():
            if not d:
                continue
            cell = r["cells"].get(col)
            if cell is not None and t.kind != "per_length":
                out.append(
                    f"{r['label']}, {col}: ours {r['text'][col].removesuffix(' *')}, paper "
                    f"{fmt_published(cell.published, study)}"
                )
            else:
                out.append(f"{r['label']}, {t.columns.get(col, col)}: paper {r['published_text'][col]}")
    if not out:
        n = sum(1 for r in t.rows for d in r["differs"].values() if d is False)
        return (
            f"Every cell with a published number ({n}) agrees with the paper within the tolerance."
            if n
            else ""
        ), []
    return f"{len(out)} cell(s) differ from the paper beyond the tolerance (marked *):", out


def finding(rep) -> Finding:
    """The headline of ``rep`` (a ``report.collect.Report``)."""
    compared, agree = rep.agreement()
    differs = []
    for t in rep.tables:
        _, items = difference_items(t, rep.study)
        if not isinstance(t, LMTable):
            differs += [(x if t.name == "main" else f"{x} (table {t.name})") for x in items]
    if compared:
        agreement = f"{agree} of {compared} cells with a published number agree with the paper" + (
            " (every one)."
            if agree == compared
            else f"; {compared - agree} differ{'s' if compared - agree == 1 else ''} beyond the tolerance."
        )
    names = {t.name for t in rep.study.tables}
    holds = [h for t in rep.tables if t.name in names and (h := _holds(t))]
    theory = rep.verdicts.summary() if getattr(rep, "verdicts", None) is not None else ""
    if not compared:  # no published number: the theory's count leads, where the study has one
        agreement = (
            theory.split(":")[0] + " (no cell has a published number)."
            if theory
            else "No cell of this report has a published number to compare with."
        )
    because = why(rep.study, rep.scale, rep.seeds) if compared else ""
    return Finding(agreement, differs, holds, theory, because, rep.missing, compared, agree)
