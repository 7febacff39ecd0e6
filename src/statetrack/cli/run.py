"""Commands of the run area: ``train`` (one run), ``eval`` (a checkpoint), ``rerun`` (a stored run again)."""

from __future__ import annotations

import sys

from statetrack.cli.args import (
    RUN_REF,
    add_checkpoint,
    add_db,
    add_json,
    add_max_params,
    checkpoint_path,
    find_run,
    parse_range,
    parse_threads,
)
from statetrack.cli.bars import RunProgress
from statetrack.cli.language import print_lm_metrics, with_lm
from statetrack.cli.options import add_eval_options, add_train_options, given
from statetrack.cli.output import (
    SPLIT_NAMES,
    emit_rows,
    print_horizons,
    print_metrics,
    say,
)
from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.runs.store import RunStatus
from statetrack.untrusted import terminal_text


def train_configs(a):
    """(TrainConfig, EvalConfig) of ``statetrack train``: the config file, then the options given, then
    ``--set``, over the configs' defaults. The plugins ``--set plugins=...`` names are imported; those a
    config file names must be loaded already (data never imports code: ``plugins.require``)."""
    from statetrack.config import ConfigError, load_run_config, parse_override, run_configs
    from statetrack.plugins import load_plugins, require

    flat = load_run_config(a.config) if a.config else {}
    if a.config:
        require(flat.get("plugins", []), f"config file {a.config!r}")
    source = dict.fromkeys(flat, f"config file {a.config!r}")  # where each key's value comes from
    opts = given(a)
    if a.train_lengths is not None:
        if {"train_min_len", "train_max_len"} & set(opts):
            raise UserError("give --train-lengths or --train-min-len/--train-max-len, not both")
        opts["train_min_len"], opts["train_max_len"] = parse_range(a.train_lengths)
    flat.update(opts)
    source.update(dict.fromkeys(opts, ""))  # an option's error names the option's value already
    for text in a.set:
        key, value = parse_override(text)
        flat[key] = value
        source[key] = f"--set {text}"
        if key == "plugins":  # typed on the command line: as --plugin
            load_plugins(value, "named in --set")
    if flat.get("init"):  # the construction fixes the model (statetrack construct --list)
        from statetrack.constructions import init_config, init_task

        if "task" not in flat:  # the construction's task, unless another is named (then checked)
            flat["task"] = init_task(flat["init"])
        # the construction defines the model: model fields given must agree with it
        model = init_config(
            flat["init"],
            flat.get("task"),
            **{k.split(".", 1)[1]: v for k, v in flat.items() if k.startswith("model.")},
        )
        flat = {**flat, **{f"model.{k}": v for k, v in model}}  # its fields as they are (layers parsed)
    elif "model.layers" not in flat:
        if "task" in flat:  # a mistyped task is said first: it is the mistake the user sees
            from statetrack.tasks import get_task

            get_task(str(flat["task"]))
        raise UserError(
            "train needs --layers SPEC (or --init construction:NAME, or model.layers in --config)"
        )
    if "device" in flat:  # the evaluation runs where the training ran, unless told otherwise
        flat.setdefault("eval.device", flat["device"])
    from statetrack.runs.name_checks import check_names

    check_names(flat)  # a mistyped task, mixer or option is said before torch loads (device 'auto' loads it)
    try:
        return run_configs(flat)
    except ConfigError as e:  # a bad value from a file or --set: said with where it came from
        raise e.within(source.get(e.key, "")) from None


def _tensorboard(a):
    if a.tensorboard:
        from statetrack.report.tensorboard import summary_writer

        summary_writer()  # a missing package is bad input: said before anything runs


