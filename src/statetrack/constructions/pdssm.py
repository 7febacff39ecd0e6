"""PD-SSM construction (P5 of docs/science.md): any finite automaton in ONE PD-SSM layer.

``dfa-pdssm:TASK`` takes any task with a finite automaton (``Task.automaton()``: ``dfa:PATH``, ``tomita:k``,
``parity``, ``group:G``, ``cycle:m``, ``modcount:m``, ``evenpairs``, ``modarith:m``, ...), minimises it by
its targets (a Moore machine: the target of a prefix is a function of the state it ends in), and sets:

* the state size N = the minimal automaton's states, the start state at index 0 (PD-SSM's initial state
  is e_0);
* the dictionary A_k = the column one-hot matrix of token k's transition map (column q has its one in
  row delta(q, k)) and the selection S x = 30 (one-hot of the token): the softmax puts weight 1 - 3e-12 K
  on A_k, so each column's argmax is row delta(q, k) and P(x_t) is exactly that map;
* D = 1: the magnitude MLP outputs sigmoid(30) = 1 and the phase MLP 2 pi sigmoid(-120) = 0, both exact in
  float32 (the limits the parametrisation reaches only through rounding: P5 [rounding]);
* B = 0, so the state is the one-hot e_q of the automaton's state after the prefix, exactly, at every
  length: no entry is ever rounded (``ops.pdssm.scan``);
* the read-out copies [Re h] into N residual coordinates, and the head scores each class by the sum of the
  coordinates of the states with that target.

The model has no norms (``norm="none"``), so the mixer sees the embeddings e_k + e_const directly. The
task's transition monoid is what the layer computes: a product of column one-hot matrices is the column
one-hot matrix of the composed map.
"""

from __future__ import annotations

import numpy as np
import torch

from statetrack.constructions.base import Construction, blank_model, register, token_embedding
from statetrack.errors import UserError
from statetrack.layers.pdssm import PDSSM
from statetrack.tasks import get_task
from statetrack.theory.actions import minimal_dfa

#: selection logits: softmax(30 e_k) puts all but (K - 1) e^-30 of the weight on A_k
SELECT = 30.0
#: the magnitude MLP's output logit (sigmoid(30) = 1 in float32) and the phase's (sigmoid(-120) = 0)
MAGNITUDE, PHASE = 30.0, -120.0
#: the largest automaton built (N^2 dictionary entries per token)
MAX_STATES = 512


def _moore(task: str):
    """The task's minimal Moore machine: (delta (N, symbols), outputs (N,), tokens (symbols,), vocab, classes),
    states renumbered so that the start is 0."""
    t = get_task(task)
    auto = t.automaton()
    if auto is None:
        raise UserError(
            f"dfa-pdssm needs a task with a finite automaton; {task!r} has none (allowed: dfa:PATH, "
            f"tomita:k, parity, group:G, cycle:m, modcount:m, evenpairs, modarith:m, ...)"
        )
    delta, start, outputs = minimal_dfa(auto.delta, auto.start, auto.outputs)
    n = delta.shape[0]
    if n > MAX_STATES:
        raise UserError(f"dfa-pdssm: the minimal automaton of {task!r} has {n} states, above {MAX_STATES}")
    order = [start] + [q for q in range(n) if q != start]
    new = np.empty(n, dtype=np.int64)
    new[order] = np.arange(n)
    delta = new[delta[order]]
    return delta, np.asarray(outputs)[order], auto.tokens, t.vocab_size, t.num_classes


@register(
    "dfa-pdssm",
    "P5",
    "any finite automaton in ONE PD-SSM layer: the minimal automaton's transition maps as "
    "column one-hot matrices with D = 1, one-hot states from e_0, a linear read-out (TASK: any task with an "
    "automaton, e.g. tomita:3, group:A5, dfa:PATH)",
    default_arg="tomita:3",
    mixers=("pdssm",),
)
def dfa_pdssm(task: str) -> Construction:
    delta, outputs, tokens, vocab, classes = _moore(task)
    N = delta.shape[0]
    CONST, OUT = vocab, list(range(vocab + 1, vocab + 1 + N))
    model, cfg = blank_model(
        task, layers=f"pdssm(dict_size={max(vocab, 8)})", d_model=vocab + 1 + N, d_state=N, norm="none"
    )
    token_embedding(model, vocab, CONST)
    mx = model.mixer(0, PDSSM)
    with torch.no_grad():
        mx.select.weight.zero_()  # one dictionary matrix per token
        mx.A_dict.zero_()
        for sym, tok in enumerate(tokens):
            mx.select.weight[tok, tok] = SELECT
            mx.A_dict[tok, delta[:, sym], np.arange(N)] = 1.0  # column q: its one in row delta(q, tok)
        magnitude, phase = mx.magnitude[2], mx.phase[2]  # the last linear map of each
        assert isinstance(magnitude, torch.nn.Linear) and isinstance(phase, torch.nn.Linear)
        magnitude.bias.fill_(MAGNITUDE)
        phase.bias.fill_(PHASE)
        mx.readout.weight.zero_()
        mx.readout.bias.zero_()
        for q in range(N):
            mx.readout.weight[OUT[q], q] = 1.0  # residual OUT_q = Re h_q: 1 for the current state
        model.head.weight.zero_()
        model.head.bias.zero_()
        for q in range(N):
            model.head.weight[int(outputs[q]), OUT[q]] = 1.0
    return Construction(
        "dfa-pdssm", model, cfg, "", "", {"task": task, "states": N, "tokens": int(len(tokens))}
    )
