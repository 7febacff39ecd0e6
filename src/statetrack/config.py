# long: every typed config in one file: the command line, the study files and the stored runs derive from it
"""Typed configs: every component is built from one of these, and every run stores them whole."""

from __future__ import annotations

import functools
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from statetrack.errors import UserError, did_you_mean
from statetrack.spec import format_layers, parse_layers
from statetrack.untrusted import MAX_YAML_BYTES, load_yaml, read_text, yaml_problem

#: the largest model a checkpoint may declare, in parameters (1 GB of float32 weights). A fixed number
#: rather than one derived from free memory, so a file loads on every machine or on none; raise it with
#: ``--max-params`` (``max_params=``) for a bigger model (statetrack.training.checkpoint).
MAX_PARAMS = 250_000_000
#: the largest seed: a 64-bit signed integer (what SQLite stores and torch.manual_seed takes)
MAX_SEED = 2**63 - 1


#: where a run computes: cpu, cuda or auto, which is resolved when a config is built (``concrete_device``)
Device = Annotated[Literal["cpu", "cuda", "auto"], AfterValidator(lambda name: concrete_device(name))]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: fields added after run keys were in use: left out of a run's key while at their default, so the
    #: runs of older databases keep their keys (and are reused)
    LATE_FIELDS: ClassVar[tuple[str, ...]] = ()

    def key_dict(self) -> dict:
        """The config as it enters a run's key (``runner.run_key``)."""
        d = self.model_dump()
        for k in self.LATE_FIELDS:
            if d[k] == type(self).model_fields[k].get_default(call_default_factory=True):
                del d[k]
        return d


class Supervision(StrEnum):
    """Which positions the training loss reads. Validation and evaluation always score the task's own
    positions (``Task.scoring``): supervision changes the training signal, never the measurement."""

    #: the positions the task scores (e.g. only the final answer of modular arithmetic)
    TASK = "task"
    #: every position, each labelled with the answer for the prefix read so far; only for tasks whose
    #: targets are prefix labels (``Task.prefix_labels``)
    EVERY = "every"


class Split(StrEnum):
    """A draw of a task's sequences (``statetrack.tasks.draws``). Its value is the text that configs,
    study files, the command line and the database hold; the order is part of each draw's seed
    (``draws.test_rng``), so a new draw goes last."""

    #: the training draw (``Task.sample_batch``)
    TRAIN = "train"
    #: the task's test draw (balanced final labels where the training draw lets a constant answer score well)
    TEST = "test"
    #: the long-range draw of a regular task (the last half of each string leaves every label possible)
    LONG = "long"


class ModelConfig(_Config):
    """embedding -> blocks (norm, mixer, residual, optional MLP) -> norm -> head."""

    layers: str = Field(
        description="layer spec: mixer names separated by commas, options in parentheses, "
        "repeats with '*', e.g. 'mamba,s4d' or 'negmamba(conv=0)*2'"
    )
    d_model: int = Field(8, ge=1, le=4096, description="embedding / residual width")
    d_state: int = Field(16, ge=1, le=4096, description="state size per channel (hidden size for RNNs)")
    mlp: bool = Field(False, description="add an MLP sub-block after each mixer")
    norm: Literal["rmsnorm", "layernorm", "none"] = Field(
        "rmsnorm", description="normalisation before each sub-block and the head"
    )

    @field_validator("layers")
    @classmethod
    def _parse(cls, v):
        return format_layers(parse_layers(v))


