# long: one run's whole life (checks, training, evaluation, checkpoint, record, rerun) in the order it happens
"""One run, end to end: train, evaluate on the test lengths, save the best checkpoint, record it all.

``run(train_cfg, eval_cfg, db=...)`` is what ``statetrack train`` and every study call. Bad input
(task, model, lengths, device, init, a database folder that cannot be written) is checked before the
database is touched: a command that fails before it trains writes nothing. A run that fails is
recorded ``failed`` with its reason, one stopped by Ctrl-C or SIGTERM ``interrupted``.

The checkpoint is a new file of the run's own (``Store.checkpoint_name``), never one that exists; its
sha256 is stored in the run's row. If it cannot be written (a full disk), the run keeps its metrics
and is recorded complete with no checkpoint (the error says why): the numbers cost the training, the
weights can be made again by ``rerun``. If the final database write fails instead, the checkpoint
just written is removed (it would belong to no run) and the row is ended ``failed`` where the database
still takes that one small write.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import torch

from statetrack.config import EvalConfig, Split, Supervision, TrainConfig, flatten, run_configs
from statetrack.errors import UserError
from statetrack.files import inside
from statetrack.layers import ORIGIN as MIXER_ORIGIN
from statetrack.lm.metrics import LMMetrics
from statetrack.plugins import require
from statetrack.runs import signals
from statetrack.runs.claims import owner as this_process
from statetrack.runs.store import DEFAULT_DB, Damaged, RunStatus, Store, warn_damaged
from statetrack.spec import parse_layers
from statetrack.tasks import get_task
from statetrack.tasks.base import CorpusTask, Scoring
from statetrack.tasks.draws import NOT_REGULAR, REGULAR
from statetrack.tasks.families import check_pair_states
from statetrack.tasks.registry import ORIGIN as TASK_ORIGIN
from statetrack.training import memory
from statetrack.training.checkpoint import declared_model, declared_params, save_run_checkpoint
from statetrack.training.device import resolve_device
from statetrack.training.evaluation import (
    LengthMetrics,
    check_eval_memory,
    evaluate_more,
    evaluate_run,
    longest_generalized,
)
from statetrack.training.loop import TrainingDiverged, train
from statetrack.training.memory import gib
from statetrack.untrusted import label_problem


@dataclass
class RunResult:
    run_id: int
    status: str
    metrics: list[LengthMetrics]
    summary: dict
    checkpoint: str | None
    reused: bool = False
    lm: list = field(default_factory=list)  # LMMetrics per context length (language models only)
    more: dict = field(default_factory=dict)  # metrics on the other draws scored: split -> LengthMetrics

    def split(self, name: Split, headline: Split = Split.TEST) -> list[LengthMetrics]:
        """The metrics on one draw: the headline ``metrics`` when ``name`` is the run's headline draw
        (``headline``: the first of its ``test_split``), else those stored beside them (or [])."""
        return self.metrics if name == headline else self.more.get(name, [])


def run_key(train_cfg: TrainConfig, eval_cfg: EvalConfig, study: str | None, label: str | None) -> str:
    """Identity of a run: same key = same numbers, so a complete run with this key can be reused. The
    plugin modules that provide its task and mixers are part of it (when it has any), so a run of one
    plugin's mixer is never reused for another plugin's mixer of the same name."""
    parts: dict[str, object] = {
        "train": train_cfg.key_dict(),
        "eval": eval_cfg.key_dict(),
        "study": study,
        "label": label,
    }
    plugins = required_plugins(train_cfg)
    if plugins:  # runs of statetrack's own tasks and mixers keep the keys they always had
        parts["plugins"] = plugins
    blob = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def complete_result(store: Store, key: str) -> RunResult | None:
    """The complete run with this key (the latest if there are several), as a reused RunResult. A run
    whose rows are damaged (``store.Damaged``) is left out with a warning, as if it had not run."""
    done = store.runs(key=key, status=RunStatus.COMPLETE)
    if not done:
        return None
    r = done[-1]
    try:
        ms = [LengthMetrics.from_row(m) for m in store.metrics(r.id)]
        lm = [LMMetrics.from_row(m) for m in store.lm_metrics(r.id)]
        more = {s: [LengthMetrics.from_row(m) for m in rows] for s, rows in store.split_metrics(r.id).items()}
    except Damaged as e:
        warn_damaged(store.path, e)
        return None
    return RunResult(
        r.id, RunStatus.COMPLETE, ms, r.summary or {}, r.checkpoint, reused=True, lm=lm, more=more
    )


def memory_needed(cfg: TrainConfig, task) -> tuple[int, str]:
    """(bytes, what they are) a training run of ``cfg`` holds at least, from its model and batch, before
    anything is allocated: float32 weights, gradients and AdamW's two moments (16 bytes per parameter,
    counted by ``declared_params``), and the activations a step keeps for its backward pass, batch x longest
    training length x (four vectors of width d_model per block, the block's input, normed input, mixer
    output and sum, and the embedding, the logits and their gradient). A lower bound: each mixer keeps more
    of its own (the peak of two training steps measured at width 128, batch 64 x length 64: 5 to 21 times
    the estimate for rnn, lstm, mamba, mamba2, s4d and transformer; rnn*4 at width 512, batch 256: 1.1
    times), so a run refused on it cannot fit, and one let through may still run out (it then ends in one
    line: :func:`out_of_memory`)."""
    params = declared_params(cfg.model, task)
    n_blocks = len(parse_layers(cfg.model.layers))
    d = cfg.model.d_model
    per_token = 4 * (4 * d * n_blocks + 2 * d + 3 * task.num_classes)
    tokens = cfg.batch_size * cfg.train_max_len
    weights, acts = 16 * params, tokens * per_token
    return weights + acts, (
        f"{gib(weights)} for the weights, gradients and optimiser state of {params:,} parameters, "
        f"{gib(acts)} of activations for batch {cfg.batch_size:,} x length {cfg.train_max_len:,}"
    )


def check_memory(cfg: TrainConfig, task) -> None:
    """A UserError when the memory the run needs at least (:func:`memory_needed`) exceeds what is
    available where it trains (``memory.available``; a GPU's free memory on cuda): refused before it
    starts."""
    need, what = memory_needed(cfg, task)
    device = resolve_device(cfg.device)
    if device.type == "cuda":
        free, where = torch.cuda.mem_get_info(device)[0], "free on the GPU"
    else:
        free, where = memory.available()
    if need > free:
        raise UserError(
            f"this run needs at least {gib(need)} ({what}) and {gib(free)} is {where}; lower --batch-size, "
            "--train-max-len, --d-model or the layers"
        )


def check_run(train_cfg: TrainConfig, eval_cfg: EvalConfig):
    """Everything that can be wrong with the input, before anything is written: the task, the model, the
    devices, the lengths, and whether the run fits in memory. Returns the task."""
    task = get_task(train_cfg.task)
    # unknown mixer / bad option -> UserError, without allocating weights
    meta = declared_model(train_cfg.model, task)
    resolve_device(train_cfg.device)  # 'cuda' without a GPU -> UserError, before the database exists
    on_cpu = resolve_device(eval_cfg.device).type == "cpu"
    check_eval_memory(meta, eval_cfg, memory.available() if on_cpu else None)  # before it trains
    if (
        train_cfg.supervision == Supervision.EVERY
        and task.scoring != Scoring.EVERY
        and not task.prefix_labels
    ):
        raise UserError(
            f"supervision 'every' needs a task whose every position is labelled with its prefix's "
            f"answer; {task.name} labels only its final position (allowed: supervision 'task')"
        )
    if train_cfg.train_split is not Split.TRAIN and isinstance(task, CorpusTask):
        raise UserError(
            f"train_split {train_cfg.train_split.value!r} is for generated tasks; {task.name} is a corpus, "
            "whose training text is its training split (allowed: train_split 'train')"
        )
    if train_cfg.train_split is Split.LONG and task.automaton() is None:
        raise UserError(
            f"train_split 'long' needs a regular task; {task.name} has {NOT_REGULAR} "
            f"(allowed: train_split 'train' or 'test'; regular tasks: {REGULAR})"
        )
    if eval_cfg.horizons and (auto := task.automaton()) is not None:
        check_pair_states(
            auto.minimized()[0], task.name
        )  # a task too large for its horizons: before training
    check_memory(train_cfg, task)
    short = [n for n in eval_cfg.lengths if n < train_cfg.train_min_len]
    if short:
        raise UserError(
            f"test length {short[0]} is shorter than the training range "
            f"{train_cfg.train_min_len}-{train_cfg.train_max_len}; test lengths must be >= "
            f"{train_cfg.train_min_len}"
        )
    return task


def required_plugins(cfg: TrainConfig) -> list[str]:
    """The plugin modules that registered the run's task family and mixers (statetrack.plugins)."""
    mods = [TASK_ORIGIN.get(cfg.task.partition(":")[0].strip())]
    mods += [MIXER_ORIGIN.get(s.name) for s in parse_layers(cfg.model.layers)]
    return list(dict.fromkeys(m for m in mods if m))


def stored_config(train_cfg: TrainConfig, eval_cfg: EvalConfig) -> dict:
    """A run's config as the database stores it (the format of ``statetrack train --config``): the
    TrainConfig's fields, ``eval``, and ``plugins`` when the run needs any."""
    plugins = required_plugins(train_cfg)
    return {
        **train_cfg.model_dump(),
        "eval": eval_cfg.model_dump(),
        **({"plugins": plugins} if plugins else {}),
    }


def initial_model(cfg: TrainConfig):
    """The model training starts from: the construction named by ``cfg.init`` (with its noise), or None
    for a fresh model built by ``train``."""
    if not cfg.init:
        return None
    from statetrack.constructions import init_model  # loaded only when a run names a construction

    return init_model(cfg)


def _summary(res, task, metrics: list, more: dict, horizons, c0: float) -> dict:
    """A completed run's summary: how training went, the longest length it generalises to (per draw),
    its cost in time and parameters, its failure horizons and an LM's corpus."""
    summary = {
        "best_step": res.best_step,
        "best_val_accuracy": res.best_val_accuracy,
        "best_val_loss": res.best_val_loss,
        "train_accuracy": res.train_accuracy,
        "steps_run": res.steps_run,
        "stopped_early": res.stopped_early,
        "learned_at_step": res.learned_at_step,
        "stop_reason": res.stop_reason.value,
        "train_time": res.wall_time,
        "longest_90": longest_generalized(metrics),
        "cpu_time": time.process_time() - c0,
        "load_average": _load_average(),
        "params": sum(p.numel() for p in res.model.parameters()),
        **{f"longest_90_{s}": longest_generalized(ms) for s, ms in more.items()},
        **({"horizons": horizons} if horizons else {}),
    }
    if isinstance(task, CorpusTask):
        summary["corpus"] = task.provenance()
    return summary


def _checkpoint_target(
    store: Store,
    run_id: int,
    run_uuid: str,
    checkpoint_dir: str | Path | None,
    study: str | None,
    label: str | None,
    config: dict,
) -> tuple[Path, dict]:
    """Where a run's checkpoint goes (beside the database unless ``checkpoint_dir``) and the metadata that
    names its run and database."""
    path = (
        Path(checkpoint_dir) / f"run{run_id}-{run_uuid[:8]}.safetensors"
        if checkpoint_dir
        else store.checkpoint_name(run_id, run_uuid)
    )
    extra = {
        "run_id": run_id,
        "run_uuid": run_uuid,
        "db": str(store.path.absolute()),
        "db_name": store.path.name,
        "study": study,
        "label": label,
        **({"plugins": config["plugins"]} if "plugins" in config else {}),
    }
    return path, extra


# long: one run's lifecycle read top to bottom: checks, its row, training with every failure recorded, the record
def run(
    train_cfg: TrainConfig,
    eval_cfg: EvalConfig,
    db: str | Path = DEFAULT_DB,
    study: str | None = None,
    label: str | None = None,
    checkpoint_dir: str | Path | None = None,
    reuse: bool = True,
    on_step=None,
    on_length=None,
    threads: int | None = None,
    on_train_step=None,
    owner: str | None = None,
) -> RunResult:
    """Train, evaluate, checkpoint and record one run. ``on_step(step, info)`` after each validation,
    ``on_train_step(step)`` after each optimiser step, ``on_length(metrics)`` after each test
    length (progress); ``reuse``: return the complete run with the same key instead of training.
    ``owner``: the sweep whose claim this run runs under (``statetrack.runs.claims``; default this process)."""
    task = check_run(train_cfg, eval_cfg)
    if label is not None and (why := label_problem(label)):
        raise UserError(f"bad --label: {why}")
    start = initial_model(train_cfg)  # a bad --init fails here, before anything is written
    store = Store(db)
    key = run_key(train_cfg, eval_cfg, study, label)
    if reuse and (done := complete_result(store, key)):
        return done
    if threads:
        torch.set_num_threads(threads)
    if resolve_device(train_cfg.device).type == "cuda":
        with signals.deferred():
            # torch.optim's AdamW (the CUDA step's) makes its first step through a lazy `import
            # torch._dynamo` that C++ code runs: a signal raised inside that import would abort the process
            # instead of stopping the run, so the import runs here, where a signal waits until it is done
            # (seconds, once per process). The CPU step's AdamW imports no compiler (training.adamw).
            importlib.import_module("torch._dynamo")
    run_uuid = uuid.uuid4().hex
    config = stored_config(train_cfg, eval_cfg)
    run_id = store.start_run(
        config, study=study, label=label, key=key, uuid=run_uuid, owner=owner or this_process()
    )
    t0, c0 = time.monotonic(), time.process_time()
    try:
        res = train(
            train_cfg, task, model=start, on_step=on_step, on_train_step=on_train_step, progress=False
        )
        metrics, lm = evaluate_run(res.model, task, eval_cfg, on_length=on_length)
        more, horizons = evaluate_more(res.model, task, eval_cfg, metrics)
    except TrainingDiverged as e:
        summary = {"failed_step": e.step, "reason": str(e)}
        store.fail_run(run_id, str(e), time.monotonic() - t0, summary)
        return RunResult(run_id, RunStatus.FAILED, [], summary, None)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: recorded, then passed on
        store.interrupt_run(run_id, signals.describe(e), time.monotonic() - t0)
        raise
    except BaseException as e:  # recorded, then re-raised: crashes leave a trace
        store.fail_run(run_id, f"{type(e).__name__}: {e}", time.monotonic() - t0)
        if out_of_memory(e):  # beyond the estimate checked before: one line, not a traceback
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise UserError(
                f"run {run_id} ran out of memory ({first}); it is recorded failed; lower --batch-size, "
                "--train-max-len, --d-model or the layers"
            ) from None
        raise
    summary = _summary(res, task, metrics, more, horizons, c0)
    path, extra = _checkpoint_target(store, run_id, run_uuid, checkpoint_dir, study, label, config)
    return _record(
        store,
        run_id,
        res,
        metrics,
        lm,
        summary,
        t0,
        lambda: _inside(
            Path(checkpoint_dir) if checkpoint_dir else store.path.parent,
            lambda: save_run_checkpoint(res.model, train_cfg.model_dump(), path, extra),
        ),
        more,
    )


def _inside(root: Path, write):
    """``write()`` with every file confined to ``root`` (the database's folder, or the checkpoint folder
    chosen): a ``<db>.checkpoints`` that is a link elsewhere (a folder from others) is refused, not
    followed (``files.inside``)."""
    with inside(root):
        return write()


def _load_average() -> float | None:
    """The machine's 1-minute load average at the run's end (None where the system does not give one): beside
    a run's wall time, what says how much of it was waiting for a core."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _record(
    store: Store,
    run_id: int,
    res,
    metrics,
    lm,
    summary: dict,
    t0: float,
    write_checkpoint,
    more: dict | None = None,
) -> RunResult:
    """Write the checkpoint, then the results, as the module docstring says (which failure keeps what)."""
    ckpt = None
    curve = [p.as_dict() for p in res.curve]
    try:
        try:
            ckpt, sha = write_checkpoint()
        except UserError as e:  # no room for the weights: keep the numbers, say the file is missing
            summary = {**summary, "checkpoint_error": str(e)}
            store.finish_run(
                run_id,
                metrics,
                None,
                time.monotonic() - t0,
                summary,
                curve,
                lm_metrics=lm,
                split_metrics=more,
            )
            raise UserError(
                f"run {run_id} is recorded complete with its metrics but without a checkpoint: {e}"
            ) from None
        if not store.finish_run(
            run_id, metrics, str(ckpt), time.monotonic() - t0, summary, curve, sha, lm, more
        ):
            _remove(ckpt)  # another sweep took the run over meanwhile: its row is not ours to complete
            return RunResult(
                run_id, RunStatus.INTERRUPTED, [], {"reason": "the run was taken over by another sweep"}, None
            )
    except BaseException as e:
        if ckpt is not None and store_status(store, run_id) != RunStatus.COMPLETE:
            _remove(ckpt)
        if store_status(store, run_id) == RunStatus.RUNNING:
            try:
                if isinstance(e, KeyboardInterrupt):
                    store.interrupt_run(run_id, signals.describe(e), time.monotonic() - t0)
                else:
                    store.fail_run(run_id, f"the results could not be recorded: {e}", time.monotonic() - t0)
            except UserError:  # the database takes no write at all (a full disk): the row stays as it is
                pass
        raise
    return RunResult(run_id, RunStatus.COMPLETE, metrics, summary, str(ckpt), lm=lm, more=more or {})


def out_of_memory(e: BaseException) -> bool:
    """``e`` says an allocation failed (CPU or GPU), whichever way torch or Python words it."""
    if isinstance(e, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and any(
        w in text
        for w in ("out of memory", "can't allocate memory", "not enough memory", "cannot allocate memory")
    )


def store_status(store: Store, run_id: int) -> str | None:
    try:
        status: str = store.run(run_id).status
        return status
    except UserError:
        return None


def _remove(path) -> None:
    with contextlib.suppress(OSError):
        Path(path).unlink()


def rerun_label(store: Store, label: str | None) -> str | None:
    """A label of its own for a rerun of a run labelled ``label``: ``LABEL-rerun-K`` with the smallest
    K >= 2 that no run of the database has (``s3`` -> ``s3-rerun-2``; a rerun of ``s3-rerun-2`` ->
    ``s3-rerun-3``); None for an unlabelled run."""
    if not label:
        return None
    base = re.sub(r"-rerun-\d+$", "", label)
    taken = {r.label for r in store.runs() if r.label}
    k = 2
    while f"{base}-rerun-{k}" in taken:
        k += 1
    return f"{base}-rerun-{k}"


def rerun(
    run_id: int, db: str | Path = DEFAULT_DB, label: str | None = None, **progress
) -> tuple[RunResult, dict]:
    """Run a stored run again from its stored config alone; returns (new result, differences).

    The new run gets ``label``, or, by default, a label of its own (``rerun_label``: ``s3`` ->
    ``s3-rerun-2``), so that a label names one run. The plugin modules the run recorded must be imported
    already (a database names them, never imports them: ``plugins.require``); ``progress``: ``run``'s
    callbacks.

    ``differences`` maps each test length whose metrics differ to (old, new); empty when the rerun
    reproduces the stored numbers exactly.
    """
    store = Store(db, create=False)
    old = store.run(run_id)
    flat = flatten(old.config, f"run {run_id}'s config")
    require(flat.get("plugins", []), f"run {run_id} of {str(store.path)!r}")
    tcfg, ecfg = run_configs(flat)
    threads = (old.versions or {}).get("threads")  # reductions can depend on the thread count
    label = label or rerun_label(store, old.label)
    new = run(tcfg, ecfg, db=db, study=old.study, label=label, reuse=False, threads=threads, **progress)
    compared = ("accuracy", "token_accuracy", "sequence_accuracy")
    before = {m.length: {k: getattr(m, k) for k in compared} for m in store.metrics(run_id)}
    after = {m.length: {k: getattr(m, k) for k in compared} for m in new.metrics}
    for m in store.lm_metrics(run_id):  # a language model: its bits per byte too
        before.setdefault(m["length"], {})["bpb"] = m["bpb"]
    for m in new.lm:
        after.setdefault(m.length, {})["bpb"] = m.bpb
    diffs = {
        n: (before.get(n), after.get(n))
        for n in sorted(set(before) | set(after))
        if before.get(n) != after.get(n)
    }
    return new, diffs
