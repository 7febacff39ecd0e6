"""The oracle's rules: can this stack of mixers solve this task at every length, in finite precision?

``oracle(layers, task) -> Verdict(verdict, basis, reason, facts)`` with verdict ``possible``,
``impossible`` or ``open``, the basis (a short name of docs/science.md: a theorem, a construction or
NL for non-linear recurrences), a one-sentence reason and the facts it used (monoid size, aperiodic,
maximal subgroups, holonomy height, the depth or representation a construction needs). The rules
read only the mixers' declared :class:`Properties` (input dependence, eigenvalue domain, structure,
n_h, linear) and the task's algebra (:mod:`statetrack.theory.actions`), never a task's name, so a new
mixer needs no new rule and a language gets one verdict however it is given.

Each rule is a registered object (:class:`~statetrack.theory.rules.base.Rule`: its name, its decision, the
bases it gives it on, the function that applies it), in the modules :mod:`.possible`, :mod:`.impossible` and
:mod:`.undecided`; :data:`RULES` holds them in the order the oracle (:func:`statetrack.theory.verdicts.oracle`)
tries them, and the first verdict wins. :mod:`.hypotheses` states what each rule assumes; :mod:`.base` holds the
verdict and the statements (:data:`~statetrack.theory.rules.base.BASES`).

Layers are read as classes by :mod:`statetrack.theory.layer_classes` (nonlinear, attention, lti,
nonneg, real, complex, householder, dplr, pd, pd-rows).

A verdict is never stronger than its rule's hypotheses as the code implements them: each rule states them
on the declared properties of the layers it reads (:data:`HYPOTHESES`; :func:`check_hypotheses`), a
'possible' verdict names the layers its construction uses (``facts['layers']``), and where a construction
holds eigenvalues of modulus 1 that a layer reaches only through float32 rounding (its
``Properties.rounding``: Negative Mamba's -1, LRU's |lambda| = 1, PD-SSM's |d| = 1, ...) the verdict carries
``condition = 'rounding'`` (shown as 'T5 [rounding]') and says how. Every construction that holds eigenvalues of
modulus 1 states the length to which float32 holds it (``facts['float32_length']``, None for every length:
:mod:`statetrack.theory.precision`, lemma F32).

Possibility comes from constructions, and a stack can do whatever any of its layers (in order) can
do: the other layers are switched off by zeroing their output projection, and the residual
connection carries the input past them.

* NL: a non-linear recurrent layer simulates any DFA (finite-state task) with enough units.
* P5: one PD-SSM layer (column one-hot times diagonal) runs the task's minimal automaton on one-hot
  states; the row form of PD-SSM's public code, any permutation automaton (group word problems).
* P1: on a fixed input whose labels are periodic with period p after N tokens, one diagonal layer
  with a constant eigenvalue exp(2 pi i/p) (and, if N > 0, one of modulus below 1) counts it.
* P2: the same layer predicts the offset.
* T6 (with lemma CD): one Householder layer whose factors have eigenvalues in [-1,1] tracks a group
  H when some faithful orthogonal representation rho of H has rank(I - rho(x)) <= n_h for every
  input letter x (:mod:`statetrack.theory.representations` finds the best one it can enumerate); with
  several heads, in each head's blocks of a block-diagonal rho (T6-heads).
* P4: a layer that tracks a parity, then a Householder layer with factors in [-1,1], track any group
  with a faithful 2-D orthogonal representation (cyclic and dihedral groups), one reflection per token.
* T5: layer i tracks the factor G_(i-1)/G_i of a subnormal series, abelian for a complex layer,
  elementary abelian 2 for a real (+-1) layer; the greedy series (derived subgroups, subgroups of
  squares) is the fastest, so it decides. P3 is its two-layer case for S3.
* SF / KR: the holonomy cascade of the task's monoid (height h) in k = SF-depth(h) input-dependent
  diagonal layers whose eigenvalues include [0,1] (resets, delays): star-free tasks (aperiodic
  monoid) in non-negative layers (SF, Sarrof2024), tasks whose maximal subgroups are elementary
  abelian 2-groups in real layers or abelian in complex-disc layers (KR). Below k layers: open.

Impossibility needs a theorem that covers EVERY layer:

* T1c: PD's stacks with one RWKV-7 layer (diagonal plus rank-one, similar to symmetric, eigenvalues in
  (-1/2, 1]) on a constant input: its cast state ends constant or alternating with period 2, so the
  output on u x^n has period dividing 2 (times PD's doublings) and a letter of period 3 or more defeats it.
  Parity (period 2) stays open, and so does every task where a layer before an RWKV-7 layer may
  alternate (its products can have complex eigenvalues).
* T1: every layer has eigenvalues in [0,1], or is a product of Householder factors with eigenvalues in
  [0,1] (lemma PSC: its only unit-modulus eigenvalue is 1), and the monoid is not aperiodic (parity at any
  depth and any structure; other tasks with diagonal layers through a periodic witness u w^n, or any
  structure with a single repeated letter).
* T2 / T4: every layer is diagonal and either time-invariant (any eigenvalues) or non-negative
  input-dependent: fails whenever words of every length multiple of W move the label.
* T3: the (0^k 1^m)^T witnesses for non-negative diagonal stacks.
* PD: every layer is real diagonal (or, on a constant input, a single real Householder factor, possibly
  times a gate in (0,1], KDA's diagonal one included): the
  output on u w^n is eventually periodic in n with period dividing 2^(number of layers with -1), so
  an element whose powers have another period cannot be tracked.
* T5: every layer is diagonal (each class above is a special case of complex diagonal): k layers
  cannot track a group of derived length > k (or a non-solvable one); with real eigenvalues only,
  not one whose shortest elementary-abelian-2 series is longer than k (or absent).

Everything else is ``open``, with the reason naming what is missing.
"""

from __future__ import annotations

from statetrack.theory.rules import impossible, possible, undecided
from statetrack.theory.rules.base import Rule

#: every rule, in the order the oracle tries them: the possible ones, the impossible ones, then the open ones
#: (the last always answers)
RULES: tuple[Rule, ...] = (*possible.RULES, *impossible.RULES, *undecided.RULES)
