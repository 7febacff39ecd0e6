"""The evidence behind each learnability cell of a study with the oracle (``oracle: true``).

A 'possible' cell that no seed tracks at the long lengths is a learnability result: the theory says the
weights exist, training did not find them. The report does not leave it at that. Per such cell it shows

* whether training learnt the task **in distribution** (seeds whose validation reached the run's
  ``learned_accuracy`` for ``learned_validations`` validations in a row, and the median step), so a
  cell that fits the training lengths but falls at length is told apart from one that never fits;
* the **learning curves** (the report's figure of that task's column);
* for a cell no seed learnt in distribution, the **projected steps** its best seed's validation curve
  extrapolates to (``report.projection``), with the hours they take at the run's own pace;
* the **spectrum** of the learned transitions of the best seed's checkpoint (``analysis.spectra``): per
  layer the eigenvalue nearest -1, the largest and smallest modulus over the inputs of a few sample
  sequences, and for layer 1 the eigenvalues of each input symbol alone, with a figure: what a parity
  channel needs is an eigenvalue at -1 for one symbol and at +1 for the other, both of modulus 1; for
  each symbol that permutes the task's states with order d, the eigenvalue nearest a primitive d-th root
  of unity, the inputs after which its angle error loses the count and those over which its amplitude
  halves (``analysis.spectra.cycle_fit``);
* the **construction control**: the row of the study that starts the same layers from a proof's
  construction (``control_of`` in the study file, ``train.init: construction:NAME``), trained under the
  same protocol, and whether its seeds still track the task at the long lengths: the weights exist and
  training keeps them. A cell without such a row says so.

A study compared with a paper's numbers instead (no oracle) gets the same evidence, less the construction,
for every cell of its tables below the paper's number beyond the tolerance (``below_paper_evidence``):
learnt in distribution or not, how far the best seed came and what its curve projects, the spectrum
of its best seed, and the table's construction control of that row and column where it has one (a row
with ``control_of``, read by the table's own statistic).

Both build an ``EvidenceSection`` (``report_evidence`` picks the one a report carries), which the markdown
report renders with its figures as files and the HTML page with its figures inline.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from statetrack.analysis.spectra import channel_text, cycle_text, spectrum
from statetrack.errors import UserError
from statetrack.report.plots import close, save, slug, spectrum_figure, unique_stem
from statetrack.report.state_tables import recorded, selected_pairs, unlearnt_text
from statetrack.report.table import StudyTable, table_runs
from statetrack.report.verdict_tables import TRACKED, VerdictCell, VerdictTable
from statetrack.untrusted import markdown_link

T = TypeVar("T")

CAPTION = (
    f"Each 'possible' cell that no seed tracks (>= {100 * TRACKED:.0f}% at the long lengths): "
    "whether its seeds learnt the task in distribution, its learning curves (the figure of its task "
    "above), the spectrum of the learned transitions of its best seed, and the study's construction "
    "control for it, if any (the same layers started from a proof's weights and trained under the same "
    "protocol)."
)


def spectrum_summary(result: dict) -> str:
    """One line per layer: the eigenvalue nearest -1, the largest and smallest modulus; layer 1's single
    symbols' eigenvalues nearest -1."""
    parts = []
    for layer in result["layers"]:
        if "samples" not in layer:
            parts.append(
                f"layer {layer['layer']} ({layer['mixer']}): {layer.get('no_transition', 'no transition matrix')}"
            )
            continue
        text = (
            f"layer {layer['layer']} ({layer['mixer']}): min Re {layer['min_real']:+.3f}, modulus "
            f"{layer['min_modulus']:.3f}-{layer['max_modulus']:.4f}"
        )
        per = layer.get("per_token_min_real")
        if per and len(per) > 12:  # a large alphabet (a group's elements): the range over the symbols
            lo, hi = min(per.values()), max(per.values())
            text += f"; per input symbol, min Re from {lo:+.3f} to {hi:+.3f} over {len(per)} symbols"
        elif per:
            text += "; per input symbol, min Re " + ", ".join(f"{t}: {v:+.3f}" for t, v in per.items())
        if layer.get("per_token_cycle"):
            text += (
                "; the cycles (per symbol, the eigenvalue nearest a root of unity of the symbol's order): "
                + cycle_text(layer["per_token_cycle"])
            )
        if layer.get("per_channel_cycle"):
            text += "; one channel for every symbol, along whole sequences: " + channel_text(
                layer["per_channel_cycle"]
            )
        parts.append(text)
    return "; ".join(parts)


