# long: four commands (sweep, report, reproduce, scorecard), their shared checks and their argparse table
"""Commands of the studies area: ``sweep`` (run a study's grid), ``report`` (tables, plots, exports from
the database) and ``reproduce`` (sweep + report)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from operator import itemgetter

from statetrack.cli.args import add_db, add_json
from statetrack.cli.bars import SweepProgress
from statetrack.cli.options import add_device
from statetrack.cli.output import Col, console, emit_rows, print_table, prose, say
from statetrack.errors import UserError
from statetrack.runs.store import RunStatus

DEFAULT_OUT = "runs/reports"


def _check(a):
    """The options of a sweep, and the study, its scale and its --model / --task rows and columns: said
    before torch loads (a mistyped study name in under a second)."""
    if a.workers < 1:
        raise UserError(f"--workers must be at least 1, got {a.workers}")
    if getattr(a, "seeds", None) is not None and a.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {a.seeds}")
    if a.address is not None and a.executor != "ray":
        raise UserError("--address needs --executor ray")
    load_part(a)
    if a.tensorboard:
        from statetrack.report.tensorboard import summary_writer

        summary_writer()  # a missing package is bad input: said before anything runs


def _figures(text: str) -> tuple[str, ...]:
    from statetrack.report.plots import FORMATS

    fmts = tuple(dict.fromkeys(x.strip().lower() for x in text.split(",") if x.strip()))
    bad = [f for f in fmts if f not in FORMATS]
    if bad:
        raise UserError(f"unknown figure format {bad[0]!r}; allowed: {', '.join(FORMATS)} (comma-separated)")
    return fmts


def part_note(a) -> dict:
    """A report line naming the part of the grid that --model / --task chose, if any."""
    if not (a.model or a.task):
        return {}
    return {
        "Part of the grid": f"model rows {', '.join(a.model) if a.model else 'all'}; task columns "
        f"{', '.join(a.task) if a.task else 'all'} (the rest of the scale's grid was not "
        "run here)"
    }


def _sweep(a, run=None):
    """Run the grid with progress on stderr through ``run`` (``reproduce.sweep`` by default, or
    ``reproduce.reproduce``) with the command's options; returns (what ``run`` returns, wall seconds)."""
    from statetrack.progress import warn
    from statetrack.reproduce import sweep
    from statetrack.runs.executors import worker_limit

    study = load_part(a)
    grid = study.grid(
        a.scale, a.seeds, a.device, a.max_runs
    )  # counted, capped: only each cell's first run built
    a.workers, why = worker_limit(a.workers, grid.heads, a.executor, a.address)
    if why:  # said once, here; the summary then names the workers that ran
        warn(why)
    n_jobs = len(grid)
    t0 = time.monotonic()

    def done(job, res):
        prog.done(job, res)
        if a.tensorboard and res.status == RunStatus.COMPLETE:
            from statetrack.report.tensorboard import write_run

            write_run(a.tensorboard, a.db, res.run_id)

    with SweepProgress(f"{study.name} ({a.scale})", n_jobs) as prog:
        out = (run or sweep)(
            study,
            a.scale,
            a.seeds,
            db=a.db,
            workers=a.workers,
            fresh=a.fresh,
            device=a.device,
            executor=a.executor,
            address=a.address,
            on_done=done,
            on_step=prog.validation,
            max_runs=a.max_runs,
            on_wait=prog.waiting,
        )
    return out, time.monotonic() - t0


def _summary(study, results, wall, a) -> str:
    reused = sum(r.reused for _, r in results)
    failed = sum(r.status != RunStatus.COMPLETE for _, r in results)
    return (
        f"{study.name} ({a.scale}): {len(results)} runs, {len(results) - reused} run now, {reused} reused "
        f"from {a.db}, {failed} failed; executor {a.executor}, {a.workers} worker(s); wall time {wall:.1f} s"
    )


