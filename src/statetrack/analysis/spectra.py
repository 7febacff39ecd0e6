"""Eigenvalues of A(x) per layer, on the complex plane with the unit circle.

Layer 1 is evaluated per vocabulary token: the token's embedding, through the block's norm, as a
one-step input (a causal conv then sees zero history: an approximation for conv layers, stated in
the output). Every layer, layer 1 included, is also evaluated on the inputs it actually sees on a few
random sample sequences of the model's task (``samples`` x ``length`` tokens), coloured by the current
token. A layer's eigenvalues come from its ``eigenvalues(x)`` or ``transition(x)``
(``layers.base.TRANSITION_PROTOCOL``, any module of a plugin too); a layer without them is skipped with
one line saying why (``no_transition``): non-linear, or what a module declared linear must provide.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import torch

from statetrack.layers.adapters import UNKNOWN
from statetrack.layers.base import TRANSITION_PROTOCOL
from statetrack.training.checkpoint import load_checkpoint


def cycle_fit(
    automaton, eigenvalues: dict[int, list[complex]], context: dict[int, np.ndarray] | None = None
) -> dict[str, dict]:
    """Per input token that permutes the task's states with some order d >= 2 (a parity's 1, a counter's
    symbol, a group element), the eigenvalue of layer 1 nearest a primitive d-th root of unity in the
    complex plane: what a diagonal or rotation channel needs to follow that symbol's cycle exactly.
    ``eigenvalues``: token id -> that token's eigenvalues (every channel). Each entry: the order, the
    eigenvalue's angle and the root's (degrees), its modulus, the angle error (radians), the inputs of
    that symbol after which that error reaches half the spacing of the cycle's angles (pi / d), where the
    channel's count is lost (None when the error is zero: exact), and those over which its amplitude
    halves (None at modulus 1 or above): a channel that decays forgets the count against the input it
    adds at every step. It is the best any channel comes: the read-out may weigh other channels too, so
    a good fit here bounds what the layer has, not what it uses. Empty when the task has no automaton.

    ``context``: token id -> that token's eigenvalues at each place it occurs in sample sequences (an
    array, or nested lists, of shape (places, n)). A layer
    with a short convolution applies angles that depend on the tokens before as well; where they vary,
    the entry's ``context`` reads the channel that stays nearest a root over the occurrences: their
    number, its angle's range, its mean error (the bias, which adds up in step: pi / (d |bias|) inputs
    lose the count) and their spread (which adds up as a random walk: (pi / (d sd))^2 inputs)."""
    out: dict[str, dict] = {}
    for token, order in _symbol_orders(automaton):
        zs = eigenvalues.get(token)
        if not zs or order is None or order < 2:
            continue  # no eigenvalues, or not a permutation (a reset, a sink): no cycle to follow
        roots = [2 * math.pi * k / order for k in range(order) if math.gcd(k, order) == 1]

        # the eigenvalue nearest a root in the complex plane: angle and modulus together
        _, z, a = min(((abs(z - cmath.exp(1j * a)), z, a) for z in zs for a in roots), key=lambda x: x[0])
        theta = math.atan2(z.imag, z.real)
        d = float(_wrap(theta - a))
        err = 0.0 if abs(d) < 1e-9 else abs(d)  # float rounding of an exact root is no error
        out[str(token)] = {
            "order": order,
            "angle_deg": math.degrees(theta),
            "root_deg": math.degrees(theta - d),
            "modulus": abs(z),
            "angle_error": err,
            "horizon": math.pi / (order * err) if err > 0 else None,
            # inputs of that symbol over which the channel's amplitude halves (None: modulus 1 or above)
            "half_life": math.log(2) / -math.log(abs(z)) if 0 < abs(z) < 1 - 1e-9 else None,
        }
        seen_at = np.asarray((context or {}).get(int(token), []))
        in_context = _in_context(np.angle(seen_at), roots, order) if seen_at.size else None
        if in_context is not None:
            out[str(token)]["context"] = in_context
    return out


def channel_fit(automaton, steady: dict[int, list[complex]], sums: dict[int, tuple]) -> dict[str, dict]:
    """One channel keeping a count mod m, read along whole sequences. A diagonal channel counts mod m when
    every symbol turns it by a multiple of 2 pi / m (a symbol of order d by a multiple of 2 pi / gcd(d, m),
    the identity by 0); what it keeps is its phase summed along a sequence. With a short convolution one
    token's angle depends on its neighbours and a sequence's phase carries an offset set by its last
    tokens (which an input-dependent read-out, fed the same window, can undo), so neither one place's
    angle nor one sequence's phase decides: the spread of the phase over sequences with the same last
    tokens, and its growth with length, do.

    ``steady``: symbol -> the layer's eigenvalues (n,) at the end of a run of that symbol (its whole turn
    per input, the convolution seeing it alone). ``sums``: prefix length L -> (counts (B, V): each
    symbol's inputs in B random prefixes of length L, phase (B, n): each channel's angle summed along the
    prefix and then a fixed suffix that fills the convolution the same way for all). Per m >= 2 dividing
    the lcm of the symbols' orders, among the channels whose turns tell m states apart, the one whose
    phase stays nearest the count at the longest L: its error there (radians, the root mean square
    after the common offset), its drift (the mean's change per input between the two longest L: the
    count lost after pi / (m |drift|) inputs), the drift's standard error over the prefixes, its spread
    (the variance's growth per input, a random walk: lost after (pi / m)^2 / variance), the symbol whose
    steady turn errs most and the run of it that loses the count, and the amplitude's half-life (None at
    modulus 1). The channel is chosen on the same prefixes, so the reading leans optimistic, and the
    read-out may combine channels: it bounds what one channel has. Empty when a symbol is no permutation
    (a reset) or every order is 1."""
    syms, orders = _permutation_tokens(automaton, steady)
    lcm = math.lcm(*orders) if orders else 1
    if lcm < 2 or len(sums) < 2:
        return {}
    z = np.array([np.asarray(steady[t], dtype=complex) for t in syms])  # (V, n)
    short, long = sorted(sums)[-2:]
    B = sums[long][0].shape[0]
    out: dict[str, dict] = {}
    for m in (m for m in range(2, lcm + 1) if lcm % m == 0):
        # a symbol of order d turns the channel by a multiple of 2 pi / gcd(d, m)
        g = np.gcd(np.asarray(orders), m)[:, None]
        k = np.round(np.angle(z) * g / (2 * math.pi))
        target, turns = 2 * math.pi * k / g, (k * (m // g)).astype(int) % m  # (V, n)
        counting = np.gcd.reduce(np.vstack([turns, np.full(turns.shape[1], m)]), axis=0) == 1
        if counting.any():
            (c1, v1), (c2, v2) = (_phase_error(sums[L], target) for L in (short, long))
            drift = _wrap(c2 - c1) / (long - short)
            score = np.where(counting, v2 + (drift * long) ** 2, np.inf)
            j = int(np.argmin(score))
            rate = max(float(v2[j] - v1[j]), 0.0) / (long - short)
            out[str(m)] = _channel_entry(m, j, z, target, turns, syms) | {
                "sequences": int(B),
                "length": int(long),
                "error": math.sqrt(float(score[j])),
                "drift": float(drift[j]),
                # the drift's standard error: the two means' over B prefixes each
                "drift_se": math.sqrt(float(v1[j] + v2[j]) / B) / (long - short),
                "spread": math.sqrt(rate),
                "horizon_drift": math.pi / m / abs(drift[j]) if abs(drift[j]) > 1e-12 else None,
                "horizon_spread": (math.pi / m) ** 2 / rate if rate > 1e-24 else None,
            }
    return out


def _phase_error(sums: tuple, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's phase error over the prefixes (``sums``: counts (B, V), phase (B, n)) against the
    count's (``target`` (V, n) per symbol): its circular mean (the common offset) and the mean square
    about it, per channel."""
    counts, phase = sums
    e = phase - np.asarray(counts, dtype=float) @ target  # (B, n)
    centre = np.angle(np.exp(1j * e).mean(0))
    return centre, (_wrap(e - centre) ** 2).mean(0)


