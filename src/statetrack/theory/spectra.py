"""Eigenvalues of A(x) per layer, on the complex plane with the unit circle.

Layer 1 is evaluated per vocabulary token: the token's embedding, through the block's norm, as a
one-step input (a causal conv then sees zero history: an approximation for conv layers, stated in
the output). Every layer, layer 1 included, is also evaluated on the inputs it actually sees on a few
random sample sequences of the model's task (``samples`` x ``length`` tokens), coloured by the current
token. Non-linear layers have no transition matrix and are skipped.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import torch

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
    if automaton is None:
        return {}
    delta = np.asarray(automaton.delta)
    n = delta.shape[0]
    out: dict[str, dict] = {}
    for s, token in enumerate(automaton.tokens.tolist()):
        perm = delta[:, s]
        zs = eigenvalues.get(int(token))
        if not zs or len(set(perm.tolist())) != n:
            continue  # not a permutation (a reset, a sink): no cycle to follow
        order = _order(perm)
        if order < 2:
            continue
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


def cycle_text(cycles: dict[str, dict], limit: int = 6) -> str:
    """``cycle_fit``'s entries in one line: 'token: order d, angle (root), modulus, the angle exact or the
    count lost after N such inputs, the amplitude halved every M'; of more than ``limit`` symbols (a large
    group), the ``limit`` whose count is lost soonest."""

    def n(x: float) -> str:
        return f"{x:,.0f}" if x < 1e6 else f"{x:.1e}"

    def lost(h: float | None) -> str:
        return "never" if h is None else "at once" if h < 1 else f"after about {n(h)} such inputs"

    def angle(h: float | None) -> str:
        return "angle exact" if h is None else f"the count lost {lost(h)}"

    def amplitude(h: float | None) -> str:
        return (
            ""
            if h is None
            else ", the amplitude gone at once"
            if h < 1
            else f", the amplitude halved every {n(h)}"
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
        if ev is not None:
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
