"""Command line: a thin layer over the Python API.

Every command parses its arguments, calls one library function, and prints a table (or JSON Lines
with ``--json``). Bad input ends with one line on stderr and exit code 2; nothing is written first.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from statetrack.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2, no usage dump
        raise UserError(f"{self.prog}: {message}")


def _lengths(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UserError(f"bad test lengths {text!r}; give positive integers separated by commas, e.g. 16,100,1000") from None
    if not vals:
        raise UserError("empty test lengths; give positive integers separated by commas, e.g. 16,100,1000")
    bad = [v for v in vals if v < 1]
    if bad:
        raise UserError(f"bad test length {bad[0]}; test lengths must be positive integers")
    return vals


def _range(text: str) -> tuple[int, int]:
    parts = text.replace(":", "-").split("-") if not text.startswith("-") else [text]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40") from None
    lo, hi = (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[-1]) if len(vals) == 2 else (0, -1)
    if not 1 <= lo <= hi:
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40")
    return lo, hi


def _console():
    from rich.console import Console

    # a wide console when piped, so tables are not squeezed into 80 columns
    return Console(width=None if sys.stdout.isatty() else 200)


def _progress(json_mode: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=True, disable=json_mode or not sys.stderr.isatty(),
                    console=__import__("rich.console").console.Console(stderr=True))


def _emit_rows(rows):
    for r in rows:
        print(json.dumps(r))


def _metrics_table(title: str, metrics):
    from rich.table import Table

    from statetrack.evaluation import longest_generalized

    t = Table(title=title)
    for h in ("length", "accuracy", "scaled", "token acc", "sequence acc"):
        t.add_column(h, justify="right")
    for m in metrics:
        t.add_row(str(m.length), f"{100 * m.accuracy:.1f}", f"{m.scaled_accuracy:+.3f}",
                  f"{100 * m.token_accuracy:.1f}", f"{100 * m.sequence_accuracy:.1f}")
    longest = longest_generalized(metrics)
    t.caption = f"longest length with accuracy >= 90% (and at every shorter test length): {longest or 'none'}"
    return t


# -- commands -----------------------------------------------------------------------------------
def cmd_train(a):
    from statetrack.config import EvalConfig, ModelConfig, TrainConfig, default_lengths, validated
    from statetrack.runner import metrics_rows, run

    lo, hi = _range(a.train_lengths)
    if a.init:  # the construction fixes the model (statetrack construct --list)
        from statetrack.theory.constructions import init_config

        mcfg = init_config(a.init, a.task)
    elif not a.layers:
        raise UserError("train needs --layers SPEC (or --init construction:NAME)")
    else:
        mcfg = validated(ModelConfig, layers=a.layers, d_model=a.d_model, d_state=a.d_state, mlp=a.mlp, norm=a.norm)
    tcfg = validated(TrainConfig, task=a.task, model=mcfg, train_min_len=lo, train_max_len=hi, steps=a.steps,
                     batch_size=a.batch_size, lr=a.lr, weight_decay=a.weight_decay, seed=a.seed,
                     device=a.device, eval_every=a.eval_every, patience=a.patience, init=a.init,
                     init_noise=a.init_noise)
    lengths = _lengths(a.test_lengths) if a.test_lengths is not None else default_lengths()
    ecfg = validated(EvalConfig, lengths=lengths, batch_size=a.eval_batch, device=a.device)
    with _progress(a.json) as prog:
        bar = prog.add_task(f"train {mcfg.layers}", total=tcfg.steps)
        ebar = prog.add_task("evaluate", total=len(ecfg.lengths), visible=False)
        res = run(tcfg, ecfg, db=a.db, label=a.label, reuse=False,
                  on_step=lambda s, info: prog.update(bar, completed=s, description=f"train {mcfg.layers} "
                                                      f"val acc {100 * info['val_accuracy']:.1f}"),
                  on_length=lambda m: prog.update(ebar, advance=1, visible=True, description=f"evaluate L={m.length}"))
    if res.status != "complete":
        print(f"run {res.run_id} failed: {res.summary.get('reason')}", file=sys.stderr)
        return 1
    if a.json:
        _emit_rows(metrics_rows({"id": res.run_id, "label": a.label, "config": tcfg.model_dump()}, res.metrics))
    else:
        _console().print(_metrics_table(f"run {res.run_id}: {mcfg.layers} on {tcfg.task}, trained on "
                                        f"{a.train_lengths} (checkpoint {res.checkpoint})", res.metrics))
    return 0


def cmd_eval(a):
    from statetrack.checkpoint import load_checkpoint
    from statetrack.config import EvalConfig, default_lengths, validated
    from statetrack.device import resolve_device
    from statetrack.evaluation import evaluate
    from statetrack.runner import metrics_rows
    from statetrack.tasks import get_task

    model, cfg, task, extra = load_checkpoint(a.checkpoint, device=resolve_device(a.device))
    if a.task:
        task = get_task(a.task)
    lengths = _lengths(a.lengths) if a.lengths is not None else default_lengths()
    ecfg = validated(EvalConfig, lengths=lengths, batch_size=a.batch_size, device=a.device, chunk=a.chunk)
    with _progress(a.json) as prog:
        bar = prog.add_task("evaluate", total=len(ecfg.lengths))
        metrics = evaluate(model, task, ecfg, on_length=lambda m: prog.update(bar, advance=1,
                                                                            description=f"evaluate L={m.length}"))
    if a.json:
        _emit_rows(metrics_rows({"id": extra.get("run_id"), "label": extra.get("label"),
                                 "config": {**cfg.model_dump(), "task": task.name}}, metrics))
    else:
        _console().print(_metrics_table(f"{a.checkpoint}: {cfg.model.layers} on {task.name}", metrics))
    return 0


def cmd_reproduce(a):
    from statetrack.cli_studies import reproduce_command

    return reproduce_command(a)


def cmd_runs(a):
    from rich.table import Table

    from statetrack.runner import metrics_rows
    from statetrack.store import Store

    store = Store(a.db, create=False)
    if a.action == "show":
        if a.run_id is None:
            raise UserError("runs show needs a run id, e.g. 'statetrack runs show 3'")
        r = store.run(a.run_id)
        ms = store.metrics(a.run_id)
        if a.json:
            _emit_rows(metrics_rows(r, ms) or [{"run_id": r["id"], "status": r["status"]}])
            return 0
        con = _console()
        con.print(f"run {r['id']}  [{r['status']}]  {r['model']} on {r['task']}  seed {r['seed']}  "
                  f"study {r['study'] or '-'}  label {r['label'] or '-'}")
        con.print(f"train lengths {r['train_min_len']}-{r['train_max_len']}  wall time "
                  f"{(r['wall_time'] or 0):.1f}s  checkpoint {r['checkpoint'] or '-'}")
        if r["error"]:
            con.print(f"error: {r['error']}")
        con.print(f"summary: {json.dumps(r['summary'])}")
        con.print(f"config: {json.dumps(r['config'])}")
        con.print(f"versions: {json.dumps(r['versions'])}")
        from statetrack.evaluation import LengthMetrics

        if ms:
            con.print(_metrics_table("metrics", [LengthMetrics.from_row(m) for m in ms]))
        return 0
    runs = store.runs(study=a.study, status=a.status)
    if a.json:
        for r in runs:
            print(json.dumps({k: r[k] for k in ("id", "study", "label", "model", "task", "seed", "status",
                                                "train_min_len", "train_max_len", "wall_time", "checkpoint")}))
        return 0
    t = Table(title=f"runs in {a.db}")
    for h in ("id", "status", "study", "label", "model", "task", "seed", "train len", "longest >=90%", "time (s)"):
        t.add_column(h)
    for r in runs:
        longest = (r["summary"] or {}).get("longest_90")
        t.add_row(str(r["id"]), r["status"], r["study"] or "-", r["label"] or "-", r["model"], r["task"],
                  str(r["seed"]), f"{r['train_min_len']}-{r['train_max_len']}", str(longest or "-"),
                  f"{r['wall_time']:.1f}" if r["wall_time"] else "-")
    _console().print(t)
    return 0


def _rows_out(a, rows, title, columns):
    """JSON Lines with --json, else a table; ``columns`` maps each header to a cell function."""
    if a.json:
        _emit_rows(rows)
        return 0
    from rich.table import Table

    t = Table(title=title)
    for h in columns:
        t.add_column(h)
    for r in rows:
        t.add_row(*(fn(r) for fn in columns.values()))
    _console().print(t)
    return 0


def cmd_models(a):
    from statetrack.layers import models_table

    return _rows_out(a, models_table(), "mixers (give the names to --layers)", {
        "name": lambda r: r["name"], "input-dependent": lambda r: _show(r["input_dependent"]),
        "eigenvalues": lambda r: r["eigenvalues"], "structure": lambda r: r["structure"],
        "n_h": lambda r: _show(r["n_h"]),
        "options": lambda r: ", ".join(f"{k}={_show(v)}" for k, v in r["options"].items()),
        "description": lambda r: r["description"]})


def cmd_tasks(a):
    from statetrack.tasks import list_tasks

    return _rows_out(a, list_tasks(), "tasks (give the string to --task)", {
        "family": lambda r: r["family"], "syntax": lambda r: r["syntax"],
        "description": lambda r: r["description"],
        "parameters": lambda r: "; ".join(f"{p['name']}: {p.get('allowed', '')}" for p in r["parameters"])})


def cmd_sample(a):
    from statetrack.tasks import sample_json

    if a.n < 1:
        raise UserError(f"--n must be at least 1, got {a.n}")
    rows = sample_json(a.task, a.length, a.n, a.seed)
    if a.json:
        _emit_rows(rows)
        return 0
    for r in rows:
        shown = r.get("input_symbols", r["inputs"])
        print("inputs :", " ".join(map(str, shown)))
        print("targets:", " ".join(str(y) if m else "." for y, m in zip(r["targets"], r["mask"])))
        print()
    return 0


def cmd_groups(a):
    from statetrack.algebra import structure_table

    names = [n for n in a.names.split(",") if n] if a.names else None
    cols = {"group": "name", "order": "order", "abelian": "is_abelian", "solvable": "is_solvable",
            "derived series": "derived_series", "derived length": "derived_length",
            "+-1 series length": "elementary_2_series_length", "composition factors": "composition_factors",
            "exponent": "exponent"}
    return _rows_out(a, structure_table(names), "group structure",
                     {h: (lambda r, k=k: _show(r[k])) for h, k in cols.items()})


def _show(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return "-" if v is None else str(v)


def cmd_rerun(a):
    from statetrack.runner import metrics_rows, rerun
    from statetrack.store import Store

    old = Store(a.db, create=False).run(a.run_id)
    if old["status"] != "complete":
        raise UserError(f"run {a.run_id} is {old['status']}; only complete runs can be rerun and compared")
    with _progress(a.json) as prog:
        prog.add_task(f"rerun {a.run_id}", total=None)
        new, diffs = rerun(a.run_id, a.db)
    if a.json:
        _emit_rows(metrics_rows(Store(a.db).run(new.run_id), new.metrics))
    else:
        verdict = "identical metrics" if not diffs else f"DIFFERENT metrics at lengths {sorted(diffs)}"
        print(f"run {a.run_id} rerun as run {new.run_id}: {verdict}")
    return 0 if not diffs else 1


# -- parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from statetrack.store import DEFAULT_DB

    p = _Parser(prog="statetrack", description="State tracking in linear RNNs and SSMs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(q, json_flag=True):
        q.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
        if json_flag:
            q.add_argument("--json", action="store_true", help="print JSON Lines, one object per (run, length)")

    q = sub.add_parser("train", help="train one model, evaluate it on the test lengths, record the run")
    q.add_argument("--task", default="parity")
    q.add_argument("--layers", default=None, help="layer spec, e.g. 'mamba,s4d' or 'negmamba*2'")
    q.add_argument("--d-model", type=int, default=8)
    q.add_argument("--d-state", type=int, default=16)
    q.add_argument("--mlp", action="store_true")
    q.add_argument("--norm", default="rmsnorm")
    q.add_argument("--train-lengths", default="8", help="N or MIN-MAX (default 8)")
    q.add_argument("--test-lengths", default=None, help="comma-separated (default 16,32,...,512,1000,2000,5000,10000)")
    q.add_argument("--steps", type=int, default=2000)
    q.add_argument("--batch-size", type=int, default=64)
    q.add_argument("--lr", type=float, default=1e-2)
    q.add_argument("--weight-decay", type=float, default=0.0)
    q.add_argument("--eval-every", type=int, default=50)
    q.add_argument("--patience", type=int, default=20)
    q.add_argument("--eval-batch", type=int, default=128)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--label", default=None)
    q.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    q.add_argument("--init", default=None, help="start from a construction: construction:NAME (statetrack construct --list)")
    q.add_argument("--init-noise", type=float, default=0.0, help="with --init: add N(0, sigma^2) to every parameter")
    common(q)
    q.set_defaults(fn=cmd_train)

    q = sub.add_parser("eval", help="evaluate a checkpoint at each test length")
    q.add_argument("checkpoint")
    q.add_argument("--task", default=None, help="task to evaluate on (default: the one it was trained on)")
    q.add_argument("--lengths", default=None, help="comma-separated (default 16,32,...,512,1000,2000,5000,10000)")
    q.add_argument("--batch-size", type=int, default=128)
    q.add_argument("--chunk", type=int, default=1024)
    q.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_eval)

    q = sub.add_parser("reproduce", help="run a paper's study and print our table beside the paper's")
    q.add_argument("name", help="a built-in study name or a study YAML file")
    from statetrack.cli_studies import DEFAULT_OUT, add_run_options

    add_run_options(q)
    q.add_argument("--out", default=DEFAULT_OUT, help=f"report folder (default {DEFAULT_OUT}; '' for none)")
    common(q)
    q.set_defaults(fn=cmd_reproduce)

    q = sub.add_parser("runs", help="list past runs, or show one: 'runs show ID'")
    q.add_argument("action", nargs="?", default="list", choices=["list", "show"])
    q.add_argument("run_id", nargs="?", type=int)
    q.add_argument("--study", default=None)
    q.add_argument("--status", default=None, choices=["running", "complete", "failed", "interrupted"])
    common(q)
    q.set_defaults(fn=cmd_runs)

    q = sub.add_parser("rerun", help="rerun a stored run from its stored config and compare the numbers")
    q.add_argument("run_id", type=int)
    common(q)
    q.set_defaults(fn=cmd_rerun)

    q = sub.add_parser("models", help="list the mixers and their declared properties")
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_models)

    q = sub.add_parser("tasks", help="list the task families and their parameters")
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_tasks)

    q = sub.add_parser("sample", help="print examples of a task")
    q.add_argument("task", help="a task string, e.g. parity, group:S3, modcount:3, tomita:5")
    q.add_argument("--length", type=int, default=16)
    q.add_argument("--n", type=int, default=2)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_sample)

    q = sub.add_parser("groups", help="structure of groups: order, derived series, composition factors, ...")
    q.add_argument("names", nargs="?", default=None, help="comma-separated group names (default: the papers' list)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_groups)

    # commands of other areas, each module adding its own subparsers
    from statetrack import cli_studies, cli_theory

    for area in (cli_theory, cli_studies):
        area.add_commands(sub, common)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
