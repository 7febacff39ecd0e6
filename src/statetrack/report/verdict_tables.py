"""The theory's verdict beside every cell of a study (``oracle: true`` in the study file).

For each (model, task) cell the oracle (``statetrack.theory.oracle``) gives possible / impossible / open
for the cell's layer spec and task, with its basis; each run (seed) of the cell is scored on its
headline draw (the study's ``test_split``, or the task's own ``eval`` override), pooled over its test
lengths:

* the pooled accuracy of the final label: correct final labels over all sequences of all test lengths;
  for a task with one fixed input (``modcount``: every sequence at a length is the same) each length
  counts once, so the count is the number of lengths;
* chance: the majority share of the pooled distribution of the final label (``tasks.draws``: exact
  where the task computes it). On consecutive lengths of ``modcount:3`` the final labels cycle, so
  chance is 1/3, while at any single length it would be 1;
* its Wilson interval at ``LEVEL`` (99%): the table judges every run of a large grid at once, so a
  wider interval than the reports' usual 95% keeps the number of runs judged off chance by the sampling
  alone small.

A run is *above* chance when the interval's lower end is above chance, *below* when its upper end is
below, else *at* chance; it *tracks* the task when its pooled accuracy is at least ``TRACKED`` (90%, the
threshold of the reports' "longest length with accuracy >= 90%"). An impossible verdict on a group
task comes with a **ceiling**
(``theory.verdicts.quotient_ceiling``): a stack that cannot track the group may still track a quotient
of it (one complex, real or [-1,1] Householder layer tracks the sign of an S3 element: S3 / A3 = C2),
which on uniformly distributed labels is worth 1/|kernel| (1/3 for S3); for A5, parity and counting
the ceiling is chance. A cell **agrees** when the verdict is impossible and no seed is above the ceiling
or below chance (for most cells: every seed at chance; where a quotient is tracked, anywhere from 0 to
its ceiling, since knowing the coset lets a layer name an element of the wrong one as well), or possible
and some seed tracks the task; it **disagrees** when the verdict is impossible and some seed is outside
that band (a bug, or a theorem misread: to be found); a possible cell in which no seed tracks the task is a
**learnability** result (the weights exist, training did not find them; the cell says how many seeds
rose above chance); an open cell is reported with its measurements only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from statetrack.config import Split
from statetrack.report.render import grid_markdown
from statetrack.runs.store import RunStatus
from statetrack.tasks import draws, get_task
from statetrack.theory.actions import task_algebra
from statetrack.theory.verdicts import Decision, oracle
from statetrack.training.evaluation import wilson

LEVEL = 0.99
Z = 2.5758293035489  # the two-sided 99% normal quantile
TRACKED = 0.9  # a seed tracks the task when its pooled accuracy at the long lengths is at least this


class Outcome(StrEnum):
    """How a cell's measurements stand against the oracle's verdict (see ``CAPTION``)."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    LEARNABILITY = "learnability"  # a 'possible' cell that no seed tracks
    OPEN = "open"
    MISSING = "missing"


OUTCOMES = tuple(Outcome)
DECIDED = (Outcome.AGREES, Outcome.DISAGREES, Outcome.LEARNABILITY)
SYMBOL = {Decision.POSSIBLE: "yes", Decision.IMPOSSIBLE: "no", Decision.OPEN: "open"}


@dataclass
class SeedScore:
    seed: int
    accuracy: float | None
    low: float | None
    high: float | None
    chance: float | None
    n: int
    lengths: list[int]
    split: Split

    def measured(self) -> tuple[float, float, float, float]:
        """(accuracy, low, high, chance) of a scored seed (one whose judgement is not n/a)."""
        assert self.accuracy is not None and self.low is not None and self.high is not None
        assert self.chance is not None
        return self.accuracy, self.low, self.high, self.chance

    @property
    def judgement(self) -> str:
        """above / at / below chance, or n/a (no scored length)."""
        if self.accuracy is None or self.chance is None or self.low is None or self.high is None:
            return "n/a"
        if self.low > self.chance:
            return "above"
        if self.high < self.chance:
            return "below"
        return "at"


