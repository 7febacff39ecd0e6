"""Commands of the run area: ``train`` (one run), ``eval`` (a checkpoint), ``runs`` (the database), ``rerun``."""
from __future__ import annotations

import json
import sys

from statetrack.cli.args import add_db, add_json, parse_lengths, parse_range
from statetrack.cli.output import console, emit_rows, metrics_table, progress
from statetrack.errors import UserError


def cmd_train(a):
    from statetrack.config import EvalConfig, ModelConfig, TrainConfig, default_lengths, validated
    from statetrack.runner import metrics_rows, run

    lo, hi = parse_range(a.train_lengths)
    given = {"layers": a.layers, "d_model": a.d_model, "d_state": a.d_state, "mlp": a.mlp, "norm": a.norm}
    if a.init:  # the construction defines the model; options given must agree (statetrack construct --list)
        from statetrack.theory.constructions import init_config

        mcfg = init_config(a.init, a.task, **given)
    elif not a.layers:
        raise UserError("train needs --layers SPEC (or --init construction:NAME)")
    else:
        mcfg = validated(ModelConfig, **{k: v for k, v in given.items() if v is not None})
    tcfg = validated(TrainConfig, task=a.task, model=mcfg, train_min_len=lo, train_max_len=hi, steps=a.steps,
                     batch_size=a.batch_size, lr=a.lr, weight_decay=a.weight_decay, seed=a.seed,
                     device=a.device, eval_every=a.eval_every, patience=a.patience, init=a.init,
                     init_noise=a.init_noise)
    lengths = parse_lengths(a.test_lengths) if a.test_lengths is not None else default_lengths()
    ecfg = validated(EvalConfig, lengths=lengths, batch_size=a.eval_batch, device=a.device)
    with progress(a.json) as prog:
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
        emit_rows(metrics_rows({"id": res.run_id, "label": a.label, "config": tcfg.model_dump()}, res.metrics))
    else:
        console().print(metrics_table(f"run {res.run_id}: {mcfg.layers} on {tcfg.task}, trained on "
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
    lengths = parse_lengths(a.lengths) if a.lengths is not None else default_lengths()
    ecfg = validated(EvalConfig, lengths=lengths, batch_size=a.batch_size, device=a.device, chunk=a.chunk)
    with progress(a.json) as prog:
        bar = prog.add_task("evaluate", total=len(ecfg.lengths))
        metrics = evaluate(model, task, ecfg, on_length=lambda m: prog.update(bar, advance=1,
                                                                            description=f"evaluate L={m.length}"))
    if a.json:
        emit_rows(metrics_rows({"id": extra.get("run_id"), "label": extra.get("label"),
                                 "config": {**cfg.model_dump(), "task": task.name}}, metrics))
    else:
        console().print(metrics_table(f"{a.checkpoint}: {cfg.model.layers} on {task.name}", metrics))
    return 0


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
            emit_rows(metrics_rows(r, ms) or [{"run_id": r["id"], "status": r["status"]}])
            return 0
        con = console()
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
            con.print(metrics_table("metrics", [LengthMetrics.from_row(m) for m in ms]))
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
    console().print(t)
    return 0


def cmd_rerun(a):
    from statetrack.runner import metrics_rows, rerun
    from statetrack.store import Store

    old = Store(a.db, create=False).run(a.run_id)
    if old["status"] != "complete":
        raise UserError(f"run {a.run_id} is {old['status']}; only complete runs can be rerun and compared")
    with progress(a.json) as prog:
        prog.add_task(f"rerun {a.run_id}", total=None)
        new, diffs = rerun(a.run_id, a.db)
    if a.json:
        emit_rows(metrics_rows(Store(a.db).run(new.run_id), new.metrics))
    else:
        verdict = "identical metrics" if not diffs else f"DIFFERENT metrics at lengths {sorted(diffs)}"
        print(f"run {a.run_id} rerun as run {new.run_id}: {verdict}")
    return 0 if not diffs else 1


def add_commands(sub) -> None:
    q = sub.add_parser("train", help="train one model, evaluate it on the test lengths, record the run")
    q.add_argument("--task", default="parity")
    q.add_argument("--layers", default=None, help="layer spec, e.g. 'mamba,s4d' or 'negmamba*2'")
    # model options: None = not given (ModelConfig's default, or the construction's with --init)
    q.add_argument("--d-model", type=int, default=None, help="default 8")
    q.add_argument("--d-state", type=int, default=None, help="default 16")
    q.add_argument("--mlp", action="store_true", default=None)
    q.add_argument("--norm", default=None, help="rmsnorm (default), layernorm, none")
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
    q.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                   help="cpu, cuda, or auto: cuda where present (default auto)")
    q.add_argument("--init", default=None, help="start from a construction: construction:NAME (statetrack construct --list)")
    q.add_argument("--init-noise", type=float, default=0.0, help="with --init: add N(0, sigma^2) to every parameter")
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_train)

    q = sub.add_parser("eval", help="evaluate a checkpoint at each test length")
    q.add_argument("checkpoint")
    q.add_argument("--task", default=None, help="task to evaluate on (default: the one it was trained on)")
    q.add_argument("--lengths", default=None, help="comma-separated (default 16,32,...,512,1000,2000,5000,10000)")
    q.add_argument("--batch-size", type=int, default=128)
    q.add_argument("--chunk", type=int, default=1024)
    q.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                   help="cpu, cuda, or auto: cuda where present (default auto)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=cmd_eval)

    q = sub.add_parser("runs", help="list past runs, or show one: 'runs show ID'")
    q.add_argument("action", nargs="?", default="list", choices=["list", "show"])
    q.add_argument("run_id", nargs="?", type=int)
    q.add_argument("--study", default=None)
    q.add_argument("--status", default=None, choices=["running", "complete", "failed", "interrupted"])
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_runs)

    q = sub.add_parser("rerun", help="rerun a stored run from its stored config and compare the numbers")
    q.add_argument("run_id", type=int)
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_rerun)
