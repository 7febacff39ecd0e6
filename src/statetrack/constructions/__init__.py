"""Hand-set weights from the proofs: ordinary statetrack Models that solve a task at every length.

``build(name) -> Construction`` returns the model (a plain :class:`statetrack.model.Model`), the
TrainConfig that describes it (task + ModelConfig) and notes; ``save(name, path)`` writes the ordinary
checkpoint, which ``statetrack eval`` loads like any trained one. ``available()`` lists them all; a
name may take an argument after a colon (``modcount-s4d:5``, ``abelian-aussm:C2xC4``,
``sn-deltaproduct:4``, ``orth-deltaproduct:A5``, ``dfa-pdssm:tomita:3``). One module per mixer family
(``negmamba``, ``s4d``, ``aussm``, ``deltaproduct``, ``pdssm``, ...), mirroring ``statetrack.layers``; ``base``
holds the registry and the helpers.

Every construction reads the model the way the proofs do: a layer's state moves on a finite orbit,
and the head (no bias) is a linear score of the residual stream. The final RMSNorm only rescales the
residual vector by a positive number, so it never changes the argmax of a bias-free head; pre-norms
see the embeddings (constant per token) or residual vectors built to have the same norm in every state.

Precision notes (float32), measured by the tests at length 10,000:

* Negative Mamba, parity: A_bar = 2 exp(-Delta a) - 1. For bit 1, Delta a = 120: exp underflows to 0
  and A_bar = -1 exactly. For bit 0, Delta = softplus(-30) = 9.4e-14 > 0, so mathematically A_bar < 1,
  but exp(-9.4e-14) rounds to 1.0 in float32 (any Delta a < 2^-25 does), so A_bar = 1 exactly. The
  state is the affine orbit h -> -h + beta (bit 1) / h -> h (bit 0) from h = 0: exactly {0, beta}
  forever. In float64 A_bar(0) = 1 - 1.9e-13 and the orbit would decay by 1e-9 over 10^4 steps.
* S4D (P1, P2): |A_bar| = exp(-exp(-60)) = 1 in float32; the angle 2 pi/m is rounded once and its
  error accumulates linearly (about 1e-7 rad per step), far inside the margin pi/m at 10^4 steps.
"""

from __future__ import annotations

from pathlib import Path

import torch

from statetrack.config import ModelConfig, TrainConfig

# each family module registers its constructions on import
from statetrack.constructions import (  # noqa: F401  (registration)
    aussm,
    deltaproduct,
    gateddeltanet,
    gru,
    mamba3,
    negmamba,
    pdssm,
    s4d,
)
from statetrack.constructions.base import REGISTRY, Construction, register, sharpen_readout
from statetrack.errors import UserError, allowed, did_you_mean
from statetrack.files import inside
from statetrack.layers.properties import DECLARED as MIXERS  # the mixers of this build, by name
from statetrack.model import Model
from statetrack.spec import format_layers, parse_layers
from statetrack.tasks import get_task
from statetrack.training.checkpoint import save_checkpoint


def available() -> list[dict]:
    """One row per construction: name, basis, description, available (its mixers are registered)."""
    rows = []
    for name, (_, basis, desc, arg, mixers) in REGISTRY.items():
        rows.append(
            {
                "name": name + (f":{arg}" if arg else ""),
                "basis": basis,
                "description": desc,
                "available": all(m in MIXERS for m in mixers),
                "needs": ", ".join(m for m in mixers if m not in MIXERS),
            }
        )
    return rows


def build(name: str) -> Construction:
    """Build a construction by name (``NAME`` or ``NAME:ARG``)."""
    base, _, arg = name.partition(":")
    if base not in REGISTRY:
        raise allowed("construction", name, REGISTRY)
    fn, basis, desc, default_arg, mixers = REGISTRY[base]
    missing = [m for m in mixers if m not in MIXERS]
    if missing:
        raise UserError(
            f"construction {base!r} needs mixer(s) {', '.join(missing)}, not in this build; "
            f"allowed: {', '.join(r['name'] for r in available() if r['available'])}"
        )
    c = fn(arg or default_arg) if default_arg is not None else fn()
    c.name = base + (f":{arg or default_arg}" if default_arg is not None else "")
    c.basis = basis
    c.model.eval()
    c.notes["readout_scale"] = sharpen_readout(c.model, c.config.task)  # a fixed point of training
    return c


def save(name: str, path) -> Construction:
    """Build the construction ``name`` and write it as a checkpoint at ``path`` (a link there is refused,
    not written through)."""
    c = build(name)
    with inside(Path(path).absolute().parent):
        save_checkpoint(
            c.model,
            c.config.model_dump(),
            path,
            extra={
                "construction": c.name,
                "basis": c.basis,
                "label": f"construction:{c.name}",
                "notes": c.notes,
            },
        )
    return c


def _init_name(init: str | None) -> str:
    kind, _, name = (init or "").partition(":")
    if kind != "construction" or not name:
        raise UserError(
            f"bad --init {init!r}; allowed: construction:NAME with NAME from 'statetrack construct --list'"
        )
    return name


def init_task(init: str) -> str:
    """The task the construction named by ``init`` ('construction:NAME') solves (the default task of a
    run started from it)."""
    return build(_init_name(init)).config.task


def init_config(init: str, task: str | None = None, **given) -> ModelConfig:
    """The ModelConfig of the construction named by ``init`` ('construction:NAME'), checking the task.

    The construction defines the model: ``given`` model fields (``layers``, ``d_model``, ``d_state``,
    ``mlp``, ``norm``; None = not given) must agree with its values, else a UserError names the first
    that differs and the construction's value."""
    c = build(_init_name(init))
    if task is not None and get_task(task).name != get_task(c.config.task).name:
        raise UserError(
            f"construction {c.name!r} solves {c.config.task!r}, not {task!r}; allowed: --task {c.config.task}"
        )
    mine = c.config.model
    for field, value in given.items():
        if field not in ModelConfig.model_fields:
            raise UserError(
                f"unknown model field {field!r}{did_you_mean(field, ModelConfig.model_fields)}; "
                f"allowed: {', '.join(ModelConfig.model_fields)}"
            )
        if value is None:
            continue
        ours = getattr(mine, field)
        if field == "layers":
            value = format_layers(parse_layers(value))
        if value != ours:
            raise UserError(
                f"--init {init} defines the model: {field} {value!r} differs from the construction's "
                f"{ours!r}; omit it or give {ours!r}"
            )
    return mine


def init_model(cfg: TrainConfig) -> Model:
    """The construction's model with N(0, init_noise^2) added to every parameter (seeded by cfg.seed)."""
    c = build(_init_name(cfg.init))
    if cfg.model != c.config.model:
        raise UserError(
            f"--init {cfg.init}: the model config must be the construction's "
            f"({c.config.model.model_dump()}), got {cfg.model.model_dump()}"
        )
    if get_task(cfg.task).name != get_task(c.config.task).name:
        raise UserError(f"construction {c.name!r} solves {c.config.task!r}, not {cfg.task!r}")
    model = c.model
    if cfg.init_noise > 0:
        gen = torch.Generator().manual_seed(int(cfg.seed))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * cfg.init_noise)
    model.train()
    return model


__all__ = ["Construction", "REGISTRY", "available", "build", "init_config", "init_model", "register", "save"]
