# long: every figure of a report, sharing one style and the save and naming helpers
"""Figures of a study (matplotlib, Agg): accuracy vs length, learning curves, probe traces, spectra.

The plotting functions return figures; ``save`` writes one as PNG, SVG and/or PDF, ``svg_text`` gives
it as inline SVG (the HTML report), ``close`` frees it. Both first raise every text of the figure to
:data:`MIN_POINTS` (``legible``): an SVG shown at its own size draws a point as 4/3 px, so no text of a
figure is under 10 px where the page shows it whole (the HTML report shows each figure at its own width,
at most :data:`MAX_WIDTH_PX`, which a 1,280 px window holds).
"""

from __future__ import annotations

import io
import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from statetrack.files import sha256_bytes, write_file
from statetrack.progress import warn
from statetrack.runs.store import RunStatus

FORMATS = ("png", "svg", "pdf")
#: markers and line styles cycled per model, so that lines on top of each other stay visible
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
STYLES = ("-", "--", "-.", ":")
#: the smallest text of a saved figure, in points (4/3 px each in an SVG shown at its own size: 10.7 px)
MIN_POINTS = 8.0
#: the widest figure, in CSS px at its own size: what a 1,280 px window's page holds beside its margins
MAX_WIDTH_PX = 1200


def legible(fig) -> None:
    """Raise every text of ``fig`` (titles, labels, ticks, legends, annotations) to MIN_POINTS."""
    from matplotlib.text import Text  # heavy: only drawing a figure needs it

    for t in fig.findobj(Text):
        if t.get_fontsize() < MIN_POINTS:
            t.set_fontsize(MIN_POINTS)


def pyplot():
    import matplotlib  # heavy: only drawing a figure needs it

    # the backend as set, not resolved (resolving it would pick a window system): a notebook's inline
    # backend is kept, so that figures show in the notebook; anything else draws into files (Agg)
    chosen = dict.__getitem__(matplotlib.rcParams, "backend")
    if "inline" not in str(chosen):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: only drawing a figure needs it

    # reproducible vector output: no dates, ids from a fixed salt
    matplotlib.rcParams["svg.hashsalt"] = "statetrack"
    # labels and names are plain text, never maths or TeX: a label '$x^$' drawn as maths text would end
    # the plot in a parse error (and TeX would read its '%', '_' and '\\')
    matplotlib.rcParams["text.parse_math"] = False
    matplotlib.rcParams["text.usetex"] = False
    return plt


def outside_legend(ax, fig=None, **kw):
    """A legend to the right of the axes (or of the whole figure, given ``fig``), never over the data;
    ``save`` and ``svg_text`` widen the saved area to hold it."""
    kw.setdefault("fontsize", 8)
    where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "frameon": False}
    if fig is not None:
        handles, labels = ax.get_legend_handles_labels()
        leg = fig.legend(handles, labels, **{**where, "bbox_to_anchor": (1.0, 0.92)}, **kw)
    else:
        leg = ax.legend(**where, **kw)
    leg.set_in_layout(False)  # tight_layout keeps the axes' size; the saved area grows to hold the legend
    return leg


def _legends(fig) -> list:
    """What the saved area must hold: the figure's artists, and the legends that tight_layout leaves out."""
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    artists: list = fig.get_default_bbox_extra_artists()
    return artists + [leg for leg in legends if not leg.get_in_layout()]


def save(fig, folder: Path, stem: str, formats=("png",)) -> list[Path]:
    """Write ``fig`` as ``folder/stem.<format>`` for each format (png, svg, pdf), each file whole or not at
    all (``files.write_file``); returns the paths."""
    legible(fig)
    fig.tight_layout()
    out = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(
            buf,
            format=fmt,
            dpi=110,
            bbox_inches="tight",
            bbox_extra_artists=_legends(fig),
            metadata={"Date": None} if fmt in ("svg", "pdf") else None,
        )
        out.append(write_file(Path(folder) / f"{stem}.{fmt}", buf.getvalue(), what="plot"))
    return out


def svg_text(fig) -> str:
    """The figure as an ``<svg>`` element (for inline HTML), glyphs as paths: no fonts needed."""
    legible(fig)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(
        buf, format="svg", bbox_inches="tight", bbox_extra_artists=_legends(fig), metadata={"Date": None}
    )
    text = buf.getvalue()
    return text[text.index("<svg") :]


def close(fig) -> None:
    pyplot().close(fig)