def _channel_entry(m: int, j: int, z: np.ndarray, target: np.ndarray, turns: np.ndarray, syms: list) -> dict:
    """Channel ``j``'s turns, its symbols' steady errors (the worst one and the run of it that loses the
    count mod m) and its half-life."""
    steady = np.abs(_wrap(np.angle(z[:, j]) - target[:, j]))
    worst = int(np.argmax(steady))
    e = float(steady[worst]) if steady[worst] > 1e-9 else 0.0  # rounding of an exact root is no error
    modulus = float(np.abs(z[:, j]).min())
    return {
        "channel": j,
        "turns": {str(t): int(turns[i, j]) for i, t in enumerate(syms)},
        "steady_error": e,
        "worst_token": str(syms[worst]),
        "horizon_run": math.pi / m / e if e > 0 else None,
        "half_life": math.log(2) / -math.log(modulus) if 0 < modulus < 1 - 1e-9 else None,
    }


def _symbol_orders(automaton) -> list[tuple[int, int | None]]:
    """Each of the automaton's symbols with the order of the permutation it makes of the states, None where
    it makes none (a reset, a sink); empty without an automaton."""
    if automaton is None:
        return []
    delta = np.asarray(automaton.delta)
    return [
        (int(token), _order(delta[:, s]) if len(set(delta[:, s].tolist())) == delta.shape[0] else None)
        for s, token in enumerate(automaton.tokens.tolist())
    ]


