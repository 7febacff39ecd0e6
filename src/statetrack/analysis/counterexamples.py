"""Counterexamples from the proofs, built from a model's actual weights.

``counterexample(checkpoint, task="parity") -> dict``:

* every layer has eigenvalues in [0,1] (T1): the witness is 1^T; the state converges, so the output
  becomes constant while the parity alternates.
* every layer is diagonal and time-invariant or non-negative input-dependent (T2/T4): read the
  time-invariant layers' eigenvalues exp(2 pi i q_j) (moduli r_j) from the weights; modes that decay
  (r_j^W_max below ``decay_floor``) need no alignment (Khavari2025 App. B: their terms converge whatever the
  phase). Search W = 1 .. ``max_w`` for the first with |W q_j - round(W q_j)| <= ``tol`` for every
  remaining mode, then run (1 0^(W-1))^T: every layer's state becomes periodic with period W while
  the parity has period 2W.
* otherwise (no theorem covers the model: non-linear layers, negative or complex input-dependent
  eigenvalues, ...): say so and search anyway, on random inputs and on the structured families
  (1^T, (01)^T, (0^k 1^m)^T, pulses (1 0^(W-1))^T) up to ``max_len``.

Any other regular task (``dfa:``, ``tomita:``, group word problems, ...): the witness families of every
pair of states of its automaton (:mod:`statetrack.tasks.families`: pairs u1 W^n v / u2 W^n v whose
labels differ and do not depend on n), run up to ``max_len`` (:mod:`statetrack.training.horizon`); the
counterexample is the family string the model gets wrong first.

The model runs in chunks whose length is a multiple of the witness period, carrying its state, so
the state at the end of consecutive chunks is compared directly: ``state_gap`` is the largest
distance between the states at t and t + period over the last quarter of the run (0 = exactly
periodic in finite precision). ``first_error`` is the first position whose prediction differs from
the parity; ``tail_accuracy`` the accuracy over the last quarter. A module whose state grows with the
length (``layers.adapters.CausalModule``: the inputs seen so far) has no state to compare: ``state_gap``
is None and the message says why; a time-invariant layer that gives no eigenvalues
(``layers.base.TRANSITION_PROTOCOL``) is named in the message, since W cannot read its phases.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from statetrack.errors import UserError
from statetrack.layers.base import TRANSITION_PROTOCOL
from statetrack.layers.properties import EigenvalueDomain
from statetrack.spec import parse_layers
from statetrack.theory.layer_classes import LayerClass, classify
from statetrack.training.checkpoint import load_checkpoint


def _state_vec(states) -> torch.Tensor:
    """Flatten a model's list of per-layer states (tensors or tuples) into one real vector per sequence."""
    parts = []

    def add(s):
        if s is None:
            return
        if isinstance(s, (tuple, list)):
            for x in s:
                add(x)
            return
        s = s.detach()
        if s.is_complex():
            s = torch.view_as_real(s)
        parts.append(s.reshape(s.shape[0], -1).double())

    for s in states:
        add(s)
    return torch.cat(parts, dim=1) if parts else torch.zeros(1, 0)


