"""A failure horizon predicted from a model's states at training lengths, before testing it there.

The idea is Chung, Choi and Kim's (Chung2026, docs/science.md: for affine recurrences the failure length
follows from the states at training lengths, when the within-class spread of the states grows to the
between-class separation that the read-out needs); this is our own construction of it, for any
checkpoint of a regular or group task.

For each witness family u_p W^n v / u_q W^n v of a pair of states (p, q) of the task's minimal
automaton (:mod:`statetrack.tasks.families`; the families the failure horizon is measured on, round robin
over the pairs, at most ``MAX_FAMILIES``):

1. **classes.** Class p is the strings x W^n v where x is a random string of m symbols that ends in the
   state p' that u_p ends in (uniform among them: ``Automaton.draw_ending_in``), class q the same with
   q'; ``samples`` strings per class, the same x at every n. The two classes share W^n v and differ only
   in the state their prefix left, which is what the model must carry through W^n;
2. **states, read where the read-out reads them.** For n = 0, 1, ... while x W^n v is within the
   training lengths, the model's read-out at the last position gives each string its margin: the logit of
   its correct label minus the largest other logit (positive: answered right). Per class and n: the mean
   margin m_c(n) (how far the class's states sit on the right side of the read-out's boundary; m_p + m_q
   is the between-class separation along the read-out) and its standard deviation s_c(n), the
   within-class spread;
3. **extrapolation.** Per class, m_c(n) is fitted by a + b r^n (r on a grid in (0, 1): states that
   converge, as an affine recurrence's do) or a + b n (drift); the class fails where its mean margin
   reaches the boundary, the first n with fit <= 0 (where it already has at a training length, that
   n, and ``seen`` says so: an observation, not a prediction). The family's predicted horizon is the
   length of the strings the class scored at that n (the random prefix's m symbols, n |W| and |v|: the
   strings that fail, not the family's access word); a pair's is the shortest over its
   families, the run's the shortest over the pairs. No crossing (the margin converges to a positive
   value or grows): no predicted failure (None);
4. **uncertainty.** The interval is the 10th-90th percentile of the prediction over ``BOOTSTRAP``
   resamplings of each class's strings; ``spread_band`` gives where the mean minus / plus one
   within-class deviation reaches the boundary (about 16% and 84% of a class's strings wrong).

Cost: one batched pass per group of families of one shape (prefix, pump and suffix lengths; 2 x
``samples`` strings each, n up to the longest training length): seconds of CPU per checkpoint.
Validation against measured horizons: docs/results/horizon-prediction.md.
"""

from __future__ import annotations

import numpy as np
import torch

from statetrack.errors import UserError
from statetrack.tasks.base import Task
from statetrack.tasks.families import witness_pairs

#: strings per class (fewer where the families would exceed ``STRINGS``)
SAMPLES = 32
#: families predicted, round robin over the pairs (every pair's first family first)
MAX_FAMILIES = 256
#: strings run in one batch
ROWS = 4096
#: strings per checkpoint: with many families, fewer per class (down to MIN_SAMPLES)
STRINGS = 8192
MIN_SAMPLES = 8
#: resamplings behind the interval
BOOTSTRAP = 40
#: decay rates r tried in a + b r^n
RATES = np.concatenate([1 - np.geomspace(1e-4, 0.9, 60)])
#: symbols added to the longest access string for the random prefixes
EXTRA = 4