@dataclass
class Spectrum:
    """The figure of a cell's best seed's spectrum (``analysis.spectra`` result), drawn where it is shown."""

    result: dict
    model: str
    column: str

    @property
    def stem(self) -> str:
        return f"spectrum-{slug(self.model)}-{slug(self.column)}"

    @property
    def alt(self) -> str:
        return f"spectrum of {self.model} on {self.column}"

    def drawn(self, use: Callable[[Any], T]) -> T:
        """Draw the figure, pass it to ``use`` (save it, or read it as SVG), close it; ``use``'s result."""
        fig = spectrum_figure(self.result)
        try:
            return use(fig)
        finally:
            close(fig)


@dataclass
class EvidenceCell:
    """One cell's evidence: its heading and its points in order, a point being a line of text or the
    spectrum's figure (which follows the spectrum's line)."""

    title: str
    items: list[str | Spectrum] = field(default_factory=list)


@dataclass
class EvidenceSection:
    """A report's evidence section: its heading, what it shows, and one entry per cell. The markdown
    report and the HTML page both render it (``markdown``; ``report.html``)."""

    title: str
    caption: str
    cells: list[EvidenceCell]

    def markdown(self, figdir: Path, folder: str, formats=("png",)) -> list[str]:
        """The section's markdown lines (empty when it has no cell); writes each spectrum figure into
        ``figdir`` in ``formats`` (the markdown links the first)."""
        if not self.cells:
            return []
        md = [f"## {self.title}", "", self.caption, ""]
        seen: dict[str, str] = {}  # models 'a b' and 'a-b' slug alike: neither figure replaces the other
        for c in self.cells:
            md += [f"### {c.title}", ""]
            for item in c.items:
                if isinstance(item, str):
                    md.append(f"- {item}")
                elif formats:
                    stem = unique_stem(item.stem, seen, c.title)
                    name = item.drawn(partial(save, folder=figdir, stem=stem, formats=formats))[0].name
                    md.append(markdown_link(item.alt, f"{folder}/{name}", indent="  "))
            md.append("")
        return md


def _spectrum_items(run, seed, model: str, column: str) -> list[str | Spectrum]:
    """The spectrum line of a cell's best seed, and its figure where the checkpoint has transitions."""
    ckpt = getattr(run, "checkpoint", None)
    if not (ckpt and Path(ckpt).is_file()):
        return ["Spectrum: no checkpoint of the best seed is on disk"]
    try:
        result = spectrum(ckpt)
    except (UserError, OSError) as e:
        return [f"Spectrum: the best seed's checkpoint could not be read ({type(e).__name__}: {e})"]
    items: list[str | Spectrum] = [f"Spectrum of the best seed (seed {seed}): {spectrum_summary(result)}."]
    if any("samples" in layer for layer in result["layers"]):
        items.append(Spectrum(result, model, column))
    return items


def _control_text(cell: VerdictCell, table: VerdictTable) -> str:
    ctrl = table.controls.get((cell.model, cell.column))
    if ctrl is None:
        return (
            "no construction control in this study (none in this toolkit for this layer and task, or not run)"
        )
    label = table.control_labels[(cell.model, cell.column)]
    n = len(ctrl.scored)
    if not n:
        return f"control '{label}': no complete run"
    accs = [100 * (s.accuracy or 0.0) for s in ctrl.scored]
    learnt, have = ctrl.learnt_in_distribution()
    return (
        f"control '{label}' (from the construction): tracked by {ctrl.tracked}/{n} seeds, pooled accuracy "
        f"{statistics.median(accs):.1f}% median [{min(accs):.1f}-{max(accs):.1f}]"
        + (f", learnt in distribution {learnt}/{have}" if have else "")
    )


def learnability_evidence(table: VerdictTable, curves: dict[int, list] | None = None) -> EvidenceSection:
    """The evidence of every learnability cell of a study with the oracle (no cell: an empty section).
    ``curves`` (run id -> validation curve): a cell that no seed learnt in distribution gets the steps its
    best seed's curve projects."""
    cells = []
    for c in table.learnability_cells():
        learnt, have = c.learnt_in_distribution()
        steps = [at for _, at, _, _ in c.runs if isinstance(at, int)]
        vals = [v for _, _, v, _ in c.runs if v is not None]
        cell = EvidenceCell(f"{c.model} on {c.column} ({c.verdict_text()})")
        fit = (
            f"learnt in distribution by {learnt}/{have} seeds"
            + (f" (median step {statistics.median(steps):,.0f})" if steps else "")
            if have
            else "no learned_at_step recorded"
        )
        best_val = f"; best validation accuracy {100 * max(vals):.1f}%" if vals else ""
        accs = [100 * (s.accuracy or 0.0) for s in c.scored]
        median, best = c.median(), c.best_seed()
        assert median is not None and best is not None  # a learnability cell has scored seeds
        cell.items.append(
            f"Training: {fit}{best_val}; at the long lengths {statistics.median(accs):.1f}% median "
            f"[{min(accs):.1f}-{max(accs):.1f}] (chance {100 * (median.chance or 0):.0f}%), "
            f"above chance in {c.above}/{len(c.scored)} seeds. Learning curves: the figure of {c.column}."
        )
        done = [r for _, at, _, r in c.runs if at != "n/a"]
        if have and not learnt and curves and c.learned_accuracy is not None:
            cell.items.append(
                f"Projection (the best seed's validation curve, statetrack.report.projection): "
                f"{unlearnt_text(done, curves, c.learned_accuracy)}."
            )
        cell.items += _spectrum_items(c.best_run(), best.seed, c.model, c.column)
        cell.items.append(f"Construction: {_control_text(c, table)}.")
        cells.append(cell)
    return EvidenceSection("Learnability cells: the evidence", CAPTION, cells)


