# long: the scorecard's protocol steps and the card that reads them, in the order a card is made
"""A scorecard for any mixer: the frontier zoo's protocol run on it, and one card of what it showed.

``scorecard(layers)`` takes a layer spec (a built-in mixer, a spec such as ``"mamba(conv=0)*2"``, or a
plugin's mixer: docs/extending.md) and runs the frontier zoo's protocol on it (the study
``frontier-zoo``: its main table's five tasks, parity, counting mod 3, S3, A5 and Tomita 1, trained on
lengths 1-40 and scored at 500-511 on the long-range draw) at one of the zoo's scales, ``quick`` by
default. The card (:class:`Card`) holds

* the oracle's verdict on each task from the properties the mixer declares, or "undeclared" and how to
  declare them (a verdict is read from declarations, never from training);
* the learnability cells: each task's seeds scored as the zoo's verdict table scores them
  (``report.verdict_tables``), with the outcome against the verdict;
* the failure horizons of each cell's best seed on the witness families of its task, up to the longest
  test length (:func:`horizons`, the one place that measures them);
* the learned spectra of each cell's best seed where the mixer declares its transition
  (``transition(x)`` / ``eigenvalues(x)``, ``layers.base.TRANSITION_PROTOCOL``), else one line saying
  what it must provide;
* its row on the zoo's leaderboard beside the built-in mixers: their rows are read from the database
  when it holds the zoo's runs at that scale, else, at the quick scale, from the published verdict table
  (``docs/results/frontier-zoo-verdicts.csv`` of a source checkout, or a file given as ``baseline``).

``write_card(card, out)`` writes it as markdown and HTML (with a leaderboard page) into ``out``.
"""

from __future__ import annotations

import csv
import html
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from statetrack.errors import UserError
from statetrack.experiments import load_study
from statetrack.experiments.card import TABLE, ZOO, card_study
from statetrack.files import ensure_dir, inside, write_file
from statetrack.progress import Progress
from statetrack.report.collect import collect
from statetrack.report.evidence import Spectrum, spectrum_summary
from statetrack.report.leaderboard import leaderboard_html
from statetrack.report.plots import save, slug, svg_text
from statetrack.report.render import grid_markdown
from statetrack.report.verdict_tables import SeedScore, VerdictCell, VerdictTable, verdict_table
from statetrack.reproduce import sweep
from statetrack.runs.store import DEFAULT_DB, RunStatus, Store
from statetrack.spec import parse_layers
from statetrack.tasks.draws import check_split
from statetrack.theory.verdicts import Decision, Verdict, oracle
from statetrack.untrusted import MAX_JSON_BYTES, markdown_lines, markdown_link, read_text

#: the published verdict table of the zoo at the quick scale, in a source checkout
PUBLISHED = Path(__file__).resolve().parents[2] / "docs" / "results" / "frontier-zoo-verdicts.csv"
#: how a mixer declares what the oracle reads
HOW_TO_DECLARE = (
    "declare them: a Mixer's `properties` (a Properties of input dependence, eigenvalue domain and "
    "structure), or register_module(name, factory, Properties(...)) (docs/extending.md)"
)