def _crossing(g: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The first n >= 0 at which a fit of ``g`` (rows: resamplings, columns: the n's) by a + b r^n or
    a + b n is <= 0, per row (inf: never). Where g is <= 0 at a measured n, the first such n; where it is
    not, at least the first n past the measured ones (a fit that crosses between them is not an observation)."""
    rows = g.shape[0]
    best = np.full(rows, np.inf)
    err = np.full(rows, np.inf)
    params: list = [None] * rows
    forms = [("exp", r) for r in RATES] + [("lin", None)]
    for form, r in forms:
        x = r**n if form == "exp" else n.astype(float)
        A = np.column_stack([np.ones_like(x), x])
        coef, *_ = np.linalg.lstsq(A, g.T, rcond=None)  # (2, rows)
        sse = ((A @ coef - g.T) ** 2).sum(axis=0)
        better = sse < err - 1e-12
        err = np.where(better, sse, err)
        for j in np.flatnonzero(better):
            params[j] = (form, r, coef[0, j], coef[1, j])
    for i in range(rows):
        seen = np.flatnonzero(g[i] <= 0)
        if len(seen):
            best[i] = n[seen[0]]
            continue
        form, r, a, b = params[i]
        if form == "lin":
            best[i] = -a / b if b < 0 else np.inf
        elif a >= 0 or b <= 0:  # converges to a positive margin, or grows
            best[i] = np.inf
        else:  # a + b r^n = 0
            best[i] = np.log(-a / b) / np.log(r) if 0 < r < 1 else np.inf
        best[i] = max(best[i], n[-1] + 1)
    return best


@torch.no_grad()
def _margins(
    model, strings: np.ndarray, pumps: np.ndarray, ends: np.ndarray, correct: np.ndarray, n_max: int, device
) -> np.ndarray:
    """(rows, n_max + 1): each row's margin after x W^n v (the logit of its correct label minus the largest
    other), for rows of one shape: strings (rows, m), pumps (rows, |W|), ends (rows, |v|) as tokens."""
    rows = len(strings)
    out = np.empty((rows, n_max + 1))
    logits, states = model(torch.as_tensor(strings, device=device), model.init_state(rows))
    w = torch.as_tensor(pumps, device=device)
    v = torch.as_tensor(ends, device=device) if ends.shape[1] else None
    idx = torch.as_tensor(correct, device=device)
    ar = torch.arange(rows, device=device)
    for n in range(n_max + 1):
        last = model(v, states)[0][:, -1] if v is not None else logits[:, -1]
        right = last[ar, idx]
        other = last.clone()
        other[ar, idx] = -torch.inf
        out[:, n] = (right - other.max(-1).values).double().cpu().numpy()
        if n < n_max:
            logits, states = model(w, states)
    return out


def predict_horizon(
    model,
    task: Task,
    train_max_len: int,
    samples: int = SAMPLES,
    max_families: int = MAX_FAMILIES,
    seed: int = 0,
    device=None,
) -> dict:
    """The predicted failure horizon of ``model`` on ``task`` from its read-out on strings within the
    training lengths (up to ``train_max_len``), per pair of states (see the module docstring): {horizon,
    seen (the margin crossed within the training lengths already), low, high (the interval), pair (first
    predicted to fail), family, pairs: one row per pair, families_predicted, pairs_total}."""
    auto = _automaton(model, task)
    device = torch.device(device or next(model.parameters()).device)
    model.eval()
    w = witness_pairs(auto)
    mini = w.auto
    rng = np.random.default_rng(seed)
    fams = w.families[:max_families]  # round robin: every pair's first family first
    samples = max(MIN_SAMPLES, min(samples, STRINGS // (2 * max(1, len(fams)))))  # the budget of strings
    names = {p.states: p.names for p in w.pairs}
    plans = []
    groups: dict[tuple[int, int, int], list[int]] = {}
    for k, fam in enumerate(fams):
        ends = [int(mini.apply(fam.prefixes[i], [mini.start])[0]) for i in (0, 1)]
        m = _prefix_length(mini, ends, max(len(u) for u in fam.prefixes) + EXTRA)
        n_max = -1 if m is None else (train_max_len - m - len(fam.end)) // len(fam.pump)
        plans.append((ends, m, n_max))
        if m is not None and n_max >= 2:  # (n_max is -1 where m is None)
            groups.setdefault((m, len(fam.pump), len(fam.end)), []).append(k)
    margins = _group_margins(model, mini, fams, plans, groups, samples, rng, device)
    rows = []
    for k, fam in enumerate(fams):
        row = {"pair": list(names[fam.pair]), "family": fam.text(mini.symbols), "prefix_length": plans[k][1]}
        if k not in margins:
            rows.append(
                {
                    **row,
                    "horizon": None,
                    "low": None,
                    "high": None,
                    "spread_band": None,
                    "seen": False,
                    "reason": "the training lengths hold fewer than 3 repetitions of the pump",
                }
            )
        else:
            rows.append({**row, **_fit_family(margins[k], samples, fam, rng, plans[k][1])})
    return _summary(rows, w, len(fams))


def _automaton(model, task: Task):
    """The task's automaton, where it has one and the model reads and predicts the task's tokens and
    classes; else a UserError in one line."""
    auto = task.automaton()
    if auto is None:
        raise UserError(
            f"{task.name} has no automaton here, so no pairs of states to predict a horizon for; "
            "allowed: the regular tasks (dfa:, tomita:, parity, evenpairs, cycle, group, modcount, "
            "modarith)"
        )
    if model.vocab_size != task.vocab_size or model.num_classes != task.num_classes:
        raise UserError(
            f"the model reads {model.vocab_size} tokens and predicts {model.num_classes} classes; "
            f"{task.name} has {task.vocab_size} tokens and {task.num_classes} classes"
        )
    return auto


def _group_margins(
    model,
    mini,
    fams: list,
    plans: list[tuple[list[int], int | None, int]],
    groups: dict[tuple[int, int, int], list[int]],
    samples: int,
    rng: np.random.Generator,
    device: torch.device,
) -> dict[int, np.ndarray]:
    """Per family index: the margins of its ``2 * samples`` pumped strings, the families of a group (the
    same prefix, pump and end lengths) run in batches of strings drawn from ``rng``."""
    margins: dict[int, np.ndarray] = {}
    per_batch = max(1, ROWS // (2 * samples))
    for (m, _, _), ks in groups.items():
        for start in range(0, len(ks), per_batch):
            part = ks[start : start + per_batch]
            x = np.concatenate(
                [mini.draw_ending_in(np.full(samples, e), m, rng) for k in part for e in plans[k][0]]
            )
            reps = 2 * samples
            pumps = np.repeat(np.stack([mini.tokens[list(fams[k].pump)] for k in part]), reps, axis=0)
            tails = np.repeat(np.stack([mini.tokens[list(fams[k].end)] for k in part]), reps, axis=0)
            correct = np.concatenate([np.repeat(np.array(fams[k].labels), samples) for k in part])
            out = _margins(model, mini.tokens[x], pumps, tails, correct, plans[part[0]][2], device)
            for i, k in enumerate(part):
                margins[k] = out[i * reps : (i + 1) * reps]
    return margins


def _prefix_length(auto, ends: list[int], base: int) -> int | None:
    """The shortest length >= base at which both states are reached (within 24 more symbols), or None."""
    for m in range(base, base + 25):
        if auto.reachable(m)[ends].all():
            return m
    return None


def _fit_family(marg: np.ndarray, k: int, fam, rng, prefix_len: int | None) -> dict:
    """The fit of one family's margins; lengths are those of the strings it scored: a random prefix of
    ``prefix_len`` symbols, W^n and v."""
    n = np.arange(marg.shape[1])
    classes = (marg[:k], marg[k:])
    means = [c.mean(axis=0) for c in classes]
    spreads = [c.std(axis=0) for c in classes]
    boot = [c[rng.integers(0, k, size=(BOOTSTRAP, k))].mean(axis=1) for c in classes]  # (BOOTSTRAP, n)
    point, lows, highs, band = [], [], [], []
    for c in (0, 1):
        g = np.vstack([means[c], boot[c], means[c] - spreads[c], means[c] + spreads[c]])
        cross = _crossing(g, n)
        point.append(cross[0])
        # no interpolation: a resampling with no crossing (inf) stays inf
        lows.append(np.quantile(cross[1 : 1 + BOOTSTRAP], 0.1, method="inverted_cdf"))
        highs.append(np.quantile(cross[1 : 1 + BOOTSTRAP], 0.9, method="inverted_cdf"))
        band.append(sorted((cross[-2], cross[-1])))
    c = int(np.argmin(point))

    def length(nn: float) -> int | None:
        if not np.isfinite(nn) or prefix_len is None:
            return None
        if not prefix_len and not fam.end:  # the empty string at n = 0 is not scored
            nn = max(nn, 1)
        return int(round(prefix_len + nn * len(fam.pump) + len(fam.end)))

    return {
        "horizon": length(point[c]),
        "horizon_n": None if not np.isfinite(point[c]) else float(point[c]),
        "seen": bool(point[c] <= n[-1]),  # the class's mean margin was <= 0 within the training lengths
        "low": length(min(lows)),
        "high": length(min(highs)),
        "spread_band": [length(min(b[0] for b in band)), length(min(b[1] for b in band))],
        "fails_first": c,
        "trained_n": int(n[-1]),
        "separation": float(means[0][-1] + means[1][-1]),
        "spread": float((spreads[0][-1] + spreads[1][-1]) / 2),
        "curve": {
            "margin": [m.round(4).tolist() for m in means],
            "spread": [s.round(4).tolist() for s in spreads],
        },
        "reason": None,
    }


def _summary(rows: list[dict], w, predicted: int) -> dict:
    """Per pair, the family predicted to fail first; the run's horizon over the pairs."""

    def key(v):
        return np.inf if v is None else v

    def least(vals):
        v = min(vals, default=np.inf)
        return None if not np.isfinite(v) else int(v)

    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault(tuple(r["pair"]), []).append(r)
    pairs = []
    for rs in by.values():
        scored = [r for r in rs if r["reason"] is None]
        if not scored:
            pairs.append({**rs[0], "families": len(rs)})
            continue
        first = min(scored, key=lambda r: key(r["horizon"]))
        pairs.append(
            {
                **first,
                "families": len(rs),
                "low": least(key(r["low"]) for r in scored),
                "high": least(key(r["high"]) for r in scored),
            }
        )
    scored = [p for p in pairs if p["reason"] is None]
    earliest = min(scored, key=lambda r: key(r["horizon"]), default=None)
    # the pair that breaks first, if any does
    broke = earliest if earliest is not None and earliest["horizon"] is not None else None
    return {
        "horizon": broke["horizon"] if broke is not None else None,
        "seen": bool(broke is not None and broke["seen"]),
        "low": least(key(r["low"]) for r in scored),
        "high": least(key(r["high"]) for r in scored),
        "pair": broke["pair"] if broke is not None else None,
        "family": broke["family"] if broke is not None else None,
        "pairs": pairs,
        "families_predicted": predicted,
        "pairs_total": w.pairs_total,
    }
