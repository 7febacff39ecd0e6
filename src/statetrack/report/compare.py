"""Any stored runs side by side: their configs with the differences marked, their accuracy at each test
length with its 95% interval and whether two runs differ beyond their intervals, and one figure of
accuracy against length and of the learning curves (``statetrack runs compare``, ``statetrack plot``).

Runs are named as every command names them (``Store.find``): an id, ``last``, or a label. Two runs
*differ beyond their intervals* at a length when their 95% (Wilson) intervals of the accuracy there do
not overlap: then sampling the test sequences alone does not explain the difference (an overlap does not
prove them equal). Reading the database never writes to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.report.plots import (
    FORMATS,
    MARKERS,
    STYLES,
    length_ticks,
    outside_legend,
    pyplot,
    save_figure,
    slug,
)
from statetrack.runs.store import RunRecord, Store
from statetrack.training.evaluation import LengthMetrics

#: the most runs one comparison or figure holds (a table or a legend wider than that is not read)
MAX_RUNS = 12


@dataclass
class Compared:
    """One run of a comparison: its database row, the name it was given, and its metrics by length."""

    row: RunRecord
    name: str
    metrics: dict[int, LengthMetrics]
    curve: list[dict]

    @property
    def header(self) -> str:
        """'run 3 (s3)': the column header of this run."""
        label = self.row.label
        return f"run {self.row.id}" + (f" ({label})" if label else "")


@dataclass
class Comparison:
    """``runs``, the config keys (``config``: key -> one value per run, ``differs``: the keys whose values
    differ), the test lengths of any run, and per length the pairs of runs (indices) that differ beyond
    their intervals."""

    runs: list[Compared]
    config: dict[str, list]
    differs: list[str]
    lengths: list[int]
    beyond: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    split: Split = Split.TEST

    def verdict(self, length: int) -> str:
        """Whether the runs differ beyond their intervals at ``length``: 'no', 'yes' (two runs), or the pairs
        by run id ('3 > 5; 3 > 7'); '-' where fewer than two runs are scored."""
        scored = [r for r in self.runs if _acc(r, length) is not None]
        if len(scored) < 2:
            return "-"
        pairs = self.beyond.get(length, [])
        if not pairs:
            return "no"
        if len(self.runs) == 2:
            return "yes"
        out = []
        for i, j in pairs:
            hi, lo = (
                (i, j) if (_acc(self.runs[i], length) or 0) > (_acc(self.runs[j], length) or 0) else (j, i)
            )
            out.append(f"{self.runs[hi].row.id} > {self.runs[lo].row.id}")
        return "; ".join(out)

    def caption(self) -> str:
        """What the intervals say, in one sentence that follows them: at which lengths (if any) two runs differ
        beyond their 95% intervals, and what that does and does not tell."""
        scored = [n for n in self.lengths if self.verdict(n) != "-"]
        beyond = [n for n in scored if self.beyond.get(n)]
        if not scored:
            return "beyond the intervals: no length is scored in two runs, so nothing is compared"
        if not beyond:
            return (
                f"beyond the intervals: at none of the {len(scored)} lengths scored; the runs' 95% intervals "
                "overlap at each, so sampling the test sequences can explain any difference (an overlap "
                "does not prove the runs equal)"
            )
        where = ", ".join(str(n) for n in beyond)
        return (
            f"beyond the intervals: at {len(beyond)} of {len(scored)} lengths scored ({where}); there the "
            "runs' 95% intervals do not overlap, so sampling the test sequences does not explain the "
            "difference" + ("; '3 > 5': run 3 above run 5" if len(self.runs) > 2 else "")
        )

    def as_dict(self) -> dict:
        """The comparison as JSON: runs, config (with ``differs``), and per length each run's accuracy,
        interval and the pairs beyond the intervals."""
        return {
            "runs": [{"run_id": r.row.id, "label": r.row.label, "name": r.name} for r in self.runs],
            "split": self.split,
            "config": [{"key": k, "values": v, "differs": k in self.differs} for k, v in self.config.items()],
            "lengths": [
                {
                    "length": n,
                    "runs": [_metric(r, n) for r in self.runs],
                    "beyond_intervals": [
                        [self.runs[i].row.id, self.runs[j].row.id] for i, j in self.beyond.get(n, [])
                    ],
                }
                for n in self.lengths
            ],
            "summary": [{"run_id": r.row.id, **summary(r)} for r in self.runs],
        }


def _acc(r: Compared, n: int) -> float | None:
    m = r.metrics.get(n)
    return None if m is None else m.accuracy


def _metric(r: Compared, n: int) -> dict | None:
    m = r.metrics.get(n)
    return (
        None
        if m is None
        else {
            "accuracy": m.accuracy,
            "low": m.accuracy_low,
            "high": m.accuracy_high,
            "chance": m.chance,
            "n_sequences": m.n_sequences,
        }
    )


def summary(r: Compared) -> dict:
    """The run's headline numbers: status, longest length >= 90%, best validation accuracy, steps run,
    wall time, parameters."""
    s = r.row.summary or {}
    return {
        "status": str(r.row.status),
        "longest_90": s.get("longest_90"),
        "best_val_accuracy": s.get("best_val_accuracy"),
        "steps_run": s.get("steps_run"),
        "wall_time": r.row.wall_time,
        "params": s.get("params"),
    }


def flat_config(config: dict, prefix: str = "") -> dict:
    """A stored config as dotted keys (``model.layers``, ``eval.lengths``)."""
    out = {}
    for k, v in (config or {}).items():
        if isinstance(v, dict):
            out.update(flat_config(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def load_runs(db, refs: list[str], split: Split = Split.TEST) -> list[Compared]:
    """The runs ``refs`` name in ``db``, each with its metrics on ``split`` (the draw: test or long) and its
    learning curve; a UserError for a bad name, too many runs or one named twice."""
    if not refs:
        raise UserError("name at least one run: its id, 'last' or its label")
    if len(refs) > MAX_RUNS:
        raise UserError(f"{len(refs)} runs named; at most {MAX_RUNS} fit one comparison")
    store = Store(db, readonly=True)
    out: list[Compared] = []
    for ref in refs:
        row, _ = store.find(ref)
        if any(r.row.id == row.id for r in out):
            raise UserError(f"run {row.id} is named twice ({ref!r}); name each run once")
        headline = ((row.config or {}).get("eval") or {}).get("test_split", "test").split("+")[0]
        rows = store.metrics(row.id) if split == headline else store.split_metrics(row.id).get(split, [])
        ms = [LengthMetrics.from_row(m) for m in rows]
        out.append(Compared(row, str(ref), {m.length: m for m in ms}, store.curve(row.id)))
    return out


def _overlap(a: LengthMetrics, b: LengthMetrics) -> bool:
    if a.accuracy_high is None or b.accuracy_high is None:  # set with accuracy_low, or neither is
        return False
    return not (
        a.accuracy_low is None
        or b.accuracy_low is None
        or a.accuracy_high < b.accuracy_low
        or b.accuracy_high < a.accuracy_low
    )


def compare_runs(db, refs: list[str], split: Split = Split.TEST) -> Comparison:
    """The runs ``refs`` name, side by side (see the module docstring)."""
    runs = load_runs(db, refs, split)
    configs = [flat_config(r.row.config) for r in runs]
    keys = list(dict.fromkeys(k for c in configs for k in c))
    config = {k: [c.get(k) for c in configs] for k in keys}
    differs = [k for k, vs in config.items() if any(v != vs[0] for v in vs)]
    lengths = sorted({n for r in runs for n in r.metrics})
    beyond: dict[int, list[tuple[int, int]]] = {}
    for n in lengths:
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                a, b = runs[i].metrics.get(n), runs[j].metrics.get(n)
                if (
                    a is not None
                    and b is not None
                    and a.accuracy is not None
                    and b.accuracy is not None
                    and not _overlap(a, b)
                ):
                    beyond.setdefault(n, []).append((i, j))
    return Comparison(runs, config, differs, lengths, beyond, split)


def runs_figure(runs: list[Compared]):
    """Accuracy against the test length (log scale; band: the 95% interval; dotted: chance) and the
    learning curves (validation accuracy against the step), one colour per run; the key names every line."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.0))
    lengths: set[int] = set()
    chance: dict[int, list[float]] = {}
    for k, r in enumerate(runs):
        _run_lines(ax, bx, k, r, lengths, chance)
    if not lengths and not any(r.curve for r in runs):
        plt.close(fig)
        raise UserError("none of these runs has metrics or a learning curve to plot (are they complete?)")
    if chance:
        xs = sorted(chance)
        ax.plot(xs, [max(chance[n]) for n in xs], color="black", ls=":", lw=1, label="chance (per length)")
    ax.fill_between([], [], [], color="grey", alpha=0.3, lw=0, label="band: 95% interval")
    if lengths:
        ax.set_xscale("log")
        length_ticks(ax, sorted(lengths))
    ax.set_xlabel("test length")
    ax.set_ylabel("accuracy (final label)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("accuracy against test length", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    bx.set_xlabel("training step")
    bx.set_ylabel("validation accuracy (in-distribution)")
    bx.set_ylim(-0.02, 1.02)
    bx.set_title("learning curves", fontsize=10)
    bx.grid(alpha=0.3)
    outside_legend(ax, fig, fontsize=7)
    return fig


def _run_lines(ax, bx, k: int, r: Compared, lengths: set[int], chance: dict[int, list[float]]) -> None:
    """Run number ``k``'s accuracy against the length (on ``ax``, with its band) and its learning curve (on
    ``bx``); its scored lengths go to ``lengths``, its chance at each of them to ``chance``."""
    colour, marker, style = f"C{k % 10}", MARKERS[k % len(MARKERS)], STYLES[k // 10 % len(STYLES)]
    name = f"{r.header}: {r.row.model} on {r.row.task}"
    scored = sorted((n, m) for n, m in r.metrics.items() if m.accuracy is not None)
    if scored:
        xs = [n for n, _ in scored]
        lengths.update(xs)
        ax.plot(
            xs,
            [m.accuracy for _, m in scored],
            color=colour,
            marker=marker,
            ms=4,
            mfc="none",
            ls=style,
            label=name,
        )
        ax.fill_between(
            xs,
            [m.accuracy_low for _, m in scored],
            [m.accuracy_high for _, m in scored],
            color=colour,
            alpha=0.15,
            lw=0,
        )
        for n, m in scored:
            if m.chance is not None:
                chance.setdefault(n, []).append(m.chance)
    if r.curve:
        bx.plot(
            [p["step"] for p in r.curve],
            [p["val_accuracy"] for p in r.curve],
            color=colour,
            ls=style,
            lw=1.2,
            marker=marker,
            ms=4,
            mfc="none",
            markevery=max(1, len(r.curve) // 8),
            label=name,
        )


def default_plot_path(db, refs: list[str], split: Split = Split.TEST) -> Path:
    """Where ``plot`` writes without ``--out``: ``plots/`` beside the database, named by the runs (and the
    draw, when not the test draw): ``runs/plots/rnn-parity_mamba-parity.png``."""
    stem = "_".join(slug(r) for r in refs) + ("" if split is Split.TEST else f"_{split.value}")
    return Path(db).parent / "plots" / f"{stem[:120]}.png"


def plot_runs(db, refs: list[str], out=None, split: Split = Split.TEST) -> Path:
    """``runs_figure`` of the runs ``refs`` name, written to ``out`` (PNG, SVG or PDF by its suffix; None:
    ``default_plot_path``)."""
    out = default_plot_path(db, refs, split) if out is None else Path(out)
    if out.suffix.lstrip(".").lower() not in FORMATS:
        raise UserError(
            f"bad --out {str(out)!r}: the figure's format comes from its suffix; allowed: "
            f"{', '.join('.' + f for f in FORMATS)}"
        )
    return save_figure(runs_figure(load_runs(db, refs, split)), out)