@dataclass
class Card:
    """One mixer's scorecard (see the module docstring); ``markdown()`` and ``html()`` render it."""

    layers: str
    label: str
    scale: str
    protocol: str
    declared: list[str]
    verdicts: list[dict]
    table: VerdictTable
    horizons: dict[str, dict | str]
    spectra: dict[str, dict | str]
    baseline: str
    seconds: float
    runs: int
    figures: dict[str, Spectrum] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"scorecard-{slug(self.label)}"

    def own(self) -> list[VerdictCell | None]:
        return dict(self.table.rows)[self.label]

    def sections(self) -> list[tuple[str, list[str], list[str], list[list[str]]]]:
        """(heading, paragraphs, table header, table rows) per section, the same for markdown and HTML."""
        cells = self.own()
        verdict_rows = [[v["task"], v["verdict"], v["basis"], v["reason"]] for v in self.verdicts]
        learn_rows = [[c.column, c.text()] for c in cells if c is not None]
        return [
            (
                "Protocol",
                [
                    self.protocol,
                    f"{self.runs} runs, horizons and spectra in {self.seconds:.0f} s ({_machine()}).",
                ],
                [],
                [],
            ),
            ("What the oracle says", self.declared, ["task", "verdict", "basis", "reason"], verdict_rows),
            ("Learnability", [_LEARN_NOTE], ["task", "median seed; verdict: outcome"], learn_rows),
            ("Failure horizons", [_HORIZON_NOTE], ["task", "horizon"], _texts(self.horizons, horizon_text)),
            (
                "Learned spectrum",
                [_SPECTRUM_NOTE],
                ["task", "eigenvalues"],
                _texts(self.spectra, spectrum_text),
            ),
            ("Leaderboard", [self.baseline, self.table.summary()], *self.leaderboard_rows()),
        ]

    def leaderboard_rows(self) -> tuple[list[str], list[list[str]]]:
        by_label = dict(self.table.rows)
        header = ["#", "model", "tasks tracked", "agree", *self.table.columns]
        rows = []
        for i, (label, learned, agree, judged) in enumerate(self.table.leaderboard(), 1):
            name = f"**{label}**" if label == self.label else label
            cells = [_short(c) for c in by_label[label]]
            rows.append([str(i), name, f"{learned}/{len(self.table.columns)}", f"{agree}/{judged}", *cells])
        return header, rows

    def as_dict(self) -> dict:
        """The card as JSON-friendly data: the spectra as their one-line summaries."""
        header, rows = self.leaderboard_rows()
        return {
            "layers": self.layers,
            "label": self.label,
            "scale": self.scale,
            "protocol": self.protocol,
            "declared": self.declared,
            "verdicts": self.verdicts,
            "cells": [r for r in self.table.csv_rows() if r["model"] == self.label],
            "horizons": self.horizons,
            "spectra": {c: v if isinstance(v, str) else spectrum_text(v) for c, v in self.spectra.items()},
            "leaderboard": [dict(zip(header, [x.replace("**", "") for x in r], strict=True)) for r in rows],
            "baseline": self.baseline,
            "seconds": self.seconds,
            "runs": self.runs,
        }

    def markdown(self) -> str:
        out = [f"# Scorecard: {self.label}", ""]
        for heading, paragraphs, header, rows in self.sections():
            out += [f"## {heading}", ""]
            out += [p + "\n" for p in paragraphs]
            if header:
                out += [grid_markdown(header, rows), ""]
            if heading == "Learned spectrum":
                out += [
                    line
                    for s in self.figures.values()
                    for line in (markdown_link(s.alt, f"{s.stem}.png"), "")
                ]
        return markdown_lines(out)  # the label and its spectra are text: no HTML tag or link of theirs

    def html(self) -> str:
        e = html.escape
        body = []
        for heading, paragraphs, header, rows in self.sections():
            body.append(f"<h2>{e(heading)}</h2>")
            body += [f"<p>{e(p)}</p>" for p in paragraphs]
            if header:
                head = "".join(f"<th>{e(h)}</th>" for h in header)
                trs = "".join(
                    "<tr>" + "".join(f"<td>{e(c.replace('**', ''))}</td>" for c in r) + "</tr>" for r in rows
                )
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>")
            if heading == "Learned spectrum":
                body += [
                    f"<figure>{s.drawn(svg_text)}<figcaption>{e(s.alt)}</figcaption></figure>"
                    for s in self.figures.values()
                ]
            if heading == "Leaderboard":
                body.append(
                    f'<p><a href="{e(self.name)}-leaderboard.html">The leaderboard, coloured by outcome</a></p>'
                )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Scorecard: {e(self.label)}</title><style>{_CSS}</style></head>\n<body>\n"
            f"<h1>Scorecard: {e(self.label)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
        )


_LEARN_NOTE = (
    "Each task's seeds, scored as the zoo's verdict table scores them: the pooled accuracy of the final label "
    "at the test lengths of the median seed with its 99% interval, the seeds that track the task (>= 90%) "
    "and those above chance (from the task's label distribution); then the verdict and the outcome."
)
_HORIZON_NOTE = (
    "The best seed of each cell on the witness families of every pair of states of the task's automaton, "
    "up to the longest test length: the shortest string on which it confuses two states (none: no family "
    "breaks it)."
)
_SPECTRUM_NOTE = "The eigenvalues of the learned transitions A(x) of each cell's best seed."
_CSS = (
    "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:80em;padding:0 1em}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .5em;"
    "vertical-align:top;font-size:.9em}thead th{background:#eef1f5}figure svg{max-width:100%;height:auto}"
)