def save_figure(fig, path: Path) -> Path:
    """Lay out, write (the format from the path's suffix) and close a figure."""
    path = Path(path)
    try:
        save(fig, path.parent, path.stem, [path.suffix.lstrip(".") or "png"])
    finally:
        close(fig)
    return path


#: the longest slug: a figure's file name holds two (a table's and a column's) within any file system's 255
SLUG_MAX = 60


def slug(s: str) -> str:
    """``s`` as part of a file name: lower-case letters and digits joined by '-', at most ``SLUG_MAX``
    characters (a longer one is cut and ends in 8 hex digits of its sha256, so two long names stay apart).
    Two names may share a slug (``a b`` and ``a-b``): ``writer.unique_stems`` tells their files apart."""
    out = re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower() or "x"
    if len(out) > SLUG_MAX:
        out = f"{out[: SLUG_MAX - 9].rstrip('-')}-{sha256_bytes(s.encode('utf-8', 'surrogatepass'))[:8]}"
    return out


def unique_stem(stem: str, seen: dict[str, str], owner: str) -> str:
    """``stem``, or ``stem-2``, ``stem-3`` ... when a file of that name (case folded: ``A`` and ``a`` are one
    file on some systems) is taken in ``seen`` (lower-case stem -> what took it), with a warning line
    naming both; ``seen`` records the stem for ``owner``. No figure replaces another."""
    new, n = stem, 2
    while new.lower() in seen:
        new, n = f"{stem}-{n}", n + 1
    if new != stem:
        warn(
            f"figure {stem!r} of {owner!r} has the file name of the figure of {seen[stem.lower()]!r}; "
            f"written as {new!r}"
        )
    seen[new.lower()] = owner
    return new


def length_ticks(ax, lengths: list[int]) -> None:
    """Plain-number ticks at the lengths (thinned so labels do not overlap), no minor labels."""
    from matplotlib.ticker import (  # heavy: only drawing a figure needs it
        FixedLocator,
        NullFormatter,
        NullLocator,
    )

    ticks: list[int] = []
    for n in sorted(lengths, reverse=True):  # keep the longest; labels at least 30% apart on the log axis
        if not ticks or n * 1.3 <= ticks[-1]:
            ticks.append(n)
    ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=7)


def _token_chance(task_name: str) -> float | None:
    """The majority share of the task's distribution of a scored label (``Task.label_distribution``),
    the chance of token accuracy; None where the task does not give it."""
    from statetrack.tasks import get_task  # the task registry: only a token-accuracy figure needs it

    dist = get_task(task_name).label_distribution()
    return None if dist is None else float(np.max(dist))


@dataclass
class _Panel:
    """What the model lines of one task column's figure leave for its shading, chance line and caption."""

    spans: set[tuple[int, int]] = field(default_factory=set)  # the training ranges
    chances: dict[int, list[float | None]] = field(default_factory=dict)  # per test length
    drawn: int = 0  # model lines drawn
    banded: bool = False  # some line has a band


def length_figures(study, table, results) -> Iterator[tuple[str, object, str]]:
    """(stem, figure, caption) per task column, each drawn when asked for: median over seeds at the
    selected learning rate, log x-axis, one line per model (its own marker and style), with a band over the
    seeds' values and their 95% (Wilson) intervals where the metric has one; chance per test length dotted
    (accuracy: the majority share of the final label's distribution in that length's test draw; token
    accuracy: that of the task's distribution of a scored label, where it gives one); the training range
    shaded. Lengths without a test set are left out."""
    plt = pyplot()
    tdef = next(t for t in study.tables if t.name == table.name)
    for col in [t.label for t in tdef.tasks]:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        panel = _Panel()
        for row in table.rows:
            _model_line(ax, panel, study, table, tdef, results, row, col)
        if not panel.drawn:
            plt.close(fig)
            continue
        _length_axes(ax, panel, study, table, results, col)
        yield f"length-{slug(table.name)}-{slug(col)}", fig, _length_caption(study, col, panel)


def _complete_runs(results, table, tdef, label: str, col: str) -> list:
    """The complete (job, result) pairs of the model row ``label`` on the task column ``col`` of ``table``."""
    return [
        (j, r)
        for j, r in results
        if j.table == table.name
        and j.label == label
        and (j.column or tdef.tasks[0].label) == col
        and r is not None
        and r.status == RunStatus.COMPLETE
    ]


