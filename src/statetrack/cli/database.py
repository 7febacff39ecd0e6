"""Commands of the database area: ``runs`` (list, show, compare, export, check the stored runs) and
``plot`` (stored runs' accuracy and curves in one figure)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from statetrack.cli.args import (
    RUN_REF,
    add_db,
    add_json,
    find_run,
    parse_split,
)
from statetrack.cli.output import (
    SPLIT_NAMES,
    Col,
    console,
    emit_rows,
    print_metrics,
    print_record,
    print_table,
    say,
    show,
)
from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.progress import warn
from statetrack.runs.store import RunRecord, RunStatus
from statetrack.untrusted import confusable, terminal_text

#: the runs a listing shows by default (the latest ones; ``runs --last 0`` lists every run)
LIST_LAST = 1000


#: the columns of ``runs``; the optional ones are left out, the last first, when the table does not fit
RUN_COLUMNS = [
    Col("id", lambda r: str(r["run_id"]), "right"),
    Col("status", lambda r: r["status"]),
    Col("study", lambda r: r["study"] or "-"),
    Col("label", lambda r: r["label"] or "-"),
    Col("model", lambda r: r["model"]),
    Col("task", lambda r: r["task"]),
    Col("train len", lambda r: f"{r['train_min_len']}-{r['train_max_len']}", "right", optional=True),
    Col("seed", lambda r: str(r["seed"]), "right", optional=True),
    Col("longest >=90%", lambda r: str(r["longest_90"] or "-"), "right"),
    Col("time (s)", lambda r: f"{r['wall_time']:.1f}" if r["wall_time"] else "-", "right", optional=True),
]


def _show(store, r: RunRecord, as_json: bool) -> int:
    from statetrack.runs.records import run_detail
    from statetrack.training.evaluation import LengthMetrics

    run_id = r.id
    problem = store.checkpoint_problem(r)
    if problem:
        print(terminal_text(f"warning: {problem}"), file=sys.stderr)
    d = run_detail(r, store.metrics(run_id), store.curve(run_id), store.split_metrics(run_id))
    if as_json:
        print(json.dumps(d))
        return 0

    def flat(prefix, obj):
        for k, v in obj.items():
            if isinstance(v, dict):
                yield from flat(f"{prefix}{k}.", v)
            else:
                yield f"{prefix}{k}", show(v)

    pairs = [
        (k, show(d[k]))
        for k in ("status", "study", "label", "model", "task", "seed", "checkpoint", "error")
        if d[k] is not None
    ]
    pairs += [
        ("train lengths", f"{d['train_min_len']}-{d['train_max_len']}"),
        ("wall time", f"{d['wall_time'] or 0:.1f} s"),
        ("curve", f"{len(d['curve'])} validations (runs show {run_id} --json has them)"),
    ]
    con = console()
    print_record(f"run {run_id}", pairs, con=con)
    for section in ("summary", "config", "versions"):
        print_record(section, list(flat("", d[section] or {})), con=con)
    if d["metrics"]:
        print_metrics("metrics", [LengthMetrics(**m) for m in d["metrics"]], con=con)
    for split, ms in d["split_metrics"].items():
        print_metrics(f"metrics [{SPLIT_NAMES.get(split, split)}]", [LengthMetrics(**m) for m in ms], con=con)
    return 0


def cmd_runs(a):
    from statetrack.runs.records import run_object
    from statetrack.runs.store import Store

    if a.action != "export" and (a.format != "csv" or a.out):
        raise UserError(f"--format and --out go with 'runs export', not 'runs {a.action}'")
    if a.action in ("list", "export") and a.runs:
        raise UserError(
            f"runs {a.action} takes no run names (got {' '.join(a.runs)}); --study and --status "
            "choose the runs"
        )
    if a.action == "compare":
        return _compare(a)
    if a.action == "export":
        return _export(a)
    store = Store(a.db, readonly=True)
    if a.check:
        return _check(store, a)
    if a.action == "show":
        if len(a.runs) != 1:
            raise UserError(
                "runs show needs one run: its id, 'last' or its label, e.g. 'statetrack runs show last'"
                + (f" (got {len(a.runs)}; 'runs compare' takes several)" if a.runs else "")
            )
        return _show(store, find_run(a.db, a.runs[0]), a.json)
    if a.last < 0:
        raise UserError(f"--last must be 0 (every run) or more, got {a.last}")
    runs = [run_object(r) for r in store.runs(study=a.study, status=a.status, last=a.last or None)]
    if a.last and len(runs) == a.last and (total := store.count_runs(a.study, a.status)) > a.last:
        warn(f"the latest {a.last:,} of {total:,} runs; --last 0 lists every run (--last N the latest N)")
    for group in confusable({r["label"] for r in runs}):  # RNN and RΝΝ (a Greek Nu): two rows alike
        warn(f"labels {' and '.join(map(ascii, group))} look the same; 'runs show ID' tells their runs apart")
    if a.json:
        emit_rows(runs)
        return 0
    print_table(f"runs in {a.db}", RUN_COLUMNS, runs)
    return 0


def _compare(a) -> int:
    """``runs compare A B [C...]``: the configs side by side (differing keys marked), the accuracy at each
    length with its interval, and whether the runs differ beyond their intervals."""
    from statetrack.report.compare import compare_runs

    if len(a.runs) < 2:
        raise UserError(
            "runs compare needs two runs or more: ids, 'last' or labels, e.g. "
            "'statetrack runs compare s3 s3-rerun-2'"
        )
    for ref in a.runs:
        find_run(a.db, ref)  # a label that several runs share is said
    c = compare_runs(a.db, a.runs, a.split)
    if a.json:
        print(json.dumps(c.as_dict()))
        return 0
    heads = [r.header for r in c.runs]
    con = console()
    _print_config(c, heads, a.all, con)
    con.print()
    _print_accuracy(c, heads, a.split, con)
    con.print()
    _print_summary(c, heads, con)
    return 0


def _print_config(c, heads: list[str], every: bool, con) -> None:
    """The compared runs' configs side by side: the keys that differ (``every``: all keys, marked)."""
    keys = list(c.config) if every else c.differs
    rows = [(k, c.config[k]) for k in keys]
    print_table(
        f"config: {len(c.differs)} of {len(c.config)} keys differ" + ("" if every else " (--all: every key)"),
        [Col("key", lambda r: r[0] + (" *" if r[0] in c.differs else ""))]
        + [Col(h, _nth(i, lambda v: show(v))) for i, h in enumerate(heads)],
        rows,
        caption="* = differs between the runs" if every else None,
        styles=lambda r, i: "bold yellow" if rows[r][0] in c.differs else None,
        con=con,
    )