def _machine() -> str:
    return f"this machine, {os.cpu_count()} CPU cores"


def _texts(by_column: dict[str, dict | str], text) -> list[list[str]]:
    return [[col, v if isinstance(v, str) else text(v)] for col, v in by_column.items()]


def _short(c: VerdictCell | None) -> str:
    if c is None:
        return "-"
    m = c.median()
    acc = "-" if m is None or m.accuracy is None else f"{100 * m.accuracy:.0f}%"
    return f"{acc} {c.verdict_text()}: {c.outcome}"


def horizon_text(h: dict) -> str:
    """A measured horizon in one line."""
    pairs = h.get("pairs") or []
    broken = sum(1 for p in pairs if p.get("horizon") is not None)
    head = (
        f"none up to {h['horizon_max']}"
        if h.get("horizon") is None
        else f"{h['horizon']} (pair {h.get('pair')}, family {h.get('family')})"
    )
    return f"{head}; {broken} of {len(pairs)} pairs of states broken, {h['families_tested']} families tested"


def spectrum_text(r: dict) -> str:
    return spectrum_summary(r)


def spectrum_short(r: dict) -> str:
    """Each layer's smallest real part and range of moduli, or why it has none, in one line."""
    return "; ".join(
        f"layer {l['layer']} ({l['mixer']}): "
        + (
            f"min Re {l['min_real']:+.3f}, modulus {l['min_modulus']:.3f}-{l['max_modulus']:.4f}"
            if "min_real" in l
            else l.get("no_transition", "no transition matrix")
        )
        for l in r["layers"]
    )


def declared(layers: str) -> list:
    """Each layer's declared Properties, None where it declares none (a Mixer without ``properties``, or
    register_module's default ``UNKNOWN``)."""
    from statetrack.layers.adapters import UNKNOWN
    from statetrack.layers.properties import declaration

    out = []
    for spec in parse_layers(layers):
        d = declaration(spec.name)
        props = None if d.properties is None else d.properties_of(spec.options)
        out.append(None if props == UNKNOWN else props)
    return out


def declarations(layers: str) -> list[str]:
    """One line per layer of the spec: what it declares for the oracle, or that it declares nothing and
    how to."""
    out = []
    for i, (spec, props) in enumerate(zip(parse_layers(layers), declared(layers), strict=True), 1):
        if props is None:
            out.append(
                f"layer {i} ({spec.name}): undeclared: the oracle has nothing to read; {HOW_TO_DECLARE}"
            )
        else:
            dependence = "input-dependent" if props.input_dependent else "time-invariant"
            out.append(
                f"layer {i} ({spec.name}): declared {dependence}, "
                f"{'linear' if props.linear else 'non-linear'}, eigenvalues {props.eigenvalues}, structure "
                f"{props.structure}" + (f" (n_h {props.n_h})" if props.n_h else "")
            )
    return out


def _decide(undeclared: bool):
    """The oracle, or for a stack with an undeclared layer an 'open' verdict that says so."""
    if not undeclared:
        return oracle
    return lambda layers, task: Verdict(
        Decision.OPEN, "undeclared", f"undeclared properties: {HOW_TO_DECLARE}"
    )


def horizons(model, task, max_len: int) -> dict:
    """The failure horizons of a trained model up to ``max_len``: the verified horizon (every string up to
    the exhaustive length, the margin-guided search, the families with many access words) and the witness
    families of every pair of states; the one place a card measures them."""
    from statetrack.training.verify import horizons_record

    return horizons_record(model.eval(), task, max_len)


def _best_model(cell: VerdictCell):
    """The model of the cell's best seed, from its checkpoint, with its task; None without one."""
    from statetrack.training.checkpoint import load_checkpoint

    run = cell.best_run()
    if run is None or not run.checkpoint:
        return None
    model, _, task, _ = load_checkpoint(run.checkpoint)
    return model.eval(), task