def _emit_runs(results, db, study=None):
    """JSON Lines, one object per (run, test length): the run schema (statetrack.runs.records) + grid keys; for
    an LM study one object per run (its bpb) and one per baseline and corpus."""
    from statetrack.experiments import StudyKind
    from statetrack.runs.records import run_object, split_rows
    from statetrack.runs.store import Store

    if study is not None and study.kind is StudyKind.LM:
        from statetrack.report.lm_tables import json_rows

        emit_rows(json_rows(study, results))
        return

    store = Store(db)
    for job, res in results:
        emit_rows(
            split_rows(
                run_object(store.run(res.run_id)),
                res.metrics,
                res.more,
                job.eval.splits[0],
                table=job.table,
                column=job.column,
                lr=job.train.lr,
            )
        )


def cmd_sweep(a):
    _check(a)
    (study, results), wall = _sweep(a)
    if a.json:
        _emit_runs(results, a.db, study)
        return 0
    say(_summary(study, results, wall, a))
    return 0 if all(r.status == RunStatus.COMPLETE for _, r in results) else 1


def _print_report(rep, a):
    if a.json:
        for t in rep.tables:
            for row in t.csv_rows():
                print(json.dumps(row))
        for row in rep.verdicts.csv_rows() if rep.verdicts is not None else []:
            print(json.dumps({"table": "verdicts", **row}))
        return
    con = console()
    if rep.missing:  # said first: the tables below leave these runs out
        from statetrack.report.writer import runs_line

        prose(con, runs_line(rep), "yellow")
        con.print()
    for t in rep.tables:
        headers = t.headers()
        cols = [
            Col(
                h,
                itemgetter(i),
                "left" if i == 0 else "right",
                style="dim" if h.startswith("paper") else None,
            )
            for i, h in enumerate(headers)
        ]
        print_table(t.title, cols, t.cell_texts(), caption=t.caption, con=con)
        con.print()
    if rep.verdicts is not None:
        from statetrack.report.verdict_tables import CAPTION

        vt = rep.verdicts
        print_table(
            "the theory's verdict beside every cell",
            [Col(h, itemgetter(i), "left") for i, h in enumerate(("model", *vt.columns))],
            [[label, *("-" if c is None else c.text() for c in cells)] for label, cells in vt.rows],
            caption=CAPTION,
            con=con,
        )
        prose(con, vt.summary())
        con.print()
    probes = rep.probe_rows()
    if probes:
        from statetrack.report.writer import PROBE_HEADERS, probe_cells

        print_table(
            "probes: accuracy (%) of the trained models on fixed inputs (median over runs)",
            [Col(h, itemgetter(i)) for i, h in enumerate(("model", "probe", "runs") + PROBE_HEADERS)],
            [[r["model"], r["probe"], str(r["runs"]), *probe_cells(r)] for r in probes],
            con=con,
        )
    prose(
        con,
        f"{rep.study.source}. Database: {a.db}; {len(rep.results) - rep.missing} of {len(rep.results)} runs "
        f"of the grid complete; {rep.interrupted} unfinished records not counted.",
        "dim",
    )
    if rep.study.notes:
        prose(con, rep.study.notes.strip(), "dim")


def _write(rep, a, meta: dict) -> None:
    """The report files: markdown, CSV, LaTeX and figures; with --html the page and the index."""
    from statetrack.reproduce import write

    paths = write(rep, a.out, meta, _figures(a.figures), a.html, a.force)
    if not a.json:
        say(f"report written to {_written(paths, rep, a)}")


def _written(paths, rep, a) -> str:
    """The files a report wrote, in one line: the markdown, its CSV and LaTeX, the figures, the page."""
    md, *page = map(str, paths)
    figs = f"{rep.study.name}/*.{{{a.figures}}}" if a.figures else ""
    return ", ".join(w for w in [md, ".csv", ".tex", figs, *page] if w)


