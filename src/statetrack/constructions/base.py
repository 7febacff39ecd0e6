"""What every construction shares: the registry, the result type and the weight-setting helpers.

A construction is a function registered with :func:`register` that returns a :class:`Construction`:
an ordinary :class:`statetrack.model.Model` with hand-set weights, the TrainConfig that describes it
(task + ModelConfig) and notes. The helpers build a model with every weight zero
(:func:`blank_model`), read what a layer sees (:func:`layer_input`) and set readouts
(:func:`spread_readout`, :func:`nearest_head`, :func:`nearest_point_head`) and embeddings
(:func:`token_embedding`), and scale a finished read-out to a large margin (:func:`sharpen_readout`,
applied to every construction by ``build``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from statetrack.config import ModelConfig, TrainConfig
from statetrack.model import Model, build_model
from statetrack.tasks import get_task

#: the minimum of silu, silu(SILU_ARGMIN) = -0.27846: the most negative value a silu feature takes
SILU_ARGMIN = -1.2784645


@dataclass
class Construction:
    name: str
    model: Model
    config: TrainConfig
    description: str
    basis: str
    notes: dict = field(default_factory=dict)


#: name -> (builder, basis, description, default argument or None, mixers it needs)
REGISTRY: dict[str, tuple[Callable, str, str, str | None, tuple[str, ...]]] = {}


def register(
    name: str, basis: str, description: str, default_arg: str | None = None, mixers: tuple[str, ...] = ()
):
    def deco(fn):
        REGISTRY[name] = (fn, basis, description, default_arg, mixers)
        return fn

    return deco


def blank_model(task: str, **mcfg) -> tuple[Model, TrainConfig]:
    """The model for ``task`` with ModelConfig(**mcfg), every weight 0 and every norm's gain 1."""
    cfg = TrainConfig(task=task, model=ModelConfig(**mcfg), init=None)
    torch.manual_seed(0)
    model = build_model(cfg.model, get_task(task))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for mod in model.modules():
            if isinstance(mod, torch.nn.RMSNorm | torch.nn.LayerNorm) and mod.weight is not None:
                mod.weight.fill_(1.0)
    return model, cfg


def layer_input(model: Model, block: int, x: torch.Tensor) -> torch.Tensor:
    """What block ``block``'s mixer sees for the residual vector x (after the block's pre-norm)."""
    with torch.no_grad():
        return model.block(block).norm(x)


def silu(v: float) -> float:
    """silu of a Python float."""
    return v / (1 + math.exp(-v))


def silu_inv(y: float) -> float:
    """The preimage of y under silu on the branch x >= SILU_ARGMIN (y >= -0.27846)."""
    lo, hi = SILU_ARGMIN, max(1.0, y + 2.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        if silu(mid) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def spread_readout(points_fn, size: int = 8, tries: int = 200, seed: int = 0):
    """Pick ``size`` readout coefficients in [0, 1) (random search, seeded) that maximise the smallest
    distance between the classes' readout values ``points_fn(coefficients)`` (numbers, or vectors of
    one length), relative to the largest distance between them."""
    g = torch.Generator().manual_seed(seed)
    best, best_gap = None, -1.0
    for _ in range(tries):
        cand = torch.rand(size, generator=g).tolist()
        pts = np.asarray(points_fn(cand), dtype=np.float64)
        pts = pts[:, None] if pts.ndim == 1 else pts
        dist = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
        off = dist[~np.eye(len(pts), dtype=bool)]
        gap = float(off.min() / off.max())
        if gap > best_gap:
            best, best_gap = cand, gap
    return best, best_gap


#: the smallest logit margin (right class over the best other) a construction's read-out is scaled to
MARGIN = 50.0


def sharpen_readout(model: Model, task: str, margin: float = MARGIN) -> float:
    """Scale the head (weight and bias) by a positive factor so that the smallest logit margin over the
    scored positions of a seeded sample of ``task`` (32 sequences at each of the lengths 1 to 64) is
    ``margin``; never scales down, and leaves a head that errs on the sample alone. Returns the factor.

    The proofs fix the read-out's direction, not its scale, and a scale that leaves margins of order 1
    makes the construction a point of large gradient (training then leaves it at once; docs/theory.md
    section 5). At margin 50 the float32 cross-entropy's gradient is about exp(-50) = 2e-22 per logit,
    far below Adam's epsilon (1e-8), so an optimiser step moves no weight measurably: the construction
    is a fixed point of training. The argmax, hence every accuracy, is unchanged."""
    t = get_task(task)
    rng = np.random.default_rng(0)
    worst = math.inf
    with torch.no_grad():
        for n in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64):
            b = t.sample_batch(rng, 32, n)
            logits, _ = model(torch.as_tensor(b.inputs))
            y = torch.as_tensor(b.targets).unsqueeze(-1)
            other = logits.scatter(-1, y, -math.inf).amax(-1)
            gap = (logits.gather(-1, y).squeeze(-1) - other)[torch.as_tensor(b.mask)]
            if gap.numel():
                worst = min(worst, float(gap.min()))
        factor = margin / worst if 0 < worst < margin else 1.0
        model.head.weight.mul_(factor)
        if model.head.bias is not None:
            model.head.bias.mul_(factor)
    return factor


def token_embedding(model, n_tokens: int, const: int):
    """Token i -> e_i + e_const (a one-hot code and a constant 1), in the model's embedding."""
    with torch.no_grad():
        e = torch.zeros_like(model.embed.weight)
        for i in range(n_tokens):
            e[i, i] = 1.0
            e[i, const] = 1.0
        model.embed.weight.copy_(e)


def nearest_head(model, values: list[float], out_coord: int, const: int):
    """Head scores 2 phi_g s - phi_g^2 (nearest value), s the residual coordinate holding phi(prefix)."""
    nearest_point_head(model, [[v] for v in values], [out_coord], const)


def nearest_point_head(model, points: list[list[float]], out_coords: list[int], const: int):
    """Head scores 2 <phi_g, s> - |phi_g|^2 (nearest point), s the residual coordinates ``out_coords``
    holding phi(prefix) and ``const`` a coordinate that is 1."""
    with torch.no_grad():
        model.head.weight.zero_()
        if model.head.bias is not None:
            model.head.bias.zero_()
        for y, p in enumerate(points):
            for c, v in zip(out_coords, p, strict=True):
                model.head.weight[y, c] = 2 * v
            model.head.weight[y, const] = -sum(v * v for v in p)