@torch.no_grad()
def run_on(model, tokens: np.ndarray, period: int = 1, chunk: int = 512, probe: int = 0) -> dict:
    """Run ``model`` on fixed sequences (B, T); returns predictions and state gaps at chunk ends."""
    B, T = tokens.shape
    chunk = max(period, (chunk // period) * period)
    states = model.init_state(B)
    preds: list[np.ndarray] = []
    gaps: list[tuple[int, float, float]] = []
    prev: torch.Tensor | None = None
    for start in range(0, T, chunk):
        x = torch.as_tensor(tokens[:, start : start + chunk])
        logits, states = model(x, states)
        preds.append(logits.argmax(-1).cpu().numpy())
        v = _state_vec(states)
        if prev is not None and x.shape[1] == chunk and v.shape == prev.shape:
            gaps.append((start + x.shape[1], float((v - prev).norm(dim=1).max()), float(v.norm(dim=1).max())))
        prev = v
    # then a few more periods one period at a time: the state's move per period at the end
    per = []
    for _ in range(probe):
        x = torch.as_tensor(tokens[:, :period] if T % period == 0 else tokens[:, T % period :][:, :period])
        _, states = model(x, states)
        v = _state_vec(states)
        assert prev is not None  # T >= 1: the chunks above set it
        if v.shape != prev.shape:  # a state that grows with the length (a module's inputs so far)
            return {"pred": np.concatenate(preds, axis=1), "gaps": gaps, "per_period": []}
        per.append((float((v - prev).norm(dim=1).max()), float(v.norm(dim=1).max())))
        prev = v
    return {"pred": np.concatenate(preds, axis=1), "gaps": gaps, "per_period": per}


def _parity(tokens: np.ndarray) -> np.ndarray:
    return np.cumsum(tokens, axis=1) % 2


def _summary(pred: np.ndarray, truth: np.ndarray, period: int | None = None) -> dict:
    wrong = pred != truth
    first = [int(np.argmax(w)) + 1 if w.any() else None for w in wrong]
    T = pred.shape[1]
    q = max(1, T // 4)
    out = {
        "first_error": min((f for f in first if f is not None), default=None),
        "tail_accuracy": float((~wrong[:, T - q :]).mean()),
        "accuracy": float((~wrong).mean()),
    }
    if period:  # from which position on the output repeats with the input's period
        same = (pred[:, period:] == pred[:, :-period]).all(axis=0)
        bad = np.flatnonzero(~same)
        out["output_periodic_from"] = int(bad[-1]) + 2 if len(bad) else 1
    return out


def s4d_phases(model, decay_floor: float = 1e-3, horizon: int = 10_000) -> list[dict]:
    """Eigenvalues of the time-invariant layers: modulus, phase q in [0, 1), whether they matter
    (|lambda|^horizon above ``decay_floor``)."""
    out = []
    for li, m in enumerate(model.mixers):
        if m.properties.input_dependent or not m.properties.linear:
            continue
        lam = m.eigenvalues(torch.zeros(1, 1, m.d_model))
        if lam is None:
            continue
        lam = lam.reshape(-1).detach().to(torch.complex128)
        for v in lam.tolist():
            r = abs(v)
            q = (math.atan2(v.imag, v.real) / (2 * math.pi)) % 1.0
            out.append(
                {
                    "layer": li,
                    "modulus": r,
                    "phase": q,
                    "relevant": r > 0 and horizon * math.log(r) > math.log(decay_floor),
                }
            )
    return out


def missing_transitions(model) -> list[str]:
    """One line per time-invariant linear layer that provides no eigenvalues (the T2 / T4 witness reads its
    phases): which layer, and what a module must provide."""
    return [
        f"layer {li + 1} ({m.name}) declares a time-invariant linear transition but provides none, so W "
        f"ignores its phases; a module must provide {TRANSITION_PROTOCOL}"
        for li, m in enumerate(model.mixers)
        if not m.properties.input_dependent
        and m.properties.linear
        and m.eigenvalues(torch.zeros(1, 1, m.d_model)) is None
    ]


def choose_w(phases: list[dict], tol: float = 0.01, max_w: int = 10_000) -> dict:
    """Smallest W <= max_w with W q_j within tol of an integer for every relevant mode (else the best W)."""
    qs = np.array([p["phase"] for p in phases if p["relevant"]])
    if len(qs) == 0:
        return {"W": 1, "max_dist": 0.0, "modes": 0, "within_tol": True}
    best = (math.inf, 1)
    for W in range(1, max_w + 1):
        d = float(np.abs(W * qs - np.round(W * qs)).max())
        if d <= tol:
            return {"W": W, "max_dist": d, "modes": int(len(qs)), "within_tol": True}
        best = min(best, (d, W))
    return {"W": best[1], "max_dist": best[0], "modes": int(len(qs)), "within_tol": False}


def _theorem(model) -> str | None:
    infos = [classify(s, m) for s, m in zip(parse_layers(model.cfg.layers), model.mixers, strict=True)]
    nonneg = EigenvalueDomain.NONNEG
    if all(
        i.domain == nonneg
        and i.cls != LayerClass.HOUSEHOLDER
        or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == nonneg)
        for i in infos
    ):
        return "T1"
    if all(i.cls in (LayerClass.LTI, LayerClass.NONNEG) for i in infos):
        return "T2" if all(i.cls == LayerClass.LTI for i in infos) else "T4"
    return None


def counterexample(
    checkpoint,
    task: str = "parity",
    max_len: int = 10_000,
    tol: float = 0.01,
    max_w: int = 10_000,
    decay_floor: float = 1e-3,
    seed: int = 0,
) -> dict:
    """Build the proof's witness for this model (or search), run it, report (see the module docstring)."""
    if isinstance(checkpoint, (str, bytes)) or hasattr(checkpoint, "__fspath__"):
        model, cfg, _, _ = load_checkpoint(checkpoint)
        where = str(checkpoint)
    else:
        model, where = checkpoint, "<model>"
    model.eval()
    if not task.startswith("parity"):
        return _family_counterexample(model, where, task, max_len)
    if model.num_classes != 2:
        raise UserError(
            f"the model predicts {model.num_classes} classes; a parity witness needs a parity model "
            f"(2 classes)"
        )
    if model.vocab_size != 2:
        raise UserError(
            f"the model has {model.vocab_size} input tokens; a parity witness needs a model with "
            f"vocabulary {{0, 1}}"
        )
    thm = _theorem(model)
    out = {"checkpoint": where, "layers": model.cfg.layers, "theorem": thm, "max_len": max_len}
    if thm == "T1":
        tokens = np.ones((1, max_len), dtype=np.int64)
        out.update(witness="1^T", period=1)
    elif thm in ("T2", "T4"):
        tokens = _aligned_witness(model, out, max_len, tol, max_w, decay_floor)
    if thm is not None:
        P = out["period"]
        res = run_on(model, tokens, period=P, probe=16)
        s = _summary(res["pred"], _parity(tokens), P)
        T = tokens.shape[1]
        out.update(s)
        per = res["per_period"]
        out["state_gap"] = max(g for g, _ in per) if per else None  # |state(t + P) - state(t)| at the end
        out["state_norm"] = max(nv for _, nv in per) if per else None
        out["found"] = s["first_error"] is not None
        out["message"] = "; ".join([_witness_message(out, s, thm, P, T), *out.get("missing_transitions", [])])
        return out
    return _search(model, out, max_len, seed)


#: what a counterexample says of a module whose state grows with the length, and what it must provide
GROWING_STATE = (
    "the state grows with the length (the module carries the inputs seen so far), so no state is compared "
    "per period; to have it compared, give the module a fixed-size state: a Mixer with init_state, step "
    "and forward (docs/extending.md)"
)


def _witness_message(out: dict, s: dict, thm: str, P: int, T: int) -> str:
    """The theorem's witness run, in one line: where the output first differs from the parity, from where
    it repeats, and how periodic the state is (or why it is not compared)."""
    if out["state_gap"] is None:
        state = GROWING_STATE
    else:
        kind = "stationary" if P == 1 else f"periodic with period {P}"
        state = (
            f"the state is {kind} to {out['state_gap']:.2g} per period (state norm {out['state_norm']:.3g})"
        )
    if not out["found"]:
        return f"{thm}: no error on {out['witness']} up to length {T}; {state}"
    return (
        f"{thm}: on {out['witness']} the output first differs from the parity at position "
        f"{s['first_error']} and repeats with the input's period from position "
        f"{s['output_periodic_from']} on (the parity has period {2 * P}); accuracy over the last "
        f"quarter {100 * s['tail_accuracy']:.1f}%; at length {T} {state}"
    )


def _aligned_witness(
    model, out: dict, max_len: int, tol: float, max_w: int, decay_floor: float
) -> np.ndarray:
    """T2 / T4's witness (1 0^(W-1))^T, with W chosen so that every time-invariant eigenvalue phase is
    nearly a whole turn after W steps; what it is goes into ``out``."""
    ph = s4d_phases(model, decay_floor, max_len)
    missing = missing_transitions(model)
    if missing:
        out["missing_transitions"] = missing
    w = choose_w(ph, tol, max_w)
    W = w["W"]
    reps = max(8, -(-max_len // W))
    tokens = np.tile(np.array([1] + [0] * (W - 1), dtype=np.int64), reps)[None, :]
    out.update(
        witness=f"(1 0^{W - 1})^T" if W > 1 else "1^T (W = 1)",
        period=W,
        W=W,
        tol=tol,
        phase_alignment=w,
        modes=[{k: (round(v, 6) if isinstance(v, float) else v) for k, v in p.items()} for p in ph],
    )
    out["max_len"] = tokens.shape[1]
    return tokens


def _family_counterexample(model, where: str, task_name: str, max_len: int) -> dict:
    """A regular task other than parity: its witness families, the first string the model gets wrong."""
    from statetrack.tasks import get_task
    from statetrack.training.horizon import failure_horizons

    task = get_task(task_name)
    if task.automaton() is None:
        raise UserError(
            f"counterexample builds parity witnesses and the witness families of regular tasks; "
            f"{task.name} is not regular here; allowed: parity, dfa:, tomita:, evenpairs, cycle, "
            "group, modcount, modarith"
        )
    rows = failure_horizons(model, task, max_len)
    out = {
        "checkpoint": where,
        "layers": model.cfg.layers,
        "theorem": None,
        "max_len": max_len,
        "task": task.name,
        "families": rows,
    }
    broken = [r for r in rows if r["horizon"] is not None]
    if not rows:
        out.update(
            found=False,
            witness=None,
            first_error=None,
            message=f"{task.name} has no witness family (a window language): nothing a bounded window "
            "cannot decide",
        )
        return out
    if not broken:
        out.update(
            found=False,
            witness=None,
            first_error=None,
            message=f"no error on the {len(rows)} witness families of {task.name} up to length {max_len}",
        )
        return out
    first = min(broken, key=lambda r: r["horizon"])
    out.update(
        found=True,
        witness=first["family"],
        first_error=first["horizon"],
        message=f"on the witness family {first['family']} of the states "
        f"{' and '.join(map(str, first['pair']))} (labels {' / '.join(first['label_names'])}, the "
        f"same for every n) the model is first wrong at n = "
        f"{first['horizon_n']}, a string of length {first['horizon']}; wrong at "
        f"{100 * first['wrong_after']:.0f}% of the longer n tested",
    )
    return out


def _search(model, out: dict, max_len: int, seed: int) -> dict:
    """No theorem covers the model: search random and structured inputs up to ``max_len``."""
    rng = np.random.default_rng(seed)
    out["witness"] = None
    out["message_prefix"] = (
        "no theorem in the sources covers this model (a layer is non-linear or has "
        "negative/complex input-dependent eigenvalues); searched anyway"
    )
    families = [("1^T", [1]), ("(01)^T", [0, 1])]
    families += [(f"(0^{k} 1^{m})^T", [0] * k + [1] * m) for k in (1, 2, 3) for m in (1, 3)]
    families += [(f"(1 0^{W - 1})^T", [1] + [0] * (W - 1)) for W in (2, 3, 4, 5, 8, 16)]
    tried = []
    for name, pat in families:
        tokens = np.tile(np.array(pat, dtype=np.int64), -(-max_len // len(pat)))[None, :max_len]
        res = run_on(model, tokens, period=len(pat))
        s = _summary(res["pred"], _parity(tokens))
        tried.append({"input": name, "length": max_len, **s})
        if s["first_error"] is not None:
            out.update(
                found=True,
                witness=name,
                **s,
                message=f"{out['message_prefix']}: fails on {name} at position {s['first_error']}",
            )
            out["tried"] = tried
            return out
    lengths = sorted({n for n in (16, 64, 256, 1024, 4096, max_len) if n <= max_len})
    for n in lengths:
        tokens = rng.integers(0, 2, size=(64, n))
        res = run_on(model, tokens)
        s = _summary(res["pred"], _parity(tokens))
        tried.append({"input": "random x64", "length": n, **s})
        if s["first_error"] is not None:
            bad = int(np.argmax((res["pred"] != _parity(tokens)).any(axis=1)))
            out.update(
                found=True,
                witness=f"random (seed {seed})",
                **s,
                failing_input=tokens[bad, : s["first_error"]].tolist() if s["first_error"] <= 200 else None,
                message=f"{out['message_prefix']}: fails on a random input at position {s['first_error']}",
            )
            out["tried"] = tried
            return out
    out.update(
        found=False,
        first_error=None,
        tried=tried,
        message=f"{out['message_prefix']}: no failing input among {len(tried)} families "
        f"(structured and 64 random sequences per length) up to length {max_len}",
    )
    return out