def _permutation_tokens(automaton, eigenvalues: dict) -> tuple[list[int], list[int]]:
    """The automaton's symbols and their orders; nothing when one is no permutation of the states (a reset,
    which no channel of modulus 1 follows) or has no eigenvalues."""
    pairs = _symbol_orders(automaton)
    if any(order is None or not len(eigenvalues.get(t, [])) for t, order in pairs):
        return [], []
    return [t for t, _ in pairs], [order for _, order in pairs if order is not None]


def _order(perm: np.ndarray) -> int:
    """The order of the permutation q -> perm[q]: the lcm of its cycles' lengths."""
    seen, order = set(), 1
    for q in range(len(perm)):
        c, r = 0, q
        while r not in seen:
            seen.add(r)
            r, c = int(perm[r]), c + 1
        order = math.lcm(order, max(c, 1))
    return order


def _wrap(x: np.ndarray | float) -> np.ndarray:
    """Angles (radians) wrapped to [-pi, pi) (a float gives a 0-d array)."""
    return (np.asarray(x) + np.pi) % (2 * np.pi) - np.pi


def _in_context(angles: np.ndarray, roots: list[float], order: int) -> dict | None:
    """The channel whose angle stays nearest a primitive root (least mean absolute error) over a token's
    occurrences ``angles`` (k, n): the occurrences, that channel's range (degrees), its errors' mean
    absolute value, mean (bias) and standard deviation (spread), in radians, and the inputs after which
    each loses the count; None when no channel's angle varies with the context."""
    if np.ptp(angles, axis=0).max() < 1e-6:
        return None
    root, j, mean = min(
        ((a, int(np.argmin(e)), float(e.min())) for a in roots for e in [np.abs(_wrap(angles - a)).mean(0)]),
        key=lambda x: x[2],
    )
    dev = _wrap(angles[:, j] - root)
    root = float(-_wrap(-np.asarray(root)))  # in (-pi, pi]: -1 reads 180 deg
    bias, sd, half = float(dev.mean()), float(dev.std()), math.pi / order
    return {
        "n": int(angles.shape[0]),
        "root_deg": math.degrees(root),
        "min_deg": math.degrees(root + dev.min()),
        "max_deg": math.degrees(root + dev.max()),
        "mean_error": mean,
        "bias": bias,
        "spread": sd,
        # the bias adds up in step (half / |bias| inputs), the spread as a random walk ((half / sd)^2)
        "horizon_drift": half / abs(bias) if abs(bias) > 1e-12 else None,
        "horizon_spread": (half / sd) ** 2 if sd > 1e-12 else None,
    }


def _number(x: float) -> str:
    return f"{x:,.0f}" if x < 1e6 else f"{x:.1e}"


def _lost(h: float | None, unit: str = "") -> str:
    """When a count is lost, from a horizon in inputs (None: never)."""
    return "never" if h is None else "at once" if h < 1 else f"after about {_number(h)}{unit}"