def _print_accuracy(c, heads: list[str], split: str, con) -> None:
    """The compared runs' accuracy at each test length with its 95% interval, and whether they differ."""

    def acc(r, n):
        m = r.metrics.get(n)
        if m is None:
            return "-"
        if m.accuracy is None:
            return "n/a"
        return f"{100 * m.accuracy:.1f} [{100 * m.accuracy_low:.1f}-{100 * m.accuracy_high:.1f}]"

    print_table(
        f"accuracy (%) at each test length [95% interval], {split} draw",
        [Col("length", lambda n: str(n), "right")]
        + [Col(h, _of(r, acc), "right") for h, r in zip(heads, c.runs, strict=True)]
        + [Col("beyond the intervals?", c.verdict)],
        c.lengths,
        caption=c.caption(),
        con=con,
    )


def _print_summary(c, heads: list[str], con) -> None:
    """The compared runs' training summaries side by side."""
    from statetrack.report.compare import summary

    sums = [summary(r) for r in c.runs]
    labels = {
        "status": "status",
        "longest_90": "longest >=90%",
        "best_val_accuracy": "best val. accuracy",
        "steps_run": "steps run",
        "wall_time": "wall time (s)",
        "params": "parameters",
    }

    def value(k, v):
        if v is None:
            return "-"
        return f"{100 * v:.1f}%" if k == "best_val_accuracy" else f"{v:.1f}" if k == "wall_time" else show(v)

    print_table(
        "summary",
        [Col("", lambda k: labels[k])]
        + [Col(h, _of(sums[i], lambda s, k: value(k, s[k])), "right") for i, h in enumerate(heads)],
        list(labels),
        con=con,
    )