class TrainConfig(_Config):
    """One training run: task, model, optimiser, schedule, lengths, validation, seed."""

    task: str = Field(
        "parity", description="task string, e.g. parity, group:S3, modcount:3 (statetrack tasks)"
    )
    model: ModelConfig
    train_min_len: int = Field(8, ge=1, description="shortest training sequence")
    train_max_len: int = Field(
        8, ge=1, description="longest training sequence (each step draws a length uniformly from the range)"
    )
    steps: int = Field(2000, ge=1, description="optimiser steps")
    batch_size: int = Field(64, ge=1, description="sequences per step")
    lr: float = Field(1e-2, gt=0, description="peak learning rate of AdamW")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    warmup_frac: float = Field(
        0.1, ge=0, le=1, description="fraction of the steps in linear warm-up, then cosine decay"
    )
    clip: float = Field(1.0, gt=0, description="gradient norm clip")
    restart_steps: int | None = Field(
        None,
        ge=1,
        description="cosine with warm restarts (torch's CosineAnnealingWarmRestarts T_0): the first cycle's "
        "steps after the warm-up, each later cycle restart_mult times longer; none: one cosine over the steps",
    )
    restart_mult: int = Field(
        2, ge=1, description="with restart_steps: each cycle's length over the last (T_mult)"
    )
    lr_min: float = Field(0.0, ge=0, description="the learning rate the cosine decays to (eta_min)")
    no_decay: list[str] = Field(
        default_factory=list,
        description="parameters AdamW's weight decay skips: those whose name ends with one of these "
        "(e.g. A_log, D, embed.weight)",
    )
    eval_every: int = Field(50, ge=1, description="steps between validations")
    patience: int = Field(20, ge=1, description="validations without improvement before early stop")
    val_sequences: int = Field(512, ge=1, description="validation sequences (fixed, in-distribution lengths)")
    seed: int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="seed of the initialisation, the training data and the validation set",
    )
    device: Device = Field(
        "auto", validate_default=True, description="cpu, cuda, or auto (cuda where present); stored resolved"
    )
    precision: Literal["float32", "bfloat16"] = Field(
        "float32", description="CUDA only: 'bfloat16' runs the forward pass under bf16 autocast"
    )
    cuda_graphs: bool = Field(
        True, description="CUDA only: capture each training length's step as a CUDA graph and replay it"
    )
    init: str | None = Field(
        None,
        description="'construction:NAME' to start from a construction "
        "(statetrack construct --list); the model is the "
        "construction's, and so is the task on the command line "
        "unless --task names it",
    )
    init_noise: float = Field(0.0, ge=0, description="with init: add N(0, sigma^2) to every parameter")
    supervision: Supervision = Field(
        Supervision.TASK,
        description="positions the training loss reads: 'task' (those the task scores) or "
        "'every' (each prefix's answer, for tasks that define one; validation and "
        "tests still score the task's own positions)",
    )
    train_split: Split = Field(
        Split.TRAIN,
        description="the draw of the training and validation strings: 'train' (the task's training "
        "draw), 'test' (its test draw: balanced final labels) or 'long' (the long-range draw of a "
        "regular task: the last half of each string leaves every label possible); at a length where "
        "that draw has no strings (e.g. length 1 for 'long'), the training draw",
    )
    curriculum_start: int | None = Field(
        None,
        ge=1,
        description="length curriculum: the longest training length starts here and rises in "
        "equal stages (curriculum_stages) to train_max_len; none: the whole range from "
        "the first step",
    )
    curriculum_stages: int = Field(
        4, ge=2, description="stages of the length curriculum (equal shares of the steps)"
    )
    learned_accuracy: float = Field(
        0.99,
        gt=0,
        le=1,
        description="a run has learnt the task once its in-distribution validation accuracy "
        "is at least this for learned_validations validations in a row",
    )
    learned_validations: int = Field(
        3, ge=1, description="validations in a row at learned_accuracy that count as learnt"
    )
    stop_when_learned: bool = Field(
        False,
        description="end training once the task is learnt (steps is then "
        "a budget); the test lengths are scored as always",
    )

    LATE_FIELDS: ClassVar[tuple[str, ...]] = (
        "supervision",
        "train_split",
        "curriculum_start",
        "curriculum_stages",
        "learned_accuracy",
        "learned_validations",
        "stop_when_learned",
        "restart_steps",
        "restart_mult",
        "lr_min",
        "no_decay",
    )

    @model_validator(mode="after")
    def _lengths(self):
        if self.train_min_len > self.train_max_len:
            raise ValueError(f"train_min_len {self.train_min_len} > train_max_len {self.train_max_len}")
        if (
            self.curriculum_start is not None
            and not self.train_min_len <= self.curriculum_start <= self.train_max_len
        ):
            raise ValueError(
                f"curriculum_start {self.curriculum_start} is outside the training lengths "
                f"{self.train_min_len}-{self.train_max_len}"
            )
        return self

    def max_length_at(self, step: int) -> int:
        """The longest training length drawn at optimiser step ``step`` (1-based): train_max_len, or under
        the length curriculum the stage's: curriculum_start in the first of curriculum_stages equal shares
        of the steps, train_max_len in the last, evenly spaced between."""
        if self.curriculum_start is None:
            return self.train_max_len
        n = self.curriculum_stages
        stage = min(n - 1, (step - 1) * n // self.steps)
        return self.curriculum_start + round((self.train_max_len - self.curriculum_start) * stage / (n - 1))

    @property
    def train_lengths(self) -> tuple[int, int]:
        return (self.train_min_len, self.train_max_len)


class EvalConfig(_Config):
    """Length-generalization evaluation: a grid of test lengths, a batch of fresh sequences each."""

    lengths: list[int] = Field(default_factory=lambda: default_lengths(), description="test lengths")
    batch_size: int = Field(128, ge=1, description="fresh sequences per test length")
    chunk: int = Field(1024, ge=1, description="time steps per forward call; memory is flat in length")
    seed: int = Field(
        12345,
        ge=0,
        le=MAX_SEED,
        description="seed of the test sequences (combined with the split and the length: "
        "each length's test set is its own stream)",
    )
    doublings: int = Field(
        4,
        ge=0,
        le=8,
        description="a length whose accuracy interval contains 90% is scored again "
        "with twice the sequences, at most this many times (then marked "
        "undecided)",
    )
    device: Device = Field(
        "auto", validate_default=True, description="cpu, cuda, or auto (cuda where present); stored resolved"
    )
    memory_mb: int = Field(
        2048,
        ge=1,
        description="chunks shrink so that no layer's activations for one chunk exceed this many MiB",
    )
    tokens: int | None = Field(
        None,
        ge=1,
        description="language models: test tokens scored at each length "
        "(windows = tokens / length); default batch_size windows",
    )
    test_split: Literal["test", "long", "test+long"] = Field(
        "test",
        description="the draws scored at every length: 'test' (the task's test draw), 'long' (the "
        "long-range draw of a regular task: the last half of each string leaves both labels "
        "possible), or 'test+long' (both; the first is the run's headline)",
    )
    horizons: bool = Field(
        False,
        description="also measure the failure horizon on each witness family of a "
        "regular task, up to the longest test length",
    )
    windows: Literal["random", "tile"] = Field(
        "random",
        description="language models: test windows at seeded random offsets ('random', tokens per "
        "length), or laid end to end over the whole test split ('tile': every test token "
        "scored once, the bytes the compressor baselines are measured on)",
    )

    LATE_FIELDS: ClassVar[tuple[str, ...]] = ("tokens", "test_split", "horizons", "windows")

    @property
    def splits(self) -> list[Split]:
        """The draws scored, the headline first: [TEST], [LONG] or [TEST, LONG]."""
        return [Split(s) for s in self.test_split.split("+")]

    @field_validator("lengths")
    @classmethod
    def _positive(cls, v):
        if not v:
            raise ValueError("no test lengths given")
        if any(n < 1 for n in v):
            raise ValueError(f"test lengths must be positive, got {[n for n in v if n < 1]}")
        return sorted(set(v))


def concrete_device(name: str) -> str:
    """'auto' -> 'cuda' where a CUDA device is present, else 'cpu'; other names unchanged. Configs store
    the device a run actually used, so a run's key says where its numbers come from."""
    if name != "auto":
        return name
    import torch  # heavy: configs are read at start-up; only a device check needs torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_lengths(lo: int = 16, hi: int = 10_000) -> list[int]:
    """Roughly log-spaced round lengths from lo to hi: 16, 32, ..., 512, 1000, 2000, 5000, 10000."""
    grid = [2**k for k in range(4, 10)] + [m * 10**e for e in range(3, 7) for m in (1, 2, 5)]
    return sorted({n for n in grid if lo <= n <= hi} | {hi})


class ConfigError(UserError):
    """A config field with a bad value; ``key``: its dotted key (``steps``, ``model.d_model``), '' when the
    error is not one field's."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key

    def within(self, where: str, prefix: str = "") -> ConfigError:
        """The same error, said of ``where`` (a file, an option) and with its key under ``prefix``."""
        key = prefix + self.key if self.key else ""
        text = str(self)
        if prefix and self.key:
            text = text.replace(f"bad {self.key}:", f"bad {key}:", 1)
        return ConfigError(f"{where}: {text}" if where else text, key)


def validated(cls, **kwargs):
    """Build a config, turning pydantic's multi-line errors into one ``ConfigError`` line."""
    try:
        return cls(**kwargs)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", str(e)).removeprefix("Value error, ")
        if isinstance(err.get("ctx", {}).get("error"), UserError):
            raise err["ctx"]["error"] from None
        raise ConfigError(f"bad {where or cls.__name__}: {msg} (got {err.get('input')!r})", where) from None


# -- a run's config as one mapping: config files, --set overrides, stored runs -----------------------
#: The mapping holds TrainConfig's fields at the top level, ModelConfig's under ``model``, EvalConfig's
#: under ``eval``, and optionally ``plugins`` (the modules that register its task or mixers, which must be
#: loaded: a file names them, never imports them; statetrack.plugins). It is the
#: format of ``statetrack train --config FILE.yaml`` and of a stored run's ``config``.
SECTIONS: dict[str, type[BaseModel]] = {"model": ModelConfig, "eval": EvalConfig}


def run_config_keys() -> dict:
    """Every dotted key of a run's config -> its pydantic field (``lr``, ``model.d_model``, ``eval.lengths``)."""
    keys = {}
    for name, f in TrainConfig.model_fields.items():
        if name in SECTIONS:
            keys.update({f"{name}.{k}": v for k, v in SECTIONS[name].model_fields.items()})
        else:
            keys[name] = f
    keys.update({f"eval.{k}": v for k, v in EvalConfig.model_fields.items()})
    return keys


def check_key(key: str, where: str) -> str:
    """The dotted key with '-' read as '_'; a UserError naming the allowed keys if it is not one."""
    norm = key.strip().replace("-", "_")
    if norm != "plugins" and norm not in run_config_keys():
        keys = ["plugins", *run_config_keys()]
        raise UserError(f"{where}: unknown key {key!r}{did_you_mean(norm, keys)}; allowed: {', '.join(keys)}")
    return norm


def flatten(data: dict, where: str) -> dict:
    """``{"lr": 0.01, "model": {"d_model": 8}}`` -> ``{"lr": 0.01, "model.d_model": 8}``, the keys and the type
    of each value checked (``check_value``)."""
    if not isinstance(data, dict):
        raise UserError(f"{where} must hold a mapping of config keys, got {type(data).__name__}")
    out = {}
    for k, v in data.items():
        if k in SECTIONS and isinstance(v, dict):
            out.update({check_key(f"{k}.{kk}", where): vv for kk, vv in v.items()})
        elif k in SECTIONS:  # a known key that holds the fields of its config
            first = next(iter(SECTIONS[k].model_fields))
            hint = f" (did you mean '{k}: {{{first}: {v}}}'?)" if k == "model" and isinstance(v, str) else ""
            raise UserError(
                f"{where}: key {k!r} must be a mapping of {SECTIONS[k].__name__}'s fields, e.g. "
                f"'{k}: {{{first}: ...}}', got {type(v).__name__} {v!r}{hint}; or give one field as "
                f"'{k}.{first}'"
            )
        else:
            out[check_key(str(k), where)] = v
    return {k: check_value(k, v, where) for k, v in out.items()}


def type_name(annotation: object) -> str:
    """A field's type as a reader writes it: ``int``, ``int | None``, ``list[int]``, ``one of 'cpu', 'cuda'``."""
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return "one of " + ", ".join(repr(str(m)) for m in annotation)
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


@functools.cache
def _adapter(key: str) -> TypeAdapter:
    f = run_config_keys()[key]
    field_type: Any = Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation
    return TypeAdapter(field_type)


def check_value(key: str, value: object, where: str) -> object:
    """``value`` converted by pydantic to the type of the config field ``key`` (a dotted key of
    ``run_config_keys``), within the field's bounds; a UserError naming ``where``, the key and the expected
    type if it is not one. ``plugins`` (module names) passes as given; the checks across fields (and the
    fields' own validators) run when the whole config is built."""
    if key == "plugins":
        return value
    try:
        return _adapter(key).validate_python(value)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err.get("msg", str(e)).removeprefix("Value error, ")
        ann = run_config_keys()[key].annotation
        choices = [
            str(c)
            for c in (
                get_args(ann)
                if get_origin(ann) is Literal
                else ann
                if isinstance(ann, type) and issubclass(ann, StrEnum)
                else ()
            )
        ]
        hint = did_you_mean(str(value), choices) if choices else ""
        raise UserError(
            f"{where}: key {key!r} expects {type_name(ann)}: {msg} (got {value!r}){hint}"
        ) from None


def parse_override(text: str) -> tuple[str, object]:
    """``"model.d_model=32"`` -> ``("model.d_model", 32)``: the key checked, the value converted to the
    field's type (``check_value``); ``null`` (or ``none``, ``~`` or nothing) is None wherever the field is
    optional; a list is comma-separated, with or without brackets."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise UserError(f"bad --set {text!r}; give KEY=VALUE, e.g. model.d_model=32 or lr=3e-3")
    key = check_key(key, "--set")
    raw = raw.strip()
    if key == "plugins":
        return key, [x.strip() for x in raw.split(",") if x.strip()]
    ann = run_config_keys()[key].annotation
    value: object = raw
    if type(None) in get_args(ann) and raw.lower() in ("", "null", "none", "~"):
        value = None
    elif get_origin(ann) is list:
        value = [x.strip() for x in raw.strip("[]").split(",") if x.strip()]
    return key, check_value(key, value, "--set")


def load_run_config(path: str | os.PathLike) -> dict:
    """A run's config from a YAML (or JSON) file, flattened to dotted keys and checked."""
    p = Path(path)
    if not p.is_file():
        try:  # the config files beside it, for a did-you-mean
            near = [
                q.name
                for q in (p.parent if str(p.parent) else Path(".")).iterdir()
                if q.suffix.lower() in (".yaml", ".yml", ".json") and q.is_file()
            ]
        except OSError:
            near = []
        hint = did_you_mean(p.name, near)
        raise UserError(
            f"config file {str(p)!r} not found{hint}"
            + (
                f"; config files in {str(p.parent)!r}: {', '.join(sorted(near)[:10])}"
                + (f" and {len(near) - 10} more" if len(near) > 10 else "")
                if near
                else ""
            )
        )
    what = f"config file {str(p)!r}"
    try:
        data = load_yaml(read_text(p, what, MAX_YAML_BYTES), what)
    except yaml.YAMLError as e:
        raise UserError(f"config file {str(p)!r} is not valid YAML: {yaml_problem(e)}") from None
    return flatten(data or {}, f"config file {str(p)!r}")


def run_configs(flat: dict) -> tuple[TrainConfig, EvalConfig]:
    """(TrainConfig, EvalConfig) from a flattened run config (``plugins`` is not read here)."""
    nested: dict = {"model": {}, "eval": {}}
    for k, v in flat.items():
        section, dot, field = k.partition(".")
        if dot:
            nested[section][field] = v
        elif k != "plugins":
            nested[k] = v
    try:
        ecfg = validated(EvalConfig, **nested.pop("eval"))
    except ConfigError as e:  # its key as the run's config names it
        raise e.within("", "eval.") from None
    return validated(TrainConfig, **nested), ecfg