def cycle_text(cycles: dict[str, dict], limit: int = 6) -> str:
    """``cycle_fit``'s entries in one line: 'token: order d, angle (root), modulus, the angle exact or the
    count lost after N such inputs, the amplitude halved every M'; of more than ``limit`` symbols (a large
    group), the ``limit`` whose count is lost soonest."""

    def lost(h: float | None) -> str:
        return _lost(h, " such inputs")

    def angle(h: float | None) -> str:
        return "angle exact" if h is None else f"the count lost {lost(h)}"

    def amplitude(h: float | None) -> str:
        return (
            ""
            if h is None
            else ", the amplitude gone at once"
            if h < 1
            else f", the amplitude halved every {_number(h)}"
        )

    shown = list(cycles.items())
    if len(shown) > limit:
        shown = sorted(shown, key=lambda tc: (tc[1]["horizon"] or math.inf, tc[1]["half_life"] or math.inf))
        shown = shown[:limit]

    def context(c: dict) -> str:
        x = c.get("context")
        return (
            ""
            if x is None
            else f" (in context, at its {x['n']} places in the samples, the best channel (root "
            f"{x['root_deg']:.0f}): {x['min_deg']:.1f} to {x['max_deg']:.1f} deg, bias "
            f"{math.degrees(x['bias']):+.2f}, spread {math.degrees(x['spread']):.2f} deg: the count lost "
            f"{lost(x['horizon_drift'])} by the bias, {lost(x['horizon_spread'])} by the spread)"
        )

    text = "; ".join(
        f"{t}: order {c['order']}, {c['angle_deg']:.2f} deg (root {c['root_deg']:.0f}), modulus "
        f"{c['modulus']:.4f}: {angle(c['horizon'])}{amplitude(c['half_life'])}{context(c)}"
        for t, c in shown
    )
    if len(shown) < len(cycles):
        text += f" (the {len(shown)} of {len(cycles)} symbols whose count is lost soonest)"
    return text


def channel_text(fits: dict[str, dict], limit: int = 3) -> str:
    """``channel_fit``'s entries in one line, the ``limit`` largest moduli first."""

    def one(m: str, c: dict) -> str:
        return (
            f"mod {m}: channel {c['channel']}, {math.degrees(c['error']):.1f} deg off the count after "
            f"{c['length']} inputs ({c['sequences']} samples), drift {math.degrees(c['drift']):+.3f} "
            f"(+-{math.degrees(c['drift_se']):.3f}) and "
            f"spread {math.degrees(c['spread']):.3f} deg per input: lost {_lost(c['horizon_drift'])} inputs by "
            f"the drift, {_lost(c['horizon_spread'])} by the spread; a run of symbol {c['worst_token']} (its "
            f"turn {math.degrees(c['steady_error']):.2f} deg off) loses it {_lost(c['horizon_run'])}"
        )

    shown = sorted(fits.items(), key=lambda mc: -int(mc[0]))[:limit]
    more = f" (the {len(shown)} largest of {len(fits)} moduli)" if len(shown) < len(fits) else ""
    return "; ".join(one(m, c) for m, c in shown) + more


#: the channel reading's random prefixes (and their two lengths: half and all of ``spectrum``'s length)
CHANNEL_SAMPLES = 64
#: a symbol's run (its steady turn) and the fixed suffix after each prefix: long enough to fill the longest
#: convolution (64)
RUN = 65