def _read_cells(cells: list[VerdictCell], max_len: int) -> tuple[dict, dict, dict]:
    """Per cell: the horizons and the spectrum of its best seed (or why there is none), and the spectrum
    figures."""
    from statetrack.analysis.spectra import spectrum

    hz: dict[str, dict | str] = {}
    sp: dict[str, dict | str] = {}
    figures: dict[str, Spectrum] = {}
    for c in cells:
        got = _best_model(c)
        if got is None:
            hz[c.column] = sp[c.column] = "no complete run with a checkpoint"
            continue
        model, task = got
        hz[c.column] = (
            horizons(model, task, max_len)
            if task.automaton() is not None
            else f"{task.name} has no automaton here: no witness families"
        )
        r = spectrum((model, task))
        sp[c.column] = r
        if any("samples" in layer for layer in r["layers"]):
            figures[c.column] = Spectrum(r, c.model, c.column)
    return hz, sp, figures


def _baseline(scale: str, db, published: str | Path | None) -> tuple[list, str]:
    """The built-in mixers' rows of the zoo's leaderboard and where they come from: the database's runs
    of the zoo at ``scale`` where it holds some, else (quick scale) the published verdict table."""
    zoo = load_study(ZOO)
    if scale in zoo.scales and TABLE in [t.name for t in zoo.active_tables(scale)] and _holds_zoo(db):
        rep = collect(zoo, db, scale)
        if any(res is not None for _, res in rep.results):
            vt = verdict_table(zoo, [(j, r) for j, r in rep.results if (j.table or TABLE) == TABLE])
            return vt.rows, f"Built-in rows: the frontier zoo's runs at scale {scale!r} in {db}."
    path = Path(published) if published is not None else PUBLISHED
    if scale != "quick" and published is None:
        return [], (
            f"No built-in rows: {db} holds no run of the frontier zoo at scale {scale!r}; run "
            f"'statetrack reproduce {ZOO} --scale {scale} --db {db}' to have them beside this row."
        )
    if not path.is_file():
        return [], (
            f"No built-in rows: no published table at {path} and no run of the frontier zoo in {db}; run "
            f"'statetrack reproduce {ZOO} --db {db}' to have them beside this row."
        )
    return published_rows(path), f"Built-in rows: the published frontier zoo at scale 'quick' ({path.name})."


def _leaderboard(
    own: VerdictTable, label: str, scale: str, db, baseline, changed: bool
) -> tuple[VerdictTable, str]:
    """The card's row above the built-in rows (their ranks are the table's), and where those come from;
    ``changed``: the card overrode the scale's steps, seeds or test lengths."""
    base, where = _baseline(scale, db, baseline)
    base = [(m, cells) for m, cells in base if m != label]
    if base and changed:
        where += (
            " They keep the scale's own steps, seeds and test lengths; this row does not: compare with care."
        )
    if base and len(base[0][1]) != len(own.columns):
        raise UserError(f"the built-in rows have {len(base[0][1])} tasks, the card {len(own.columns)}")
    return VerdictTable(f"scorecard-{slug(label)}", own.columns, own.rows + base), where


def _holds_zoo(db) -> bool:
    """Whether the database holds a complete run of the frontier zoo (looking costs a query, not a grid)."""
    if not Path(db).exists():
        return False
    return bool(Store(db, readonly=True).runs(study=ZOO, status=RunStatus.COMPLETE, limit=1))


def published_rows(path: str | Path) -> list[tuple[str, list[VerdictCell | None]]]:
    """The rows of a verdict table written as CSV (``VerdictTable.csv_rows``: one line per seed), their
    verdicts given again by the oracle of this version (the same oracle as the card's row)."""
    text = read_text(path, "the published verdict table", MAX_JSON_BYTES)
    cells: dict[tuple[str, str], VerdictCell] = {}
    order: list[str] = []
    columns: list[str] = []
    for r in csv.DictReader(text.splitlines()):
        key = (r["model"], r["task"])
        if r["model"] not in order:
            order.append(r["model"])
        if r["task"] not in columns:
            columns.append(r["task"])
        if key not in cells:
            v = oracle(r["layers"], r["task_string"])
            ceiling = v.facts.get("accuracy_ceiling")
            cells[key] = VerdictCell(
                r["model"],
                r["task"],
                r["layers"],
                r["task_string"],
                v.verdict,
                v.qualified_basis,
                v.reason,
                ceiling=ceiling,
                quotient=v.facts.get("quotient_tracked"),
            )
        lo, _, hi = r["lengths"].partition("-")
        cells[key].seeds.append(
            SeedScore(
                int(r["seed"]),
                _num(r["accuracy"]),
                _num(r["low_99"]),
                _num(r["high_99"]),
                _num(r["chance"]),
                int(r["n"]),
                [int(lo), int(hi or lo)] if lo else [],
                check_split(r["split"]),
            )
        )
    return [(m, [cells.get((m, c)) for c in columns]) for m in order]