@dataclass
class VerdictCell:
    model: str
    column: str
    layers: str
    task: str
    verdict: Decision
    basis: str
    reason: str
    seeds: list[SeedScore] = field(default_factory=list)
    ceiling: float | None = None  # impossible verdicts on group tasks: the trackable quotient's accuracy
    quotient: int | None = None  # ... and that quotient's order
    #: per complete run: (seed, step at which it learnt the task in distribution or None, best validation
    #: accuracy, the run's result) -- the learnability evidence reads these
    runs: list[tuple] = field(default_factory=list)
    #: the runs' learned_accuracy (the in-distribution accuracy that counts as learnt)
    learned_accuracy: float | None = None

    @property
    def scored(self) -> list[SeedScore]:
        return [s for s in self.seeds if s.judgement != "n/a"]

    @property
    def outcome(self) -> Outcome:
        scored = self.scored
        if not scored:
            return Outcome.MISSING
        if self.verdict == Decision.OPEN:
            return Outcome.OPEN
        if self.verdict == Decision.IMPOSSIBLE:
            return Outcome.AGREES if all(self.within_ceiling(s) for s in scored) else Outcome.DISAGREES
        return Outcome.AGREES if self.tracked else Outcome.LEARNABILITY

    def within_ceiling(self, s: SeedScore) -> bool:
        """Not above what the trackable quotient allows (chance, for most cells), and not below chance
        unless the layer tracks a quotient: a layer that knows the coset (S3's sign) may as well name an
        element of the other coset, anywhere from 0 to the ceiling; without a quotient, below chance
        would tell the labels apart as surely as above."""
        if s.judgement == "below":
            return bool(self.ceiling and s.chance is not None and self.ceiling > s.chance + 1e-9)
        top = max(s.chance or 0.0, self.ceiling or 0.0)
        return s.low is not None and s.low <= top

    def verdict_text(self) -> str:
        """'yes T5', 'no T1', 'no T5, ceiling 33% (C2 tracked)', 'open'."""
        if self.verdict == Decision.OPEN:
            return "open"
        out = f"{SYMBOL[self.verdict]} {self.basis}"
        m = self.median()
        if (
            self.verdict == Decision.IMPOSSIBLE
            and self.ceiling
            and m is not None
            and m.chance is not None
            and self.ceiling > m.chance + 1e-9
        ):
            out += f", ceiling {100 * self.ceiling:.0f}% (a quotient of order {self.quotient} tracked)"
        return out

    @property
    def tracked(self) -> int:
        """Seeds whose pooled accuracy is at least TRACKED."""
        return sum(1 for s in self.scored if (s.accuracy or 0.0) >= TRACKED)

    @property
    def above(self) -> int:
        """Seeds above chance."""
        return sum(1 for s in self.scored if s.judgement == "above")

    def median(self) -> SeedScore | None:
        """The seed with the median pooled accuracy (the lower of the two middle ones)."""
        scored = sorted(self.scored, key=lambda s: s.accuracy or 0.0)
        return scored[(len(scored) - 1) // 2] if scored else None

    def text(self) -> str:
        """'acc% [lo-hi], tracked 1/3, above chance 2/3 (chance c%); yes T5: agrees' (the median seed's accuracy
        and interval)."""
        verdict = self.verdict_text()
        m = self.median()
        if m is None:
            return f"- ; {verdict}: missing"
        n = len(self.scored)
        accuracy, low, high, chance = m.measured()
        acc = (
            f"{100 * accuracy:.0f}% [{100 * low:.0f}-{100 * high:.0f}], tracked {self.tracked}/{n}, "
            f"above chance {self.above}/{n} (chance {100 * chance:.0f}%)"
        )
        return f"{acc}; {verdict}: {self.outcome}"

    def learnt_in_distribution(self) -> tuple[int, int]:
        """(seeds that learnt the task in distribution, seeds with the measurement)."""
        have = [at for _, at, _, _ in self.runs if at != "n/a"]
        return sum(1 for at in have if at is not None), len(have)

    def best_seed(self) -> SeedScore | None:
        """The seed with the highest pooled accuracy."""
        return max(self.scored, key=lambda s: s.accuracy or 0.0, default=None)

    def best_run(self):
        """The complete run of the best seed (its checkpoint shows what training found), or None."""
        best = self.best_seed()
        return next((r for seed, _, _, r in self.runs if best is not None and seed == best.seed), None)


@dataclass
class VerdictTable:
    study: str
    columns: list[str]
    rows: list[tuple[str, list[VerdictCell | None]]]
    #: control rows (``control_of`` in the study): (controlled row, column) -> the control's cell
    controls: dict[tuple[str, str], VerdictCell] = field(default_factory=dict)
    control_labels: dict[tuple[str, str], str] = field(default_factory=dict)

    def learnability_cells(self) -> list[VerdictCell]:
        return [c for c in self.cells() if c.outcome == Outcome.LEARNABILITY]

    def cells(self) -> list[VerdictCell]:
        return [c for _, cs in self.rows for c in cs if c is not None]

    def counts(self) -> dict[Outcome, int]:
        out = dict.fromkeys(OUTCOMES, 0)
        for c in self.cells():
            out[c.outcome] += 1
        return out

    def summary(self) -> str:
        """The agreement count in one sentence."""
        k = self.counts()
        decided = sum(k[o] for o in DECIDED)
        imp = [c for c in self.cells() if c.verdict == Decision.IMPOSSIBLE and c.outcome != Outcome.MISSING]
        pos = [c for c in self.cells() if c.verdict == Decision.POSSIBLE and c.outcome != Outcome.MISSING]
        partial = sum(1 for c in pos if c.outcome == Outcome.LEARNABILITY and c.above)
        return (
            f"The measurements agree with the theory in {k[Outcome.AGREES]} of {decided} decided cells: "
            f"{sum(c.outcome == 'agrees' for c in imp)} of {len(imp)} 'impossible' cells stay at chance (or, "
            f"where the layer can track a quotient of the group, within that quotient's ceiling) in every "
            f"seed ({self._disagreements(imp)}), and {sum(c.outcome == 'agrees' for c in pos)} of "
            f"{len(pos)} 'possible' cells were learned (some seed tracks the task: >= {100 * TRACKED:.0f}% at "
            f"the long lengths); the other {k[Outcome.LEARNABILITY]} 'possible' cells are learnability results (the "
            f"weights exist, training did not find them; {partial} of them rose above chance{self._fit()}). "
            f"{k[Outcome.OPEN]} cells are open (no result decides them); {k[Outcome.MISSING]} have no complete run."
        )

    def _fit(self) -> str:
        """Of the learnability cells whose runs recorded steps-to-learn: how many fit the training lengths in
        some seed and still lost the task at the test lengths (length generalisation failed), and how many
        never fit them (the optimisation failed); '' when no run recorded it."""
        measured = [c.learnt_in_distribution() for c in self.learnability_cells()]
        measured = [m for m in measured if m[1]]
        if not measured:
            return ""
        fit = sum(1 for learnt, _ in measured if learnt)
        return (
            f"; of the {len(measured)} whose runs recorded when they learnt, {fit} fit the training lengths "
            f"in some seed and lost the task at the test lengths, {len(measured) - fit} never fit them"
        )

    @staticmethod
    def _disagreements(imp: list[VerdictCell]) -> str:
        """'0 do not', or '2 do not: DCD / A5 seed 2 at 4.5% [2.3-8.8] (chance 1.7%), ...; of the 180 seeds
        judged at 99%, about 1.8 fall outside chance by the sampling alone'."""
        bad = [c for c in imp if c.outcome == Outcome.DISAGREES]
        if not bad:
            return "0 do not"
        off = [(c, s) for c in bad for s in c.scored if not c.within_ceiling(s)]
        seeds = sum(len(c.scored) for c in imp)
        listed = "; ".join(
            f"{c.model} / {c.column} seed {s.seed} at {100 * a:.1f}% [{100 * lo:.1f}-{100 * hi:.1f}] "
            f"(chance {100 * ch:.1f}%)"
            for c, s in off
            for a, lo, hi, ch in [s.measured()]
        )
        return (
            f"{len(bad)} do not: {listed}; of the {seeds} seeds of these cells judged at {100 * LEVEL:.0f}%, "
            f"about {(1 - LEVEL) * seeds:.1f} fall outside chance by the sampling alone"
        )

    def leaderboard(self) -> list[tuple[str, int, int, int]]:
        """(model, tasks tracked by some seed, cells that agree, cells judged), best first."""
        out = []
        for label, cells in self.rows:
            cs = [c for c in cells if c is not None]
            learned = sum(1 for c in cs if c.tracked)
            agree = sum(1 for c in cs if c.outcome == Outcome.AGREES)
            judged = sum(1 for c in cs if c.outcome in DECIDED)
            out.append((label, learned, agree, judged))
        return sorted(out, key=lambda r: (-r[1], -r[2], r[0]))

    def markdown(self) -> str:
        return grid_markdown(
            ["model", *self.columns],
            [[label, *("-" if c is None else c.text() for c in cells)] for label, cells in self.rows],
        )

    def csv_rows(self) -> list[dict]:
        rows = []
        for c in self.cells():
            for s in c.seeds:
                rows.append(
                    {
                        "model": c.model,
                        "task": c.column,
                        "layers": c.layers,
                        "task_string": c.task,
                        "verdict": c.verdict,
                        "basis": c.basis,
                        "ceiling": c.ceiling,
                        "outcome": c.outcome,
                        "seed": s.seed,
                        "split": s.split,
                        "lengths": f"{min(s.lengths)}-{max(s.lengths)}" if s.lengths else "",
                        "accuracy": s.accuracy,
                        f"low_{100 * LEVEL:.0f}": s.low,
                        f"high_{100 * LEVEL:.0f}": s.high,
                        "chance": s.chance,
                        "n": s.n,
                        "judgement": s.judgement,
                    }
                )
        return rows


CAPTION = (
    f"Cells: the pooled accuracy of the final label over the test lengths of the median seed, its "
    f"{100 * LEVEL:.0f}% (Wilson) interval, the seeds that track the task (>= {100 * TRACKED:.0f}%) and "
    "those above chance, and the chance level; then the "
    "oracle's verdict (yes / no / open) with its basis (docs/science.md; for an 'impossible' cell whose "
    "layer can still track a quotient of the group, the accuracy that quotient allows: its ceiling) and "
    "the outcome: agrees, disagrees (an 'impossible' cell above its ceiling in some seed, or below "
    "chance where it tracks no quotient), learnability (a 'possible' cell no seed tracks) or open. A seed "
    "is above (below) chance when its interval lies above (below) chance."
)


def _pooled_chance(task, split: Split, lengths: list[int], weights: list[int]) -> float | None:
    total = None
    for n, w in zip(lengths, weights, strict=True):
        dist, _ = draws.label_distribution(task, split, n)
        dist = np.asarray(dist, dtype=np.float64) * w
        total = dist if total is None else total + dist
    if total is None or total.sum() <= 0:
        return None
    return float(total.max() / total.sum())


def seed_score(job, result, task, fixed_input: bool) -> SeedScore:
    """One run's pooled score on its headline draw (see the module docstring)."""
    split = job.eval.splits[0]
    scored = [m for m in result.metrics if m.accuracy is not None and m.n_sequences]
    if not scored:
        return SeedScore(job.seed, None, None, None, None, 0, [], split)
    weights = [1 if fixed_input else m.n_sequences for m in scored]
    correct = sum(m.accuracy * w for m, w in zip(scored, weights, strict=True))
    n = sum(weights)
    k = int(round(correct))
    low, high = wilson(k, n, Z)
    chance = _pooled_chance(task, split, [m.length for m in scored], weights)
    return SeedScore(job.seed, correct / n, low, high, chance, n, [m.length for m in scored], split)


def verdict_table(study, results, decide=oracle) -> VerdictTable:
    """The oracle's verdict and the pooled scores for every (model, task) cell of the study's grid
    (``results``: (Job, RunResult or None), as ``report.collect.collect`` reads them). ``decide(layers,
    task)``: the verdict (the oracle; a scorecard of a mixer that declares nothing gives 'open')."""
    columns: list[str] = []
    rows: list[tuple[str, list[VerdictCell | None]]] = []
    by_cell: dict[tuple[str, str], VerdictCell] = {}
    order: list[str] = []
    info: dict[str, tuple] = {}
    control_of = {m.label: m.control_of for t in study.tables for m in t.models if m.control_of}
    for job, res in results:
        col = job.column or "main"
        if col not in columns:
            columns.append(col)
        if job.label not in order and job.label not in control_of:
            order.append(job.label)
        key = (job.label, col)
        cell = by_cell.get(key)
        if cell is None:
            v = decide(job.train.model.layers, job.train.task)
            cell = by_cell[key] = VerdictCell(
                job.label,
                col,
                job.train.model.layers,
                job.train.task,
                v.verdict,
                v.qualified_basis,
                v.reason,
                ceiling=v.facts.get("accuracy_ceiling"),
                quotient=v.facts.get("quotient_tracked"),
            )
        if res is None or res.status != RunStatus.COMPLETE:
            continue
        if job.train.task not in info:
            t = get_task(job.train.task)
            info[job.train.task] = (t, bool(task_algebra(job.train.task).fixed_input))
        task, fixed = info[job.train.task]
        cell.seeds.append(seed_score(job, res, task, fixed))
        summary = res.summary or {}
        cell.learned_accuracy = job.train.learned_accuracy
        cell.runs.append(
            (job.seed, summary.get("learned_at_step", "n/a"), summary.get("best_val_accuracy"), res)
        )
    for label in order:
        rows.append((label, [by_cell.get((label, c)) for c in columns]))
    table = VerdictTable(study.name, columns, rows)
    for (label, col), cell in by_cell.items():
        if label in control_of:
            table.controls[(control_of[label], col)] = cell
            table.control_labels[(control_of[label], col)] = label
    return table
