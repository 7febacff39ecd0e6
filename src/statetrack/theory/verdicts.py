"""The theory oracle: can this stack of mixers solve this task at every length, in finite precision?

``oracle(layers, task) -> Verdict(verdict, basis, reason)`` with verdict ``possible``, ``impossible``
or ``open``, the basis (an id of SCIENCE.md section 3, or NL for non-linear recurrences) and a
one-sentence reason. The rules read only the mixers' declared :class:`Properties` (input
dependence, eigenvalue domain, structure, n_h, linear) and the task's algebra
(:mod:`statetrack.theory.algebra`), so a new mixer needs no new rule.

Layer classes, from the properties:

=============  ==========================================================================
nonlinear      linear=False, structure nonlinear (RNN, LSTM, GRU)
attention      structure attention (Transformer)
lti            time-invariant (input_dependent=False), diagonal (S4D)
nonneg         input-dependent diagonal, eigenvalues [0,1] (Mamba)
real           input-dependent diagonal, eigenvalues (-1,1] or [-1,1] (Negative Mamba)
complex        input-dependent diagonal, unit circle or complex disc (AUSSM, Simple AUSSM, DCD)
householder    products of n_h generalized Householder matrices (DeltaNet, DeltaProduct)
=============  ==========================================================================

Possibility comes from constructions, and a stack can do whatever any of its layers (in order) can
do: the other layers are switched off by zeroing their output projection, and the residual
connection carries the input past them.

* NL: a non-linear recurrent layer simulates any DFA (finite-state task) with enough units.
* P1: one time-invariant layer with a complex eigenvalue of modulus 1 (to float precision) counts
  on a fixed input (002 Prop. 4.2); input-dependent complex layers include the time-invariant ones.
* P2: the same layer predicts the offset (002 App. C).
* T5 (construction of 003): layer i tracks the factor G_(i-1)/G_i of a subnormal series, abelian for a
  complex layer, elementary abelian 2 for a real (+-1) layer (Negative Mamba: C2 x C4 with two);
  the greedy series (derived subgroups, subgroups of squares) is the fastest, so it decides.
* T6: one Householder layer with factors in [-1,1] and n_h factors tracks any group acting on
  n_h + 1 points (a permutation is a product of at most n - 1 transpositions = reflections).

Impossibility needs a theorem that covers EVERY layer:

* T1: every layer has eigenvalues in [0,1] (any structure for parity, Grazzi et al.; for other tasks
  diagonal layers with the periodic witness of 002 App. B case 2, or any structure with a constant
  input x^T whose label is periodic).
* T2 / T4: every layer is diagonal and either time-invariant (any eigenvalues) or non-negative
  input-dependent: fails whenever words of every length multiple of W move the label (002 Thm 4.4).
* T3: the (0^k 1^m)^T witnesses for non-negative diagonal stacks (002 Lemma 4.3).
* T5: every layer is diagonal (each class above is a special case of complex diagonal): k layers
  cannot track a group of derived length > k (or a non-solvable one); with real eigenvalues only,
  not one whose shortest elementary-abelian-2 series is longer than k (or absent).

Everything else is ``open``, with the reason naming what is missing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from statetrack.errors import UserError
from statetrack.layers import MIXERS, build_mixer
from statetrack.layers.base import Properties
from statetrack.spec import parse_layers
from statetrack.theory.algebra import TaskAlgebra, task_algebra

NONNEG = {"[0,1]"}
REAL_NEG = {"(-1,1]", "[-1,1]"}
COMPLEX = {"unit circle", "complex disc", "complex"}

#: the statements the oracle's bases refer to (SCIENCE.md section 3, plus NL)
BASES = {
    "T1": "non-negative eigenvalues in every layer: parity fails at any depth (Grazzi et al. Thm 1; 002 Thm 4.1)",
    "T2": "time-invariant diagonal SSMs fail parity (Sarrof et al. 2024 Thm 13)",
    "T3": "non-negative diagonal SSMs fail on (0^k 1^m)^T, m odd (002 Lemma 4.3)",
    "T4": "stacks of S4D and Mamba layers fail parity; witness (1 0^(W-1))^T (002 Thm 4.4)",
    "T5": "k input-dependent complex diagonal layers track G iff G has an abelian subnormal series of length k (003)",
    "T6": "products of generalized Householder matrices with eigenvalues in [-1,1] (Grazzi et al.; Siems et al. 2025)",
    "P1": "one S4D layer counts mod m: A = exp(2 pi i/m) (002 Prop. 4.2)",
    "P2": "one S4D layer predicts the offset: A = exp(2 pi i/n), B = 1 - A (002 App. C)",
    "P3": "two AUSSM layers track S3 = C3 x| C2 (003)",
    "NL": "a non-linear RNN (tanh, LSTM, GRU) simulates any finite automaton (not subject to the theorems)",
}

TC0 = ("no theorem in this toolkit's sources decides it for attention; for non-solvable groups "
       "impossibility holds only under the conjecture TC0 != NC1 (Merrill et al. 2024)")


@dataclass(frozen=True)
class Verdict:
    verdict: str  # possible | impossible | open
    basis: str
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LayerInfo:
    spec: str
    props: Properties
    cls: str
    factor_domain: str | None = None  # householder: eigenvalue domain of each factor

    @property
    def domain(self) -> str:
        return self.props.eigenvalues


def _classify(spec, mixer) -> LayerInfo:
    p: Properties = mixer.properties
    if not p.linear:
        return LayerInfo(str(spec), p, "attention" if p.structure == "attention" else
                         "nonlinear" if p.structure == "nonlinear" else "other")
    if p.structure == "diagonal":
        if not p.input_dependent:
            return LayerInfo(str(spec), p, "lti")
        if p.eigenvalues in NONNEG:
            return LayerInfo(str(spec), p, "nonneg")
        if p.eigenvalues in REAL_NEG:
            return LayerInfo(str(spec), p, "real")
        if p.eigenvalues in COMPLEX:
            return LayerInfo(str(spec), p, "complex")
    if p.structure == "householder":
        # each factor I - beta k k^T has eigenvalues 1 and 1 - beta. The declared domain is the
        # product's; with one factor, or a real product domain, it is the factors' domain too.
        # Otherwise (n_h >= 2 with a complex product) the factor range is read from an explicit
        # ``factor_eigenvalues`` property or the mixer's ``neg`` switch where it declares one.
        fd = getattr(p, "factor_eigenvalues", None)
        if fd is None and (p.n_h in (None, 1) or p.eigenvalues in NONNEG | REAL_NEG):
            fd = "[-1,1]" if p.eigenvalues in REAL_NEG else "[0,1]" if p.eigenvalues in NONNEG else None
        if fd is None and isinstance(getattr(mixer, "neg", None), bool):
            fd = "[-1,1]" if mixer.neg else "[0,1]"
        return LayerInfo(str(spec), p, "householder", fd)
    if not p.input_dependent:
        return LayerInfo(str(spec), p, "lti-dense")
    return LayerInfo(str(spec), p, "dense")


def layer_infos(layers: str) -> list[LayerInfo]:
    """Build each layer of the spec (small sizes) and read its declared properties."""
    out = []
    for spec in parse_layers(layers):
        if spec.name not in MIXERS:
            from statetrack.errors import allowed
            raise allowed("mixer", spec.name, MIXERS)
        out.append(_classify(spec, build_mixer(spec, 8, 4)))
    return out


# -- rules ----------------------------------------------------------------------------------------
def _n(k: int, what: str) -> str:
    return f"{k} {what}" + ("" if k == 1 else "s")


def _possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if any(i.cls == "nonlinear" for i in infos):
        name = next(i.spec for i in infos if i.cls == "nonlinear")
        return Verdict("possible", "NL", f"{name} is a non-linear recurrence, which the theorems do not cover; "
                       f"with enough units it simulates the finite automaton of {alg.task} directly")
    complex_any = [i for i in infos if i.cls == "complex" or (i.cls == "lti" and i.domain in COMPLEX)]
    if alg.kind == "offset":
        if complex_any:
            return Verdict("possible", "P2", f"{complex_any[0].spec} can hold a constant complex eigenvalue "
                           f"exp(2 pi i/10) on the unit circle (to float precision), which counts the burst: "
                           f"h0 = 1, A = exp(2 pi i/n), B = 1 - A (002 App. C)")
        return None
    if alg.kind == "dfa" and not alg.is_group:
        return None
    if not alg.is_group:
        return None
    st = alg.h_structure()
    hname = alg.group.name if alg.all_inputs or alg.kind == "dfa" else "the group generated by the inputs"
    # parity on a fixed witness input: whatever solves parity solves it
    if alg.parity_on_fixed_input:
        sign = [i for i in infos if i.cls in ("real", "complex") or
                (i.cls == "householder" and i.factor_domain == "[-1,1]")]
        if sign:
            return Verdict("possible", "T5" if sign[0].cls != "householder" else "T6",
                           f"{sign[0].spec} tracks parity on every input (an input-dependent eigenvalue -1 "
                           f"for bit 1, +1 for bit 0), so on this fixed input too")
    if alg.fixed_input:
        lti = [i for i in infos if i.domain in COMPLEX and i.cls in ("lti", "complex")]
        if lti:
            return Verdict("possible", "P1", f"the input is fixed and the labels have period {alg.period}: "
                           f"{lti[0].spec} with a constant eigenvalue exp(2 pi i/{alg.period}) counts it "
                           f"(time invariance suffices, 002 Prop. 4.2)")
    # T6: one Householder [-1,1] layer with n_h + 1 >= the points H moves
    pts = st["moved_points"]
    cyclic = st["is_abelian"] and int(alg.group.element_orders[alg.subgroup].max()) == st["order"]
    refl = max(_reflection_length(alg.group.perm(x)) for x in alg.support)  # transpositions per input
    need = min(refl, 1 if st["order"] <= 2 else 2) if cyclic else refl
    for i in infos:
        if i.cls == "householder" and i.factor_domain == "[-1,1]" and i.props.n_h and i.props.n_h >= need:
            how = (f"{hname} is cyclic of order {st['order']}: a rotation of a plane by 2 pi/{st['order']} is a product "
                   f"of {need} reflections (Cartan-Dieudonne)" if cyclic and need < refl else
                   f"{hname} permutes {pts} points and each input is a product of at most {refl} transpositions, "
                   f"each a Householder reflection I - 2 e e^T with e = (e_i - e_j)/sqrt 2")
            return Verdict("possible", "T6", f"{how}, so {i.spec} with n_h = {i.props.n_h} and factor eigenvalues in "
                           f"[-1,1] tracks it in one layer (Siems et al. 2025; state size >= {need + 1})")
    ops = ["d" if i.cls == "complex" else "s" for i in infos if i.cls in ("complex", "real")]
    if ops and alg.descend(ops):
        kinds = {i.cls for i in infos if i.cls in ("complex", "real")}
        used = len(ops)
        if kinds == {"real"}:
            why = (f"{hname} has a subnormal series with elementary abelian 2 factors of length "
                   f"{st['elementary_2_series_length']}; {_n(used, 'real (-1,1] input-dependent diagonal layer')} "
                   f"suffice, one sign-flip layer per factor (003; T5 construction)")
        elif kinds == {"complex"}:
            dl = st["derived_length"]
            why = (f"{hname} has derived length {dl}; {_n(used, 'input-dependent complex diagonal layer')} "
                   f"suffice, one per abelian factor (T5" + (", construction P3)" if st["order"] == 6 and dl == 2 else ")"))
        else:
            why = (f"{hname} has a subnormal series whose factors match the layers (abelian for each complex "
                   f"layer, elementary abelian 2 for each real one), so the T5 construction applies layer by layer")
        return Verdict("possible", "P3" if "P3" in why else "T5", why)
    return None


def _impossible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if alg.kind in ("offset", "unknown"):
        return None
    linear = all(i.cls in ("lti", "nonneg", "real", "complex", "householder", "dense", "lti-dense") for i in infos)
    if not linear:
        return None
    diagonal = all(i.cls in ("lti", "nonneg", "real", "complex") for i in infos)
    all_nonneg = all(i.domain in NONNEG for i in infos) and all(
        i.cls != "householder" or i.factor_domain == "[0,1]" for i in infos)
    is_parity = alg.task.strip().startswith("parity")
    family = alg.task.strip().split(":")[0]
    # T1 / T3: non-negative eigenvalues everywhere
    if all_nonneg and alg.aperiodic is False:
        letter_witness = any(not _letter_aperiodic(alg, k) for k in range(len(alg.letters)))
        if diagonal or is_parity or letter_witness:
            if family == "witness" and alg.task.split(":")[1] in ("block", "alt"):
                return Verdict("impossible", "T3", "every layer has eigenvalues in [0,1] and the input is (0^k 1^m)^T "
                               "with m odd: products of non-negative diagonal transitions stay non-negative, so the "
                               "state converges per period while the parity keeps flipping (002 Lemma 4.3)")
            if family == "witness" and alg.task.split(":")[1] == "pulse":
                return Verdict("impossible", "T4", "every layer has eigenvalues in [0,1]: on the periodic input "
                               "(1 0^(W-1))^T each layer's state converges per phase (002 App. B, case 2) while "
                               "the parity alternates")
            what = ("parity" if is_parity else
                    "an input u x^n with one letter x repeated, whose label is periodic in n" if letter_witness else
                    "a periodic input u w^n whose label is periodic (002 App. B, case 2)")
            return Verdict("impossible", "T1", f"every layer has eigenvalues in [0,1], so on {what} the state "
                           f"converges in finite precision while the label keeps changing (T1 "
                           f"{'' if is_parity else 'witness generalized from 1^T'})".replace(" )", ")"))
    # T2 / T4: time-invariant diagonal and non-negative input-dependent diagonal layers
    if all(i.cls == "lti" or i.cls == "nonneg" for i in infos) and alg.aligned_witness:
        basis = "T2" if all(i.cls == "lti" for i in infos) and is_parity else "T4"
        if is_parity:
            why = ("the layers are time-invariant diagonal" if basis == "T2" else
                   "every layer is time-invariant diagonal or non-negative input-dependent diagonal")
            return Verdict("impossible", basis, f"{why}: choosing W with W q_j integer for every time-invariant "
                           f"eigenvalue phase, the input (1 0^(W-1))^T makes every layer's state periodic with "
                           f"period W, so the output cannot follow T mod 2 (002 Thm 4.4"
                           f"{'; Sarrof et al. Thm 13' if basis == 'T2' else ''})")
        return Verdict("impossible", basis, f"every layer is time-invariant diagonal or non-negative input-dependent "
                       f"diagonal, and words of every length divisible by W move the label of {alg.task}, so the "
                       f"witness u w^n of 002 Thm 4.4 (|w| a multiple of the phase alignment W) makes the state "
                       f"periodic while the label is not")
    # real layers on a repeated letter: per phase each layer's state converges up to sign, so the
    # output's period on u x^n is a power of 2 of at most 2^k (the sign-flip argument of 003)
    k = len(infos)
    if diagonal and all(i.domain in NONNEG | REAL_NEG for i in infos) and alg.letters:
        periods = [_letter_period(alg, j) for j in range(len(alg.letters))]
        bad = [p for p in periods if p & (p - 1) or p > 2 ** k]
        if bad:
            return Verdict("impossible", "T5", f"every layer is diagonal with real eigenvalues, so on an input u x^n "
                           f"with one letter repeated each layer's state converges per phase up to sign and the "
                           f"output's period is a power of 2 at most 2^{k}, but a letter of {alg.task} has label "
                           f"period {bad[0]} (003: real eigenvalues give sign flips only)")
    # T5 upper bounds: every layer diagonal, inputs the whole group
    if diagonal and alg.kind == "group" and alg.all_inputs:
        st = alg.h_structure()
        k = len(infos)
        g = alg.group.name
        if not st["is_solvable"]:
            return Verdict("impossible", "T5", f"{g} is not solvable, so it has no subnormal series with abelian "
                           f"factors and no number of diagonal layers tracks it (003; every diagonal layer is a "
                           f"special case of an input-dependent complex diagonal one)")
        if st["derived_length"] > k:
            return Verdict("impossible", "T5", f"{g} has derived length {st['derived_length']} > {k}: "
                           f"{_n(k, 'diagonal layer')} track only groups with an abelian subnormal series of length "
                           f"<= {k} (003; every diagonal layer is a special case of an input-dependent complex "
                           f"diagonal one)")
        if all(i.domain in NONNEG | REAL_NEG for i in infos):
            e2 = st["elementary_2_series_length"]
            if e2 is None or e2 > k:
                why = (f"its order {st['order']} is not a power of 2, so it has no subnormal series with "
                       f"elementary abelian 2 factors" if e2 is None else
                       f"its shortest subnormal series with elementary abelian 2 factors has length {e2} > {k}")
                return Verdict("impossible", "T5", f"every layer has real eigenvalues (sign flips only) and {g}: "
                               f"{why} (003: real diagonal layers track exactly such series)")
    return None


def _reflection_length(perm) -> int:
    """Fewest transpositions whose product is the permutation: sum over cycles of (length - 1)."""
    seen, total = set(), 0
    for s in range(len(perm)):
        if s not in seen:
            n, x = 0, s
            while x not in seen:
                seen.add(x)
                x = perm[x]
                n += 1
            total += n - 1
    return total


def _letter_period(alg: TaskAlgebra, k: int) -> int:
    from statetrack.theory.algebra import _compose

    m = alg.letters[k]
    seen, p, n = {}, m, 1
    while p not in seen:
        seen[p] = n
        p = _compose(p, m)
        n += 1
    return n - seen[p]


def _letter_aperiodic(alg: TaskAlgebra, k: int) -> bool:
    from statetrack.theory.algebra import _is_aperiodic_element

    return _is_aperiodic_element(alg.letters[k])


def _open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict:
    if alg.kind == "unknown":
        return Verdict("open", "-", f"{alg.description}; no rule of this toolkit applies")
    if any(i.cls == "attention" for i in infos):
        return Verdict("open", "-", f"{alg.task} with {', '.join(i.spec for i in infos)}: {TC0}")
    if alg.kind == "dfa" and alg.aperiodic and any(i.cls == "nonneg" for i in infos):
        return Verdict("open", "-", f"{alg.task} is star-free (aperiodic syntactic monoid), which non-negative "
                       f"diagonal SSMs recognise with enough layers (Sarrof et al. 2024); the depth this language "
                       f"needs is not determined here")
    if alg.kind == "offset":
        return Verdict("open", "-", "the offset labels depend only on the last 11 inputs (a definite, star-free "
                       "language), but no construction in the sources covers these layers (002 reports that "
                       "Mamba learns it without an explanation)")
    if any(i.cls == "householder" and i.factor_domain == "[-1,1]" for i in infos):
        return Verdict("open", "-", f"Householder layers with eigenvalues in [-1,1] recognise every regular language "
                       f"with enough layers (T6, Grazzi et al.), but no bound in the sources shows that this depth "
                       f"suffices for {alg.task}")
    if any(i.cls == "householder" and i.factor_domain is None for i in infos):
        return Verdict("open", "-", "a Householder layer's factor eigenvalue range is not declared; no rule applies")
    if alg.is_group and alg.kind == "group" and not alg.all_inputs:
        return Verdict("open", "-", f"the inputs of {alg.task} are a proper subset of the group; T5's bounds are "
                       f"stated for inputs from the whole group and no construction here covers these layers")
    return Verdict("open", "-", f"no theorem or construction in this toolkit's sources decides {alg.task} for "
                   f"{', '.join(i.spec for i in infos)}")


def oracle(layers: str, task: str) -> Verdict:
    """Verdict for a layer spec on a task string (see the module docstring)."""
    infos = layer_infos(layers)
    alg = task_algebra(task)
    if alg.is_group and alg.h_order == 1 or (alg.kind == "dfa" and alg.letters and len(alg.letters[0]) == 1):
        return Verdict("possible", "-", f"the labels of {task} never change; a constant output solves it")
    pos = _possible(infos, alg)
    if pos is not None:
        return pos
    imp = _impossible(infos, alg)
    if imp is not None:
        return imp
    return _open(infos, alg)


# -- the table ---------------------------------------------------------------------------------------
DEFAULT_TABLE_LAYERS = ("rnn", "gru", "transformer", "s4d", "s4d*2", "mamba", "mamba*2", "mamba,s4d", "negmamba",
                        "negmamba*2", "negmamba,aussm", "aussm", "aussm*2", "aussm*3", "saussm", "dcd*2",
                        "deltanet", "deltanet(neg=true)", "deltaproduct(nh=2,neg=true)",
                        "deltaproduct(nh=3,neg=true)")
DEFAULT_TABLE_TASKS = ("parity", "modcount:3", "offset", "group:C6", "group:V4", "group:C2xC4", "group:Q8",
                       "group:S3", "group:A4", "group:S4", "group:A5", "tomita:3", "tomita:5", "tomita:6")


def oracle_table(layers: list[str] | None = None, tasks: list[str] | None = None) -> list[dict]:
    """One row per (layers, task). Default layers: those of the default list whose mixers exist."""
    if layers is None:
        layers = [s for s in DEFAULT_TABLE_LAYERS if all(l.name in MIXERS for l in parse_layers(s))]
    tasks = list(tasks or DEFAULT_TABLE_TASKS)
    rows = []
    for spec in layers:
        for t in tasks:
            v = oracle(spec, t)
            rows.append({"layers": spec, "task": t, **v.as_dict()})
    return rows


def check_spec(layers: str) -> None:
    if not layers or not layers.strip():
        raise UserError("empty layer spec; give mixer names separated by commas, e.g. 'mamba,s4d'")