def _num(s: str) -> float | None:
    return float(s) if s not in ("", "None") else None


def _protocol(layers: str, scale: str, sc, seeds: int | None, tasks: list[str], results: list) -> str:
    """The card's protocol in one sentence: the zoo's scale, what was trained and scored, runs reused."""
    lo, hi = min(sc.test_lengths), max(sc.test_lengths)
    reused = sum(1 for _, r in results if r is not None and r.reused)
    return (
        f"The frontier zoo's protocol at scale {scale!r}: one {layers} model trained on "
        f"{', '.join(tasks)} for {sc.steps} steps, {seeds or sc.seeds} seed(s), scored "
        f"on the final label at length{f's {lo}-{hi}' if hi > lo else f' {lo}'} on the zoo's test draws"
        + (f"; {reused} of the runs reused from the database." if reused else ".")
    )


def scorecard(
    layers: str,
    scale: str = "quick",
    label: str | None = None,
    seeds: int | None = None,
    db: str | Path = DEFAULT_DB,
    workers: int = 1,
    device: str = "auto",
    steps: int | None = None,
    test_lengths=None,
    baseline: str | Path | None = None,
    progress: Progress = None,
    on_done=None,
    on_step=None,
) -> Card:
    """Run the frontier zoo's protocol on ``layers`` at ``scale`` and return its card (see the module
    docstring). ``steps`` and ``test_lengths`` override the scale's; ``baseline``: a verdict table CSV for
    the built-in rows (default: the database's zoo runs, else the published table at the quick scale).
    ``progress``, ``on_done(job, result)``, ``on_step(job, step, info)``: as ``reproduce.sweep``'s."""
    label = label or layers
    lines = declarations(layers)
    undeclared = None in declared(layers)
    study = card_study(layers, label, scale, steps, test_lengths)
    main = study.tables[0]
    decide = _decide(undeclared)
    verdicts = [
        {"task": t.label, "verdict": str(v.verdict), "basis": v.qualified_basis, "reason": v.reason}
        for t in main.tasks
        for v in [decide(layers, t.task)]
    ]
    t0 = time.perf_counter()
    study, results = sweep(
        study, scale, seeds, db, workers, device=device, on_done=on_done, on_step=on_step, progress=progress
    )
    own = verdict_table(study, results, decide)
    changed = steps is not None or test_lengths is not None or seeds is not None
    table, where = _leaderboard(own, label, scale, db, baseline, changed)
    sc = study.scale(scale)
    hz, sp, figures = _read_cells([c for c in own.rows[0][1] if c is not None], max(sc.test_lengths))
    seconds = time.perf_counter() - t0  # the runs, the horizons and the spectra
    protocol = _protocol(layers, scale, sc, seeds, [t.label for t in main.tasks], results)
    return Card(
        layers,
        label,
        scale,
        protocol,
        lines,
        verdicts,
        table,
        hz,
        sp,
        where,
        seconds,
        len(results),
        figures,
    )


def write_card(card: Card, out) -> list[Path]:
    """``out``/scorecard-<label>.md and .html, the leaderboard page beside them, and the spectrum figures;
    returns the paths. Written inside ``out``, never through a link (``files.inside``)."""
    with inside(out):
        return _write_card(card, ensure_dir(out, f"cannot write the scorecard in {str(out)!r}"))


def _write_card(card: Card, folder: Path) -> list[Path]:
    paths: list[Path] = []
    for s in card.figures.values():
        paths += s.drawn(partial(save, folder=folder, stem=s.stem))
    paths.append(write_file(folder / f"{card.name}.md", card.markdown(), what="scorecard"))
    paths.append(write_file(folder / f"{card.name}.html", card.html(), what="scorecard"))
    board = leaderboard_html(card.table, f"Scorecard of {card.label} beside the frontier zoo")
    paths.append(write_file(folder / f"{card.name}-leaderboard.html", board, what="scorecard"))
    return paths
