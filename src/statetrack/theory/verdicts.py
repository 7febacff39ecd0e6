"""The theory oracle: can this stack of mixers solve this task at every length, in finite precision?

``oracle(layers, task) -> Verdict(verdict, basis, reason, facts)`` with verdict ``possible``,
``impossible`` or ``open``, the basis (a short name of docs/science.md: a theorem, a construction or
NL for non-linear recurrences), a one-sentence reason and the facts it used. The rules, each a registered
object naming its theorems, are in :mod:`statetrack.theory.rules` (read its docstring for what each decides),
their hypotheses in :mod:`statetrack.theory.rules.hypotheses`; this module applies them in order and is the
public face: :func:`oracle`, :func:`oracle_table`, :func:`quotient_ceiling` and the names the rules share.
"""

from __future__ import annotations

from statetrack.layers.properties import DECLARED, EigenvalueDomain
from statetrack.spec import parse_layers
from statetrack.theory.actions import TaskAlgebra, task_algebra
from statetrack.theory.layer_classes import LayerClass, LayerInfo, layer_infos
from statetrack.theory.rules import RULES
from statetrack.theory.rules.base import BASES, CASCADE_GROUPS, TC0, Condition, Decision, Rule, Verdict
from statetrack.theory.rules.hypotheses import HYPOTHESES, Hypothesis, check_hypotheses
from statetrack.theory.rules.possible import sf_depth

__all__ = [
    "BASES",
    "CASCADE_GROUPS",
    "DEFAULT_TABLE_LAYERS",
    "DEFAULT_TABLE_TASKS",
    "HYPOTHESES",
    "RULES",
    "TC0",
    "Condition",
    "Decision",
    "Hypothesis",
    "Rule",
    "Verdict",
    "check_hypotheses",
    "decide",
    "oracle",
    "oracle_table",
    "quotient_ceiling",
    "sf_depth",
]


def decide(infos: list[LayerInfo], alg: TaskAlgebra) -> tuple[Rule, Verdict]:
    """The first registered rule that answers for these layers and this task, and its verdict."""
    for r in RULES:
        v = r.apply(infos, alg)
        if v is not None:
            return r, v
    raise AssertionError("the last rule, no-result, always answers")


def quotient_ceiling(infos: list[LayerInfo], alg: TaskAlgebra) -> dict:
    """For a group task a stack cannot track: the largest quotient H / N it can still track and the
    accuracy that buys on uniformly distributed labels, 1 / |N| (the long-range and balanced draws'
    labels are uniform). The series is T5's greedy one: a complex layer takes the derived subgroup, a real
    one (or a Householder layer whose factors reach -1, at least a sign flip) the subgroup of squares;
    non-negative and time-invariant layers track no non-trivial group (T1, T4). For S3 with one complex or
    real layer: H / A3 = C2 (the sign), ceiling 1/3; for A5 (perfect) and parity: 1/|H|, chance."""
    if alg.group is None or alg.subgroup is None:
        return {}
    ops = [
        "d" if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED) else "s"
        for i in infos
        if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED, LayerClass.REAL, LayerClass.DPLR)
        or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)
    ]
    n = alg.residual(ops)
    return {"quotient_tracked": alg.h_order // n, "accuracy_ceiling": 1.0 / n}


def oracle(layers: str, task: str) -> Verdict:
    """Verdict for a layer spec on a task string (see the module docstring). An impossible verdict on a
    group task carries ``quotient_tracked`` and ``accuracy_ceiling`` (:func:`quotient_ceiling`)."""
    infos = layer_infos(layers)
    alg = task_algebra(task)
    _, v = decide(infos, alg)
    extra = quotient_ceiling(infos, alg) if v.verdict == Decision.IMPOSSIBLE else {}
    return Verdict(v.verdict, v.basis, v.reason, {**alg.facts(), **v.facts, **extra}, v.condition)


# -- the table ---------------------------------------------------------------------------------------
DEFAULT_TABLE_LAYERS = (
    "rnn",
    "gru",
    "transformer",
    "s4d",
    "s4d*2",
    "mamba",
    "mamba*2",
    "mamba,s4d",
    "negmamba",
    "negmamba*2",
    "negmamba,aussm",
    "aussm",
    "aussm*2",
    "aussm*3",
    "saussm",
    "dcd*2",
    "deltanet",
    "deltanet(neg=true)",
    "deltaproduct(nh=2,neg=true)",
    "deltaproduct(nh=3,neg=true)",
    "mamba2",
    "mamba2(neg=true)",
    "mamba3",
    "mamba3*2",
    "gateddeltanet",
    "gateddeltanet(neg=true)",
    "gateddeltanet(neg=true)*2",
    "rwkv7",
    "rwkv7*2",
    "mlstm",
    "slstm",
    "lru",
    "gla",
    "gateddeltaproduct(neg=true)",
    "kda(neg=true)",
    "pdssm",
)


DEFAULT_TABLE_TASKS = (
    "parity",
    "modcount:3",
    "offset",
    "group:C6",
    "group:V4",
    "group:C2xC4",
    "group:Q8",
    "group:S3",
    "group:A4",
    "group:S4",
    "group:A5",
    "tomita:3",
    "tomita:5",
    "tomita:6",
)


def oracle_table(layers: list[str] | None = None, tasks: list[str] | None = None) -> list[dict]:
    """One row per (layers, task). Default layers: those of the default list whose mixers exist."""
    if layers is None:
        layers = [s for s in DEFAULT_TABLE_LAYERS if all(l.name in DECLARED for l in parse_layers(s))]
    tasks = list(tasks or DEFAULT_TABLE_TASKS)
    rows = []
    for spec in layers:
        for t in tasks:
            v = oracle(spec, t)
            rows.append({"layers": spec, "task": t, **v.as_dict()})
    return rows