BELOW_CAPTION = (
    "Each cell of the main tables below the paper's number beyond the tolerance: whether its seeds learnt "
    "the task in distribution (at the learning rate the table selected), how far the best one came and "
    "what its validation curve projects (statetrack.report.projection), and the spectrum of the learned "
    "transitions of its best seed (the seed with the best validation accuracy): what tracking needs is "
    "an eigenvalue of modulus 1 at the angle of the task's cycle (-1 for a parity, a rotation for a "
    "counter), and the learning curves are the figure of its task above; and the construction control, "
    "where the table has one: the same layer started from a proof's weights and trained alike."
)


def _below(cell) -> bool:
    """Ours below the paper's published number (a cell above it, or one the paper marks 'x', is no failure
    of training)."""
    pub = cell.published
    if not isinstance(pub, (int, float)) or isinstance(pub, bool):
        return False
    return cell.selected is None or cell.selected < pub


def _table_control_text(rep, t: StudyTable, label: str, col: str, mine: list) -> str:
    """The construction control of the cell (``label``, ``col``) of table ``t``: the row of that table
    whose ``control_of`` names ``label`` and that ran ``col``, read as the table reads every row."""
    tdef = next((td for td in rep.study.tables if td.name == t.name), None)
    controls = {m.label for m in (tdef.models if tdef else []) if m.control_of == label}
    for crow in t.rows:
        if crow["label"] in controls and col in crow["cells"]:
            runs = selected_pairs(t, crow, col, mine)
            if not runs:
                return f"control '{crow['label']}': no complete run"
            steps = [r.summary["learned_at_step"] for r in recorded([r for _, r in runs])]
            learnt = sum(x is not None for x in steps)
            lr = ", ".join(sorted({f"{j.train.lr:g}" for j, _ in runs}))
            return (
                f"control '{crow['label']}' (the same layers from the construction, trained alike at lr "
                f"{lr}): {crow['text'][col]} over {len(runs)} seeds"
                + (f", learnt in distribution {learnt}/{len(steps)}" if steps else "")
            )
    return "no construction control in this study (none in this toolkit for this layer and task, or not run)"


def below_paper_evidence(rep) -> EvidenceSection:
    """The evidence behind every main-table cell that differs from the paper by being below it, for a
    study compared with published numbers (no such cell: an empty section)."""
    cells = []
    for t in rep.tables:
        if not isinstance(t, StudyTable) or t.kind in ("learning", "horizon"):
            continue  # a language-model table, or one derived from a main table (no published numbers)
        mine = table_runs(rep.results, t.name)
        for row in t.rows:
            for col, differs in row["differs"].items():
                cell = row["cells"].get(col)
                if not differs or cell is None or not _below(cell):
                    continue
                runs = selected_pairs(t, row, col, mine)
                if not runs:
                    continue
                done = recorded([r for _, r in runs])
                steps = [r.summary["learned_at_step"] for r in done]
                learnt = sorted(x for x in steps if x is not None)
                fit = f"learnt in distribution by {len(learnt)}/{len(done)} seeds" if done else ""
                if learnt:
                    fit += f" (median step {statistics.median(learnt):,.0f})"
                elif done:
                    fit += f": {unlearnt_text(done, rep.curves, runs[0][0].train.learned_accuracy)}"
                ev = EvidenceCell(f"{row['label']} on {col}")
                ev.items.append(
                    f"Training: {fit or 'no learned_at_step recorded'}; learning curves: the figure of {col}."
                )
                j, best = max(runs, key=lambda jr: (jr[1].summary or {}).get("best_val_accuracy") or 0.0)
                ev.items += _spectrum_items(best, j.seed, row["label"], col)
                ev.items.append(f"Construction: {_table_control_text(rep, t, row['label'], col, mine)}.")
                cells.append(ev)
    return EvidenceSection("Cells below the paper's: the evidence", BELOW_CAPTION, cells)


def report_evidence(rep) -> EvidenceSection:
    """The evidence section a report carries: the learnability cells' with the oracle, else the cells
    below the paper's."""
    if rep.verdicts is not None:
        return learnability_evidence(rep.verdicts, rep.curves)
    return below_paper_evidence(rep)