@torch.no_grad()
def _channels(model, task, length: int, seed: int) -> dict:
    """``channel_fit`` on layer 1: the steady turns from runs of each symbol, the summed phase of
    ``CHANNEL_SAMPLES`` random prefixes of ``length`` / 2 and ``length`` inputs, each followed by a run of
    the automaton's first symbol."""
    auto = task.automaton()
    if auto is None:
        return {}
    block, emb = model.block(0), model.embed.weight
    steady = block.mixer.eigenvalues(block.norm(emb[:, None, :].expand(-1, RUN, -1)))
    if steady is None:
        return {}
    rng = np.random.default_rng([seed, 1])
    sums = {}
    for L in (max(length // 2, 1), length):
        prefix = torch.as_tensor(task.sample_batch(rng, CHANNEL_SAMPLES, L).inputs)
        seq = torch.cat([prefix, prefix.new_full((prefix.shape[0], RUN), int(auto.tokens[0]))], 1)
        phase = torch.cat(  # 16 sequences at a time: a wide layer's eigenvalues at every place are large
            [
                block.mixer.eigenvalues(block.norm(model.embed(part))).angle().double().sum(1)
                for part in seq.split(16)
            ]
        )
        counts = np.stack([(prefix == t).sum(1).numpy() for t in auto.tokens.tolist()], 1)
        sums[L] = (counts, phase.numpy())
    last = steady[:, -1].to(torch.complex128).numpy()
    return channel_fit(auto, {t: last[t] for t in auto.tokens.tolist()}, sums)


def _per_token(f: torch.Tensor, task, ev: torch.Tensor, tokens: torch.Tensor) -> dict:
    """Layer 1's entries per vocabulary token, from its one-step eigenvalues ``f`` (V, n): the values, the
    smallest real part, and the cycle fit where the task has an automaton, read in context too from the
    eigenvalues ``ev`` (B, T, n) of the sample sequences ``tokens`` (B, T)."""
    V = f.shape[0]
    out: dict = {
        "per_token": {str(t): [[z.real, z.imag] for z in f[t].tolist()] for t in range(V)},
        "per_token_min_real": {str(t): float(f[t].real.min()) for t in range(V)},
    }
    context = {t: ev[tokens == t].numpy() for t in range(V)}
    fits = cycle_fit(task.automaton(), {t: f[t].tolist() for t in range(V)}, context)
    if fits:
        out["per_token_cycle"] = fits
    return out


def no_transition(mixer) -> str:
    """Why a layer has no eigenvalues to show, in one line: a non-linear recurrence has no transition
    matrix; a layer declared linear must provide its transition (``TRANSITION_PROTOCOL``)."""
    props = mixer.properties
    if props == UNKNOWN:
        return (
            "declares no properties and provides no transition: to have its eigenvalues read, declare it "
            f"linear and provide {TRANSITION_PROTOCOL} (docs/extending.md)"
        )
    if not props.linear:
        return "no transition matrix (a non-linear recurrence, as declared)"
    return (
        f"declared linear ({props.structure}, eigenvalues {props.eigenvalues}) but provides no transition: "
        f"a module must provide {TRANSITION_PROTOCOL} (docs/extending.md)"
    )


@torch.no_grad()
def spectrum(checkpoint, samples: int = 4, length: int = 64, seed: int = 0) -> dict:
    if isinstance(checkpoint, (str, bytes)) or hasattr(checkpoint, "__fspath__"):
        model, cfg, task, _ = load_checkpoint(checkpoint)
    else:
        model, task = checkpoint
        cfg = None
    model.eval()
    layers = []
    # per token, layer 1
    emb = model.embed.weight[:, None, :]  # (V, 1, d)
    first = model.block(0).mixer.eigenvalues(model.block(0).norm(emb))
    # sample sequences: each layer's actual inputs
    rng = np.random.default_rng(seed)
    b = task.sample_batch(rng, samples, length)
    tokens = torch.as_tensor(b.inputs)
    x = model.embed(tokens)
    for li, block in enumerate(model.blocks):
        xin = block.norm(x)
        ev = block.mixer.eigenvalues(xin)
        entry = {
            "layer": li + 1,
            "mixer": type(block.mixer).name,
            "properties": block.mixer.properties.as_dict(),
        }
        if ev is None:
            entry["no_transition"] = no_transition(block.mixer)
        else:
            ev = ev.detach().to(torch.complex128)
            flat = ev.reshape(-1)
            ang = torch.angle(flat)
            entry.update(
                {
                    "per_token": None,
                    "samples": ev.reshape(ev.shape[0] * ev.shape[1], -1).tolist(),
                    "sample_tokens": tokens.reshape(-1).tolist(),
                    "min_real": float(flat.real.min()),
                    "max_modulus": float(flat.abs().max()),
                    "min_modulus": float(flat.abs().min()),
                    "angles_deg": sorted(
                        {round(math.degrees(a), 1) for a in ang[flat.abs() > 1e-6].tolist()}
                    )[:40],
                    "n_angles": len({round(math.degrees(a), 1) for a in ang[flat.abs() > 1e-6].tolist()}),
                }
            )
            if li == 0 and first is not None:
                entry.update(_per_token(first.detach().to(torch.complex128)[:, 0, :], task, ev, tokens))
                channels = _channels(model, task, length, seed)
                if channels:
                    entry["per_channel_cycle"] = channels
        layers.append(entry)
        x, _ = block(x)
    return {
        "checkpoint": str(checkpoint) if cfg is not None else "<model>",
        "layers_spec": model.cfg.layers,
        "task": task.name,
        "layers": layers,
        "note": "layer 1 per token uses a one-step input (zero conv history), its cycle fit read in "
        "context too; sample rows use the inputs each layer sees on "
        f"{samples} random {task.name} sequences of length {length}",
    }