def _command(name: str, a) -> str:
    return (
        "statetrack " + " ".join(map(shlex.quote, sys.argv[1:]))
        if name in sys.argv[1:3]
        else f"statetrack {name} {a.name} --scale {a.scale}"
    )


def _check_out(rep, a) -> None:
    """Before anything is printed: --out can be written, and the report there holds no more than this one."""
    if not a.out:
        return
    from statetrack.report.folder import check_out

    check_out(a.out, rep.study.name, rep.extent(), a.force)


def cmd_report(a):
    if a.seeds is not None and a.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {a.seeds}")
    study = load_part(a)  # a mistyped study is said before torch loads
    _figures(a.figures)
    if a.reading:
        return _report_readings(study, a)
    from statetrack.report.collect import check_reportable, collect
    from statetrack.reproduce import now

    rep = collect(study, a.db, a.scale, a.seeds, a.device, a.max_runs)
    check_reportable(rep, a.db)  # a grid with no complete run: one line, nothing printed or written
    _check_out(rep, a)
    _print_report(rep, a)
    if a.out:
        _write(
            rep,
            a,
            {
                "Command": _command("report", a),
                "Date": now(),
                "Runs ran on": "; ".join(rep.machines) or "-",
                **part_note(a),
            },
        )
    return 0


def _report_readings(study, a) -> int:
    """``report --reading``: the published cells under each reading named, printed (nothing written)."""
    from statetrack.report.readings import parse_readings, readings_markdown, stored_readings

    readings = parse_readings(a.reading)
    if study.score.kind != "longest":
        raise UserError(
            f"--reading needs a study whose score is a longest length; {study.name} scores {study.score.kind}"
        )
    cells = stored_readings(
        study, a.db, a.scale, readings, seeds=a.seeds, device=a.device, max_runs=a.max_runs
    )
    if not any(c.value is not None for c in cells):
        raise UserError(f"no complete run of {study.name} at scale {a.scale} in {a.db}")
    if a.json:
        emit_rows(c.as_dict() for c in cells)
    else:
        print(readings_markdown(cells), end="")
    return 0


def cmd_reproduce(a):
    """``statetrack reproduce``: ``reproduce.reproduce`` (the sweep, then the report from the database)."""
    _check(a)  # a mistyped study or option is said before torch loads
    _figures(a.figures)
    from functools import partial

    from statetrack.reproduce import reproduce

    if a.out and a.out == DEFAULT_OUT and a.seeds is None and not a.force:  # rerun as it was: reuse or
        from statetrack.report.folder import Extent, place_report  # write beside

        part = load_part(a)
        placed = place_report(a.out, part.name, Extent(a.scale, part.scale(a.scale).seeds, None))
        if placed.note:  # said first: on stderr under --json, whose stdout is the runs' objects
            from statetrack.progress import warn

            (warn if a.json else say)(placed.note)
            a.out, a.seeds = str(placed.folder), placed.seeds
    run = partial(
        reproduce,
        out=a.out or None,
        figures=_figures(a.figures),
        html=a.html,
        force=a.force,
        meta={"Command": _command("reproduce", a), **part_note(a)},
    )
    r, wall = _sweep(a, run)
    if a.json:
        _emit_runs(r.results, a.db, r.study)
        return 0
    _print_report(r.report, a)
    say(_summary(r.study, r.results, wall, a))
    if r.written:
        say(f"report written to {_written(r.written, r.report, a)}")
    return 0


def add_part_options(q):
    q.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="LABEL",
        help="only this model row, repeatable (default: every row of the scale)",
    )
    q.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="LABEL",
        help="only this task column, repeatable (default: every column of the scale)",
    )


def load_part(a):
    """The study named on the command line, narrowed by --model / --task."""
    from statetrack.experiments import load_study

    return load_study(a.name).restrict(a.scale, a.model, a.task)


def add_max_runs(q) -> None:
    from statetrack.runs.jobs import MAX_RUNS

    q.add_argument(
        "--max-runs",
        type=int,
        default=MAX_RUNS,
        metavar="N",
        help="refuse a grid of more than N runs (a guard against a slip such as seeds: 1000000)",
    )