def cmd_train(a):
    tcfg, ecfg = train_configs(a)
    from statetrack.runs.records import run_object, split_rows
    from statetrack.runs.runner import run
    from statetrack.runs.store import Store

    _tensorboard(a)
    with RunProgress(f"train {tcfg.model.layers} on {tcfg.task}", tcfg.steps, len(ecfg.lengths)) as prog:
        res = run(
            tcfg,
            ecfg,
            db=a.db,
            label=a.label,
            reuse=False,
            on_step=prog.validation,
            on_train_step=prog.step,
            on_length=prog.length,
            threads=a.threads or None,
        )
    if a.tensorboard:
        from statetrack.report.tensorboard import write_run

        write_run(a.tensorboard, a.db, res.run_id)
    if res.status != RunStatus.COMPLETE:
        print(terminal_text(f"run {res.run_id} failed: {res.summary.get('reason')}"), file=sys.stderr)
        return 1
    if a.json:
        emit_rows(
            with_lm(
                split_rows(run_object(Store(a.db).run(res.run_id)), res.metrics, res.more, ecfg.splits[0]),
                res.lm,
            )
        )
    else:
        lo, hi = tcfg.train_lengths
        title = (
            f"run {res.run_id}: {tcfg.model.layers} on {tcfg.task}, trained on "
            f"{lo if lo == hi else f'{lo}-{hi}'}{learned_text(tcfg, res.summary)} (checkpoint {res.checkpoint})"
        )
        print_lm_metrics(title, res.lm) if res.lm else print_splits(
            title, ecfg.splits[0], res.metrics, res.more, res.summary.get("horizons")
        )
    return 0


def learned_text(tcfg, summary: dict) -> str:
    """', learnt at step N' or ', not learnt in N steps' (a state task's in-distribution criterion)."""
    if "learned_at_step" not in summary or summary.get("corpus"):
        return ""
    at = summary["learned_at_step"]
    if at is None:
        return f", not learnt in {summary.get('steps_run', tcfg.steps):,} steps"
    return f", learnt at step {at:,}"


def print_splits(title: str, headline: Split, metrics, more: dict, horizons: dict | None) -> None:
    """The per-length table of each draw scored (the headline first), then the failure horizons."""
    for split, ms in {headline: metrics, **(more or {})}.items():
        print_metrics(title + ("" if split is Split.TEST else f" [{SPLIT_NAMES[split]}]"), ms)
    if horizons:
        print_horizons(horizons)
        _flag_draws({headline: metrics, **(more or {})}, horizons)


def _flag_draws(draws: dict, horizons: dict) -> None:
    """A line where a draw holds 90% to a length beyond the verified horizon: that length is not a claim."""
    from statetrack.training.evaluation import longest_generalized

    n = horizons.get("horizon")
    if n is None or "verified" not in horizons:
        return
    for split, ms in draws.items():
        longest = longest_generalized(ms)
        if longest is not None and longest >= n:
            say(
                f"note: the {SPLIT_NAMES[split]} holds 90% to {longest:,}, but a string of {n} symbols is "
                f"wrong: the model holds to {n - 1}, not to {longest:,}"
            )


def cmd_eval(a):
    """``statetrack eval``: ``runs.checkpoint_eval.evaluate_checkpoint``, printed."""
    a.checkpoint = checkpoint_path(a)  # a mistyped run label is said before torch loads
    from statetrack.config import EvalConfig, validated
    from statetrack.runs.checkpoint_eval import evaluate_checkpoint
    from statetrack.runs.records import checkpoint_run, split_rows

    fields = {k.removeprefix("eval."): v for k, v in given(a).items() if k.startswith("eval.")}
    ecfg = validated(EvalConfig, **fields)
    with RunProgress("evaluate", 0, len(ecfg.lengths)) as prog:
        r = evaluate_checkpoint(a.checkpoint, ecfg, a.task, a.max_params, on_length=prog.length)
    if a.json:
        run = checkpoint_run(r.config.model_dump(), r.extra, r.task.name, a.checkpoint)
        emit_rows(with_lm(split_rows(run, r.metrics, r.more, ecfg.splits[0]), r.lm))
    else:
        title = f"{a.checkpoint}: {r.config.model.layers} on {r.task.name}"
        if r.lm:
            print_lm_metrics(title, r.lm)
        else:
            print_splits(title, ecfg.splits[0], r.metrics, r.more, r.horizons)
    return 0


