"""Commands of the studies area: ``sweep`` (run a study's grid), ``report`` (tables, plots, exports from
the database) and ``reproduce`` (sweep + report)."""
from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time

from statetrack.cli.args import add_db, add_json
from statetrack.cli.output import console, progress
from statetrack.errors import UserError

DEFAULT_OUT = "runs/reports"


def _check(a):
    if a.workers < 1:
        raise UserError(f"--workers must be at least 1, got {a.workers}")
    if getattr(a, "seeds", None) is not None and a.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {a.seeds}")
    if a.address is not None and a.executor != "ray":
        raise UserError("--address needs --executor ray")


def machine() -> str:
    from statetrack.device import cpu_model

    import torch

    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores ({cpu_model()}){gpu}, "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def part_note(a) -> list[str]:
    """A report line naming the part of the grid that --model / --task chose, if any."""
    if not (a.model or a.task):
        return []
    return [f"- Part of the grid: model rows {', '.join(a.model) if a.model else 'all'}; task columns "
            f"{', '.join(a.task) if a.task else 'all'} (the rest of the scale's grid was not run here)"]


def _sweep(a):
    """Run the grid with a progress bar; returns (study, results, wall seconds)."""
    from statetrack.reproduce import sweep

    study = load_part(a)
    n_jobs = len(study.cells(a.scale, a.seeds, a.device))
    t0 = time.time()
    with progress(a.json) as prog:
        bar = prog.add_task(f"{study.name} ({a.scale})", total=n_jobs)
        study, results = sweep(
            study, a.scale, a.seeds, db=a.db, workers=a.workers, fresh=a.fresh, device=a.device,
            executor=a.executor, address=a.address,
            on_done=lambda job, res: prog.update(bar, advance=1, description=f"{study.name}: done {job.label} "
                                                 f"/ {job.column} lr {job.train.lr:g} seed {job.seed}"))
    return study, results, time.time() - t0


def _summary(study, results, wall, a) -> str:
    reused = sum(r.reused for _, r in results)
    failed = sum(r.status != "complete" for _, r in results)
    return (f"{study.name} ({a.scale}): {len(results)} runs, {len(results) - reused} run now, {reused} reused "
            f"from {a.db}, {failed} failed; executor {a.executor}, {a.workers} worker(s); wall time {wall:.1f} s")


def _emit_runs(results, db):
    """JSON Lines, one object per (run, test length)."""
    from statetrack.runner import metrics_rows
    from statetrack.store import Store

    store = Store(db)
    for job, res in results:
        for row in metrics_rows(store.run(res.run_id), res.metrics):
            print(json.dumps({**row, "table": job.table, "column": job.column, "lr": job.train.lr}))


def cmd_sweep(a):
    _check(a)
    study, results, wall = _sweep(a)
    if a.json:
        _emit_runs(results, a.db)
        return 0
    print(_summary(study, results, wall, a))
    return 0 if all(r.status == "complete" for _, r in results) else 1


def _print_report(rep, a):
    if a.json:
        for t in rep.tables:
            for row in t.csv_rows():
                print(json.dumps(row))
        return
    con = console()
    for t in rep.tables:
        con.print(t.rich())
    probes = rep.probe_rows()
    if probes:
        from rich.table import Table

        from statetrack.report.writer import PROBE_HEADERS, probe_cells

        pt = Table(title="probes: accuracy (%) of the trained models on fixed inputs (median over runs)")
        for h in ("model", "probe", "runs") + PROBE_HEADERS:
            pt.add_column(h)
        for r in probes:
            pt.add_row(r["model"], r["probe"], str(r["runs"]), *probe_cells(r))
        con.print(pt)
    con.print(f"[dim]{rep.study.source}. Database: {a.db}; {len(rep.results) - rep.missing} of "
              f"{len(rep.results)} runs of the grid complete; {rep.interrupted} unfinished records not counted."
              "[/dim]")
    if rep.study.notes:
        con.print(f"[dim]{rep.study.notes.strip()}[/dim]")


