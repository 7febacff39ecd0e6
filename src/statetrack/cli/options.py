"""Options derived from the typed configs (``statetrack.config``), the one home of every default and
description: ``--kebab-case`` names, the field's type and choices, help ending in the config's default.

A derived option's argparse default is SUPPRESS, so a command can tell an option given from one left at
its default; ``given(args)`` returns the ones given, by dotted config key (``lr``, ``model.d_model``).
"""

from __future__ import annotations

import argparse
import enum
import typing

from statetrack.cli.args import parse_lengths, show_default
from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.errors import UserError
from statetrack.spec import Layers, parse_layers


def _kind(ann) -> dict:
    """argparse keywords for a field's type: type, choices, action."""
    args = typing.get_args(ann)
    if type(None) in args and len(args) == 2:  # X | None: the option takes an X
        ann = next(a for a in args if a is not type(None))
    if ann is bool:
        return {"action": argparse.BooleanOptionalAction}
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return {"choices": [e.value for e in ann]}
    if typing.get_origin(ann) is typing.Literal:
        return {"choices": list(typing.get_args(ann))}
    if ann is Layers:  # parsed here, the edge: the config and every reader after it take the specs
        return {"type": _argtype(parse_layers), "metavar": "LAYERS"}
    if ann == list[int]:
        return {"type": _argtype(parse_lengths), "metavar": "N,N,..."}
    if ann == list[str]:
        return {"type": lambda text: [x.strip() for x in text.split(",") if x.strip()], "metavar": "NAME,..."}
    if ann in (int, float):
        return {"type": ann, "metavar": ann.__name__.upper()}
    return {"type": str}  # metavar: the field's name (add_fields)


def _argtype(fn):
    """A value parser whose UserError argparse reports with its message."""

    def parse(text):
        try:
            return fn(text)
        except UserError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = fn.__name__
    return parse


def add_fields(
    q, cls, prefix: str = "", names: dict[str, str | None] | None = None, helps: dict[str, str] | None = None
) -> None:
    """One option per field of ``cls`` (a pydantic config), under ``prefix`` in dotted keys.

    ``names``: field -> option name to use instead of its kebab-case (None: no option for it);
    ``helps``: field -> help text instead of the field's description."""
    names, helps = names or {}, helps or {}
    for name, f in cls.model_fields.items():
        flag = names.get(name, name.replace("_", "-"))
        if flag is None:
            continue
        key = prefix + name
        kind = _kind(f.annotation)
        if kind.get("type") is str:
            kind["metavar"] = name.upper()
        if f.is_required():
            default = "required"
        else:
            default = show_default(f.get_default(call_default_factory=True))
        text = helps.get(name, f.description or "").replace("%", "%%")
        q.add_argument(
            f"--{flag}", dest=key, default=argparse.SUPPRESS, help=f"{text} (default: {default})", **kind
        )


def add_train_options(q) -> None:
    """``train``: every field of TrainConfig, ModelConfig (unprefixed) and EvalConfig (as --test-lengths,
    --eval-batch, --eval-chunk, --eval-seed, --eval-memory-mb, --eval-tokens, --eval-windows; the evaluation runs on
    --device)."""
    g = q.add_argument_group("model (ModelConfig)")
    add_fields(g, ModelConfig, "model.")
    g = q.add_argument_group("training (TrainConfig)")
    add_fields(g, TrainConfig, names={"model": None})
    g = q.add_argument_group("evaluation (EvalConfig)")
    add_fields(
        g,
        EvalConfig,
        "eval.",
        names={
            "lengths": "test-lengths",
            "batch_size": "eval-batch",
            "chunk": "eval-chunk",
            "seed": "eval-seed",
            "device": None,
            "memory_mb": "eval-memory-mb",
            "tokens": "eval-tokens",
            "windows": "eval-windows",
        },
    )


def add_eval_options(q) -> None:
    """``eval``: every field of EvalConfig."""
    add_fields(q.add_argument_group("evaluation (EvalConfig)"), EvalConfig, "eval.")


def add_device(q, help: str | None = None) -> None:
    """--device, from TrainConfig's field (sweeps and reports)."""
    f = TrainConfig.model_fields["device"]
    q.add_argument(
        "--device", default=f.default, choices=list(typing.get_args(f.annotation)), help=help or f.description
    )


def given(a) -> dict:
    """The derived options given on the command line: dotted config key -> value."""
    return {k: v for k, v in vars(a).items() if "." in k or k in TrainConfig.model_fields}