def _nth(i: int, fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    """A column's cell: ``fmt`` of the i-th of a row's values (``row[1]``)."""
    return lambda row: fmt(row[1][i])


def _of(thing: Any, fmt: Callable[[Any, Any], str]) -> Callable[[Any], str]:
    """A column's cell: ``fmt(thing, row)`` (a column per run)."""
    return lambda row: fmt(thing, row)


def _export(a) -> int:
    """``runs export``: every run (of --study, with --status) as CSV (stdout or --out) or parquet (--out)."""
    from statetrack.report.export import export_runs

    out = export_runs(a.db, a.format, a.out, a.study, a.status)
    if a.out is None:
        sys.stdout.write(str(out))
    else:
        print(f"wrote {out}", file=sys.stderr)
    return 0


def cmd_plot(a):
    """``statetrack plot RUN... [--out FILE]``: accuracy against length and the learning curves of any runs."""
    from pathlib import Path

    from statetrack.files import check_writable, inside
    from statetrack.report.compare import default_plot_path, plot_runs

    for ref in a.runs:
        find_run(a.db, ref)  # a label that several runs share is said
    out = Path(a.out) if a.out is not None else default_plot_path(a.db, a.runs, a.split)
    if out.suffix.lstrip(".").lower() in ("png", "svg", "pdf"):
        check_writable(out.absolute().parent, f"cannot write the plot {str(out)!r}")
    # the folder chosen: the one --out names, else the database's (its plots/ is never a link followed)
    with inside(out.absolute().parent if a.out is not None else Path(a.db).absolute().parent):
        path = plot_runs(a.db, a.runs, out, a.split)
    say(f"wrote {path}: accuracy against test length and learning curves of {len(a.runs)} run(s)")
    return 0


def _check(store, a) -> int:
    """``runs --check``: every damaged row and foreign trigger or view (``Store.check``); exit 1 when there
    is any."""
    damaged = store.check()
    if a.json:
        emit_rows(damaged)
    elif damaged:
        print_table(
            f"damaged rows and foreign SQL in {a.db} (listings leave their runs out)",
            [
                Col("run", lambda r: "-" if r["run_id"] is None else str(r["run_id"]), "right"),
                Col("table", lambda r: r["table"]),
                Col("problem", lambda r: r["problem"]),
            ],
            damaged,
        )
    else:
        say(f"no damaged row and no foreign SQL in {a.db} ({store.counts()['runs']} runs)")
    return 1 if damaged else 0


# long: an argparse table, one block per command, read top to bottom
def add_commands(sub) -> None:
    q = sub.add_parser(
        "runs",
        help="list past runs; 'runs show RUN', 'runs compare A B [C...]', 'runs export'",
        description="list: every run; show RUN: one run in full; compare A B [C...]: runs side by "
        "side (configs, accuracy per length, differences beyond the 95% intervals); "
        "export: every run as CSV or parquet, one row per run, draw and length.",
    )
    q.add_argument("action", nargs="?", default="list", choices=["list", "show", "compare", "export"])
    q.add_argument(
        "runs", nargs="*", metavar="RUN", help=f"with show (one) or compare (two or more): {RUN_REF}"
    )
    q.add_argument("--study", default=None, help="only the runs of this study (list, export)")
    q.add_argument(
        "--status",
        default=None,
        choices=list(RunStatus),
        help="only the runs with this status (list, export)",
    )
    q.add_argument(
        "--split",
        type=parse_split,
        default=Split.TEST,
        choices=[Split.TEST, Split.LONG],
        help="compare: the draw whose accuracy is compared (long: the long-range draw)",
    )
    q.add_argument("--all", action="store_true", help="compare: every config key, not only those that differ")
    q.add_argument(
        "--format", default="csv", choices=["csv", "parquet"], help="export: csv, or parquet (needs pyarrow)"
    )
    q.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="export: the file to write; parquet needs it (default: standard output, for csv)",
    )
    q.add_argument(
        "--last",
        type=int,
        default=LIST_LAST,
        metavar="N",
        help="list: the latest N runs (0: every run; a database of 200,000 runs took minutes to list)",
    )
    q.add_argument(
        "--check",
        action="store_true",
        help="list the damaged rows of the database instead (rows that listings leave out: JSON that "
        "does not parse, wrong types); exit 1 when there is any",
    )
    add_db(q)
    add_json(
        q,
        "one object per run; with show: one object with config, summary, curve and metrics; with "
        "compare: one object",
    )
    q.set_defaults(fn=cmd_runs)

    q = sub.add_parser("plot", help="accuracy against test length and learning curves of any stored runs")
    q.add_argument("runs", nargs="+", metavar="RUN", help=RUN_REF)
    q.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="the figure: .png, .svg or .pdf (default: plots/ beside --db, named by the runs, e.g. "
        "runs/plots/rnn-parity_mamba-parity.png)",
    )
    q.add_argument(
        "--split",
        type=parse_split,
        default=Split.TEST,
        choices=[Split.TEST, Split.LONG],
        help="the draw whose accuracy is plotted (long: the long-range draw)",
    )
    add_db(q)
    q.set_defaults(fn=cmd_plot)