def cmd_report(a):
    from statetrack.report.writer import collect, write_report

    if a.seeds is not None and a.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {a.seeds}")
    study = load_part(a)
    rep = collect(study, a.db, a.scale, a.seeds, a.device)
    _print_report(rep, a)
    if a.out:
        cmd = f"- Command: `statetrack {' '.join(map(shlex.quote, sys.argv[1:]))}`" if sys.argv[1:2] == ["report"] else ""
        path = write_report(rep, a.out, header="\n".join([cmd, *part_note(a)]))
        if not a.json:
            print(f"report written to {path} (+ .csv, .tex, {study.name}/*.png)")
    return 0


def cmd_reproduce(a):
    """``statetrack reproduce``: sweep, then the report from the database."""
    from statetrack.report.writer import collect, write_report

    _check(a)
    study, results, wall = _sweep(a)
    rep = collect(study, a.db, a.scale, a.seeds, a.device)
    if a.json:
        _emit_runs(results, a.db)
    else:
        _print_report(rep, a)
        print(_summary(study, results, wall, a))
    if a.out:
        cmd = "statetrack " + " ".join(map(shlex.quote, sys.argv[1:])) if sys.argv[1:2] == ["reproduce"] else \
            f"statetrack reproduce {a.name} --scale {a.scale}"
        header = "\n".join([
            f"- Command: `{cmd}`",
            f"- Machine: {machine()}",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- Wall time of the sweep: {wall:.0f} s ({len(results) - sum(r.reused for _, r in results)} runs "
            f"trained, {sum(r.reused for _, r in results)} reused; executor {a.executor}, {a.workers} worker(s), "
            "1 thread per run)", *part_note(a)])
        path = write_report(rep, a.out, header)
        if not a.json:
            print(f"report written to {path} (+ .csv, .tex, {study.name}/*.png)")
    return 0


def add_part_options(q):
    q.add_argument("--model", action="append", default=None, metavar="LABEL",
                   help="only this model row (repeatable; default: every row of the scale)")
    q.add_argument("--task", action="append", default=None, metavar="LABEL",
                   help="only this task column (repeatable; default: every column of the scale)")


def load_part(a):
    """The study named on the command line, narrowed by --model / --task."""
    from statetrack.experiments import load_study

    return load_study(a.name).restrict(a.scale, a.model, a.task)


def add_run_options(q):
    q.add_argument("--scale", default="quick", help="quick (a laptop CPU) or paper (the paper's protocol)")
    add_part_options(q)
    q.add_argument("--seeds", type=int, default=None, help="seeds per cell (default: the scale's)")
    q.add_argument("--workers", type=int, default=2, help="parallel runs (local processes or Ray CPUs)")
    q.add_argument("--executor", default="local", choices=["local", "ray"])
    q.add_argument("--address", default=None, help="Ray cluster address for ray.init (default: a local instance)")
    q.add_argument("--fresh", action="store_true", help="rerun even runs already complete in the database")
    q.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                   help="cpu, cuda, or auto: cuda where present (default auto)")


def add_commands(sub) -> None:
    q = sub.add_parser("reproduce", help="run a paper's study and print our table beside the paper's")
    q.add_argument("name", help="a built-in study name or a study YAML file")
    add_run_options(q)
    q.add_argument("--out", default=DEFAULT_OUT, help=f"report folder (default {DEFAULT_OUT}; '' for none)")
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_reproduce)

    q = sub.add_parser("sweep", help="run a study's grid; complete runs are skipped, so a stopped sweep resumes")
    q.add_argument("name", help="a built-in study name or a study YAML file")
    add_run_options(q)
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_sweep)

    q = sub.add_parser("report", help="a study's tables beside the paper's, plots and exports, from the database")
    q.add_argument("name", help="a built-in study name or a study YAML file")
    q.add_argument("--scale", default="quick", help="the scale whose grid is reported (default quick)")
    add_part_options(q)
    q.add_argument("--seeds", type=int, default=None, help="seeds per cell, if the sweep overrode them")
    q.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                   help="the sweep's --device (default auto)")
    q.add_argument("--out", default=DEFAULT_OUT, help=f"folder for .md/.csv/.tex and PNGs (default {DEFAULT_OUT}; "
                                                      "'' to only print)")
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_report)