def add_run_options(q):
    add_part_options(q)
    add_max_runs(q)
    q.add_argument(
        "--scale",
        default="quick",
        help="quick (a laptop CPU), paper (the paper's protocol), or another "
        "scale the study defines (grazzi2024-lm: medium)",
    )
    q.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the scale's)")
    q.add_argument("--workers", type=int, default=2, help="parallel runs (local processes or Ray CPUs)")
    q.add_argument("--executor", default="local", choices=["local", "ray"], help="where the runs run")
    q.add_argument(
        "--address", default=None, help="Ray cluster address for ray.init (default: a local instance)"
    )
    q.add_argument("--fresh", action="store_true", help="rerun even runs already complete in the database")
    q.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also write each run's curves as TensorBoard event files under DIR (needs tensorboard)",
    )
    add_device(q)


def add_report_options(q):
    q.add_argument(
        "--html",
        action="store_true",
        help="also write OUT/NAME.html (self-contained, figures inline as SVG) and OUT/index.html",
    )
    q.add_argument(
        "--figures",
        default="png",
        metavar="FORMATS",
        help="figure files to write, comma-separated: png, svg, pdf ('' for none)",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="replace a report of the study in --out that holds more (another scale, more seeds per "
        "cell or more complete runs); without it such a report is kept and this one refused",
    )


def cmd_scorecard(a):
    """``statetrack scorecard``: the frontier zoo's protocol on one mixer, and its card."""
    from statetrack.experiments.card import card_study
    from statetrack.files import check_writable
    from statetrack.layers.properties import option_values
    from statetrack.spec import parse_layers

    if a.workers < 1:
        raise UserError(f"--workers must be at least 1, got {a.workers}")
    for spec in parse_layers(a.layers):  # an unknown mixer or option, said before torch loads
        option_values(spec)
    study = card_study(
        a.layers, a.label or a.layers, a.scale, a.steps, a.test_lengths
    )  # scale, steps, lengths

    from statetrack.scorecard import scorecard, write_card

    if a.out:  # an unwritable folder fails now, not after the sweep
        check_writable(a.out, f"cannot write the scorecard in {a.out!r}")
    with SweepProgress(f"scorecard of {a.layers} ({a.scale})", len(study.grid(a.scale, a.seeds))) as prog:
        card = scorecard(
            a.layers,
            a.scale,
            a.label,
            a.seeds,
            a.db,
            a.workers,
            a.device,
            a.steps,
            a.test_lengths,
            a.baseline,
            on_done=prog.done,
            on_step=prog.validation,
        )
    paths = write_card(card, a.out) if a.out else []
    if a.json:
        print(json.dumps(card.as_dict()))
        return 0
    _print_card(card, paths)
    return 0


def _print_card(card, paths) -> None:
    """A card in the terminal: protocol, declarations, each task's cell and horizon, the spectra, its rank."""
    from statetrack.scorecard import spectrum_short

    say(card.protocol + f" {card.runs} runs, horizons and spectra in {card.seconds:.0f} s.")
    for line in card.declared:
        say(line)
    for v, c in zip(card.verdicts, card.own(), strict=True):
        h = card.horizons[v["task"]]
        say(
            f"  {v['task']}: {'-' if c is None else c.text()}; horizon "
            f"{h if isinstance(h, str) else h['horizon'] or 'none up to ' + str(h['horizon_max'])}"
        )
    texts = {col: sp if isinstance(sp, str) else spectrum_short(sp) for col, sp in card.spectra.items()}
    if len(set(texts.values())) == 1:  # one line for all: a module without a transition
        texts = {"every task": next(iter(texts.values()))}
    for col, text in texts.items():
        say(f"  spectrum on {col}: {text}")
    say(card.baseline)
    for i, (label, learned, agree, judged) in enumerate(card.table.leaderboard(), 1):
        if label == card.label:
            say(
                f"leaderboard: #{i} of {len(card.table.rows)}, {learned} tasks tracked, {agree}/{judged} agree"
            )
    if paths:
        say(f"wrote {', '.join(str(p) for p in paths if p.suffix in ('.md', '.html'))}")