def cmd_rerun(a):
    from statetrack.runs.records import run_object, split_rows
    from statetrack.runs.runner import rerun
    from statetrack.runs.store import Store, versions

    store = Store(a.db, create=False)
    old = find_run(a.db, a.run_id)
    a.run_id = old.id
    if old.status != RunStatus.COMPLETE:
        raise UserError(f"run {a.run_id} is {old.status}; only complete runs can be rerun and compared")
    problem = store.checkpoint_problem(old)
    if problem:
        print(
            f"warning: {problem} (the rerun trains from the stored config, not from the file)",
            file=sys.stderr,
        )
    was, now = (old.versions or {}).get("cpu_capability"), versions()["cpu_capability"]
    if was and was != now:
        print(
            f"warning: run {a.run_id} trained on {was} kernels and this machine's are {now}: their rounding "
            "differs, so a run that rounding can move may not reproduce",
            file=sys.stderr,
        )
    cfg = old.config
    with RunProgress(
        f"rerun {a.run_id}: {old.model} on {old.task}", cfg["steps"], len(cfg["eval"]["lengths"])
    ) as prog:
        new, diffs = rerun(
            a.run_id,
            a.db,
            label=a.label,
            on_step=prog.validation,
            on_train_step=prog.step,
            on_length=prog.length,
        )
    if a.json:
        emit_rows(
            with_lm(
                split_rows(
                    run_object(Store(a.db).run(new.run_id)),
                    new.metrics,
                    new.more,
                    cfg["eval"].get("test_split", "test").split("+")[0],
                ),
                new.lm,
            )
        )
    else:
        verdict = "identical metrics" if not diffs else f"DIFFERENT metrics at lengths {sorted(diffs)}"
        label = Store(a.db, readonly=True).run(new.run_id).label
        say(f"run {a.run_id} rerun as run {new.run_id}{f' (label {label})' if label else ''}: {verdict}")
    return 0 if not diffs else 1


# long: an argparse table, one block per command, read top to bottom
def add_commands(sub) -> None:
    q = sub.add_parser(
        "train",
        help="train one model, evaluate it on the test lengths, record the run",
        description="Train one model, evaluate it at the test lengths and record the run. "
        "Every option of the configs (ModelConfig, TrainConfig, EvalConfig) has its default "
        "from statetrack.config; precedence: the configs' defaults < --config FILE < options "
        "< --set KEY=VALUE.",
    )
    g = q.add_argument_group("run")
    g.add_argument(
        "--config",
        default=None,
        metavar="FILE.yaml",
        help="a run's config as YAML: TrainConfig's fields, model: {...}, eval: {...}, plugins: [...] "
        "(the format of 'runs show ID --json' .config)",
    )
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any config field by its dotted key, e.g. --set model.d_model=32 --set lr=3e-3 "
        "--set eval.lengths=100,1000 (repeatable; applied last)",
    )
    g.add_argument(
        "--train-lengths",
        default=None,
        metavar="N|MIN-MAX",
        help="train_min_len and train_max_len in one option, e.g. 8 or 1-40 (default: 8, the config's)",
    )
    g.add_argument("--label", default=None, help="a name for the run in the database")
    g.add_argument(
        "--threads",
        type=parse_threads,
        default=1,
        metavar="N",
        help="torch threads on the CPU: 1 by default, as every run of a sweep (a small model's ops gain "
        "little from more, and on a shared machine each parallel op waits for a descheduled thread); 0: "
        "torch's default, one per core. Recorded with the run; 'rerun' uses the recorded count",
    )
    g.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also write the curves as TensorBoard event files under DIR (needs tensorboard)",
    )
    add_db(g)
    add_json(g)
    add_train_options(q)
    q.set_defaults(fn=cmd_train)

    q = sub.add_parser("eval", help="evaluate a checkpoint at each test length")
    add_checkpoint(q)
    q.add_argument("--task", default=None, help="task to evaluate on (default: the one it was trained on)")
    add_json(q)
    add_eval_options(q)
    add_max_params(q)
    q.set_defaults(fn=cmd_eval)

    q = sub.add_parser("rerun", help="rerun a stored run from its stored config and compare the numbers")
    q.add_argument("run_id", metavar="RUN", help=RUN_REF)
    q.add_argument(
        "--label",
        default=None,
        help="the new run's label (default: the old one's with -rerun-K, "
        "e.g. s3-rerun-2, so that a label names one run)",
    )
    add_db(q)
    add_json(q)
    q.set_defaults(fn=cmd_rerun)