def _model_line(ax, panel: _Panel, study, table, tdef, results, row: dict, col: str) -> None:
    """One model's line (median over seeds) and band on the figure of task column ``col``; what it adds to
    the training ranges and the chance at each length goes to ``panel``."""
    runs = _complete_runs(results, table, tdef, row["label"], col)
    if not runs:
        return
    cell = row["cells"].get(col) if table.kind != "per_length" else None
    lr = cell.lr if cell is not None and cell.lr is not None else None
    if lr is not None:
        runs = [(j, r) for j, r in runs if j.train.lr == lr]
    scored = [m for _, r in runs for m in r.metrics if getattr(m, study.metric) is not None]
    lengths = sorted({m.length for m in scored})
    if not lengths:
        return
    at = {n: [m for m in scored if m.length == n] for n in lengths}
    med = [statistics.median(getattr(m, study.metric) for m in at[n]) for n in lengths]
    (line,) = ax.plot(
        lengths,
        med,
        marker=MARKERS[panel.drawn % len(MARKERS)],
        ms=4,
        mfc="none",
        ls=STYLES[panel.drawn // len(MARKERS) % len(STYLES)],
        label=row["label"],
    )
    lo, hi = _band(at, lengths, study.metric)
    if lo != hi:
        ax.fill_between(lengths, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
        panel.banded = True
    j = runs[0][0]
    panel.spans.add((j.train.train_min_len, j.train.train_max_len))
    if study.metric == "accuracy":
        for m in scored:
            panel.chances.setdefault(m.length, []).append(m.chance)
    elif study.metric == "token_accuracy" and (top := _token_chance(j.train.task)) is not None:
        # every scored position: the task's own distribution of its scored labels, never the
        # majority of the batch scored (token_majority)
        for n in lengths:
            panel.chances.setdefault(n, []).append(top)
    panel.drawn += 1


def _band(at: dict[int, list], lengths: list[int], metric: str) -> tuple[list[float], list[float]]:
    """(low, high) per length: the extremes of the seeds' values and of their 95% intervals, where the metric
    has one; ``at``: the length's metrics of every seed."""
    lo = [
        min([getattr(m, metric) for m in at[n]] + [ci[0] for m in at[n] if (ci := m.interval(metric))])
        for n in lengths
    ]
    hi = [
        max([getattr(m, metric) for m in at[n]] + [ci[1] for m in at[n] if (ci := m.interval(metric))])
        for n in lengths
    ]
    return lo, hi


def _length_axes(ax, panel: _Panel, study, table, results, col: str) -> None:
    """The figure of task column ``col`` past its model lines: training ranges shaded, the bands' key
    entry, chance dotted, the log length axis, labels, title and key."""
    for k, (lo, hi) in enumerate(sorted(panel.spans)):
        ax.axvspan(
            lo,
            max(hi, lo * 1.05),
            color="grey",
            alpha=0.15,
            lw=0,
            label="training lengths" if k == 0 else None,
        )
    if panel.banded:  # one key entry for the bands of every model (each in its line's colour)
        band_label = (
            "band: seeds' range and 95% intervals"
            if study.metric in ("accuracy", "scaled_accuracy")
            else "band: seeds' range"
        )
        ax.fill_between([], [], [], color="grey", alpha=0.3, lw=0, label=band_label)
    if study.metric == "scaled_accuracy":
        ax.axhline(0.0, color="black", ls=":", lw=1, label="chance")
    elif panel.chances:
        xs = sorted(panel.chances)
        ax.plot(
            xs,
            [statistics.median(c for c in panel.chances[n] if c is not None) for n in xs],
            color="black",
            ls=":",
            lw=1,
            label="chance (per length)",
        )
    ax.set_xscale("log")
    length_ticks(
        ax,
        sorted(
            {n for j, _ in results if j.table == table.name for n in j.eval.lengths}
            | {x for span in panel.spans for x in span}
        ),
    )
    ax.set_xlabel("test length")
    ax.set_ylabel(study.metric.replace("_", " "))
    ax.set_title(f"{study.name}: {col}" + ("" if table.name == "main" else f" ({table.name})"), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    outside_legend(ax)


def _length_caption(study, col: str, panel: _Panel) -> str:
    band = (
        "seeds' range and 95% Wilson intervals"
        if study.metric in ("accuracy", "scaled_accuracy")
        else "seeds' range"
    )
    metric = study.metric.replace("_", " ")
    return (
        f"{metric.capitalize()} of each model on {col} against the test length (log scale), the "
        f"median over seeds at the selected learning rate; bands: the {band}; grey: the training "
        "lengths"
        + (
            "; dotted: chance at each length."
            if panel.chances or study.metric == "scaled_accuracy"
            else "; no chance line: the task gives no distribution of its scored labels."
        )
    )


def curve_figures(study, table, results, curves: dict[int, list[dict]]) -> Iterator[tuple[str, object, str]]:
    """(stem, figure, caption) per task column, each drawn when asked for: validation accuracy vs step, one
    panel per model (shared axes, so no model's curve hides under another's), one line per run (colour:
    learning rate, style: seed)."""
    tdef = next(t for t in study.tables if t.name == table.name)
    for col in [t.label for t in tdef.tasks]:
        panels = []
        for row in table.rows:
            runs = [
                (j, r)
                for j, r in _complete_runs(results, table, tdef, row["label"], col)
                if curves.get(r.run_id)
            ]
            if runs:
                panels.append((row["label"], runs))
        if not panels:
            continue
        fig = _curves_figure(study, panels, curves, col)
        caption = (
            f"Learning curves on {col}: validation accuracy (in-distribution lengths) against the training "
            "step, one panel per model and one line per run (colour: learning rate, line style: seed)."
        )
        yield f"curves-{slug(table.name)}-{slug(col)}", fig, caption


def _curves_figure(study, panels: list[tuple[str, list]], curves: dict[int, list[dict]], col: str):
    """The learning curves of task column ``col``: one panel per (model label, its runs), the runs' key
    once beside the panels."""
    plt = pyplot()
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.3 * ncols, 2.3 * nrows + 0.7), sharex=True, sharey=True, squeeze=False
    )
    lrs = sorted({j.train.lr for _, runs in panels for j, _ in runs})
    for ax, (label, runs) in zip(axes.flat, panels, strict=False):
        for j, r in runs:
            c = curves[r.run_id]
            ax.plot(
                [p["step"] for p in c],
                [p["val_accuracy"] for p in c],
                lw=1.2,
                color=f"C{lrs.index(j.train.lr) % 10}",
                ls=STYLES[j.seed % len(STYLES)],
                marker="o" if len(c) < 10 else None,
                ms=3,
                label=f"lr {j.train.lr:g}, seed {j.seed}",
            )
        ax.set_title(label, fontsize=9)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    _runs_key(fig, axes.flat[: len(panels)])
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("training step", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("val. accuracy", fontsize=8)
    # above the top row (the saved area grows to hold it), never over its panels' titles
    fig.suptitle(
        f"{study.name}: learning curves, {col} (validation accuracy: in-distribution, token)",
        fontsize=10,
        y=1.0,
        va="bottom",
    )
    return fig


def _runs_key(fig, axes) -> None:
    """The runs' key, once, beside the panels: every (learning rate, seed) drawn in any of ``axes``."""
    key: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            key.setdefault(lab, h)
    order = sorted(key, key=lambda lab: tuple(float(x.split()[-1]) for x in lab.split(", ")))
    leg = fig.legend(
        [key[k] for k in order],
        order,
        loc="upper left",
        bbox_to_anchor=(1.0, 0.92),
        borderaxespad=0.0,
        frameon=False,
        fontsize=7,
        title="run",
        title_fontsize=7,
    )
    leg.set_in_layout(False)


def trace_figure(title: str, trace: dict):
    """Model output vs input over time (the offset paper's Figures 3-8): input, target, P(output = 1)."""
    plt = pyplot()
    x, y, m = trace["inputs"], trace["targets"], trace["mask"]
    t = list(range(len(x)))
    fig, ax = plt.subplots(figsize=(9, 2.8))
    ax.step(t, x, where="post", color="black", lw=1.2, label="input")
    ax.step(t, y, where="post", color="C2", lw=1, ls="--", label="target (next input)")
    if trace.get("probs"):
        p1 = [p[1] for p in trace["probs"]]
        ax.plot(t, p1, color="C3", lw=1.2, label="model P(1)")
    else:
        ax.plot(t, trace["pred"], color="C3", lw=1.2, label="model prediction")
    unscored = [i for i, k in enumerate(m) if not k]
    if unscored:
        ax.plot(unscored, [1.08] * len(unscored), "v", color="grey", ms=3, label="not scored (onset)")
    ax.set_ylim(-0.1, 1.18)
    ax.set_xlabel("time step")
    ax.set_title(f"{title}  (token acc {100 * trace['token_accuracy']:.1f}%)", fontsize=9)
    outside_legend(ax, fontsize=7)
    return fig


def spectrum_plot(result: dict, path) -> str:
    """Write ``spectrum_figure(result)`` to ``path`` (PNG, SVG or PDF by its suffix)."""
    return str(save_figure(spectrum_figure(result), path))


def spectrum_figure(result: dict):
    """The eigenvalues of an ``analysis.spectrum`` result on the complex plane, one panel per layer: the
    sample sequences' A(x) per current token, and (layer 1) A(x) of each token's embedding alone (x)."""
    plt = pyplot()
    ls = [l for l in result["layers"] if "samples" in l]
    n = max(1, len(ls))
    ncols = min(n, 2)  # each panel has its key beside it: two abreast fit MAX_WIDTH_PX
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    th = np.linspace(0, 2 * np.pi, 400)
    for ax, l in zip(axes.flat, ls, strict=False):
        ax.plot(np.cos(th), np.sin(th), color="0.6", lw=0.8, label="unit circle")
        ax.axhline(0, color="0.85", lw=0.5)
        ax.axvline(0, color="0.85", lw=0.5)
        toks = np.array(l["sample_tokens"])
        vals = np.array(l["samples"])  # (B*T, n)
        for t in sorted(set(toks.tolist()))[:12]:
            v = vals[toks == t].reshape(-1)
            ax.scatter(v.real, v.imag, s=6, alpha=0.5, label=f"token {t}", rasterized=True)
        if l.get("per_token"):
            for k, v in enumerate(l["per_token"].values()):
                v = np.array(v)
                ax.scatter(
                    v[:, 0],
                    v[:, 1],
                    s=40,
                    marker="x",
                    color="k",
                    label="single-token A(x)" if k == 0 else None,
                    rasterized=True,
                )
        ax.set_aspect("equal")
        ax.set_xlim(-1.15, 1.15)
        ax.set_ylim(-1.15, 1.15)
        ax.set_title(f"layer {l['layer']}: {l['mixer']}  min Re {l['min_real']:.3f}", fontsize=9)
        ax.set_xlabel("Re λ", fontsize=8)
        ax.set_ylabel("Im λ", fontsize=8)
        outside_legend(ax, fontsize=6)
    # two lines: on one, the title is wider than a one-layer figure
    fig.suptitle(f"{result['layers_spec']} on {result['task']}\neigenvalues of A(x)", fontsize=10)
    return fig


def lm_curve_figure(title: str, runs: list[tuple[str, list[int], list[float]]]):
    """Language models' learning curves: validation loss in bits per token vs step, one colour per model
    (``runs``: (model label, steps, values); several runs of a label share its colour)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    colors: dict[str, int] = {}
    for label, steps, vals in runs:
        first = label not in colors
        i = colors.setdefault(label, len(colors))
        ax.plot(
            steps,
            vals,
            color=f"C{i % 10}",
            ls=STYLES[i % len(STYLES)],
            lw=1.2,
            alpha=0.8,
            label=label if first else None,
            marker=MARKERS[i % len(MARKERS)],
            ms=3,
        )
    ax.set_xlabel("training step")
    ax.set_ylabel("validation loss (bits per token)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    outside_legend(ax)
    return fig


def lm_length_figure(
    title: str,
    series: dict[str, tuple[list, list]],
    baselines: dict[str, tuple[list, list]],
    train_len: int,
    xlabel: str,
):
    """bpb against a length on a log axis (context length, or position in the window): one line per model
    (median over seeds), baselines dashed, the training length marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (label, (xs, ys)) in enumerate(series.items()):
        ax.plot(
            xs, ys, marker=MARKERS[i % len(MARKERS)], ls=STYLES[i % len(STYLES)], ms=3, lw=1.3, label=label
        )
    for label, (xs, ys) in baselines.items():
        ax.plot(xs, ys, ls="--", lw=1, color="grey" if "bigram" in label else "black", label=label)
    ax.axvline(train_len, color="C3", ls=":", lw=1)
    ax.text(train_len, ax.get_ylim()[0], " training length", color="C3", fontsize=7, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("bits per byte (test split)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    outside_legend(ax, fontsize=7)
    return fig