def add_scorecard(sub) -> None:
    q = sub.add_parser(
        "scorecard",
        help="the frontier zoo's protocol on one mixer (built-in, spec or plugin): verdicts, learnability, "
        "horizons, spectrum and its leaderboard row",
    )
    q.add_argument("layers", help="a layer spec: a mixer, 'mamba(conv=0)*2', or a plugin's mixer (--plugin)")
    q.add_argument(
        "--scale",
        default="quick",
        help="a scale of the frontier zoo (quick: 15 runs, about 4 min on 2 cores for one Mamba layer)",
    )
    q.add_argument("--label", default=None, help="the row's label (default: the layer spec)")
    q.add_argument("--seeds", type=int, default=None, help="seeds per task (default: the scale's)")
    q.add_argument("--steps", type=int, default=None, help="training steps (default: the scale's)")
    q.add_argument(
        "--test-lengths", default=None, help="test lengths, e.g. '500..511' or 16,64 (default: the scale's)"
    )
    q.add_argument("--workers", type=int, default=2, help="parallel runs (local processes)")
    q.add_argument(
        "--baseline",
        default=None,
        metavar="CSV",
        help="a verdict table CSV (report's NAME-verdicts.csv) for the built-in rows (default: the "
        "frontier zoo's runs in --db, else the published table at the quick scale)",
    )
    q.add_argument("--out", default="runs/scorecards", help="folder for the card (.md, .html) ('' for none)")
    add_device(q)
    add_db(q)
    add_json(q, "one object: the card")
    q.set_defaults(fn=cmd_scorecard)


def add_commands(sub) -> None:
    add_scorecard(sub)
    q = sub.add_parser("reproduce", help="run a paper's study and print our table beside the paper's")
    q.add_argument("name", help="a built-in study name or a study YAML file")
    add_run_options(q)
    q.add_argument("--out", default=DEFAULT_OUT, help="report folder ('' for none)")
    add_report_options(q)
    add_db(q)
    add_json(q, "one object per (run, length), with the grid keys table, column, lr")
    q.set_defaults(fn=cmd_reproduce)

    q = sub.add_parser(
        "sweep", help="run a study's grid; complete runs are skipped, so a stopped sweep resumes"
    )
    q.add_argument("name", help="a built-in study name or a study YAML file")
    add_run_options(q)
    add_db(q)
    add_json(q, "one object per (run, length), with the grid keys table, column, lr")
    q.set_defaults(fn=cmd_sweep)

    q = sub.add_parser(
        "report", help="a study's tables beside the paper's, plots and exports, from the database"
    )
    q.add_argument("name", help="a built-in study name or a study YAML file")
    q.add_argument("--scale", default="quick", help="the scale whose grid is reported")
    q.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="seeds per cell, if the sweep overrode them (default: the scale's)",
    )
    add_part_options(q)
    add_max_runs(q)
    add_device(q, help="the sweep's --device")
    q.add_argument(
        "--out", default=DEFAULT_OUT, help="folder for .md/.csv/.tex and figures ('' to only print)"
    )
    add_report_options(q)
    q.add_argument(
        "--reading",
        action="append",
        default=None,
        metavar="POOLING/POSITION/SPAN",
        help="re-score the stored runs' longest lengths under this reading and print how many published "
        "cells it matches (nothing is written): POOLING median or best-seed, POSITION final, per-token or "
        "whole-sequence, SPAN as-worded or every-shorter, e.g. median/final/as-worded; repeatable, or 'all'",
    )
    add_db(q)
    add_json(q, "one object per table cell (the CSV columns); with --reading, one per cell and reading")
    q.set_defaults(fn=cmd_report)
