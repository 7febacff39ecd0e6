"""Registration of the task suite, and the listing of the families (``list_tasks``).

    list_tasks() -> one dict per family: family, syntax, description, parameters

Light: each family's task module (numpy) is imported by its factory, when a task is built, so that
listing the families imports none of them. Examples and label shares: :mod:`statetrack.tasks.examples`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statetrack.errors import UserError
from statetrack.tasks.arguments import MAX_MODULUS, PROBES, SELECTORS, parse_int
from statetrack.tasks.registry import FAMILIES, register

if TYPE_CHECKING:
    from statetrack.tasks.base import Task

#: family -> (syntax, parameters) for list_tasks
META: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "parity": ("parity | parity:final", [{"name": "scoring", "allowed": "every (default), final"}]),
}


def _meta(family: str, syntax: str, parameters: list[dict[str, Any]]) -> None:
    META[family] = (syntax, parameters)


def _split(arg: str | None, family: str, options: tuple[str, ...]) -> tuple[str | None, str | None]:
    """'5/every' -> ('5', 'every'), checking the option."""
    if arg is None:
        return None, None
    main, sep, opt = arg.partition("/")
    if sep and opt not in options:
        raise UserError(f"unknown option {opt!r} for task family {family!r}; allowed: {', '.join(options)}")
    return main, (opt if sep else None)


# -- group --------------------------------------------------------------------------------------
@register("group", "word problem of a finite group: label = prefix product of the input elements")
def _group(arg: str | None) -> Task:
    if not arg:
        raise UserError(
            "task 'group' needs a group, e.g. group:S5 or group:S5/transpositions; "
            "allowed groups: Cn, Dn, Sn, An, Q8, V4 and products like C2xC4"
        )
    name, _, subset = arg.partition("/")
    if _ and not subset:
        raise UserError(f"empty subset in 'group:{arg}'; allowed selectors: {', '.join(SELECTORS)}")
    from statetrack.tasks.word_problem import GroupWordProblem  # heavy: numpy

    return GroupWordProblem(name, subset or None)


_meta(
    "group",
    "group:G | group:G/SEL[+SEL...] | group:G/gens=N | group:G/gens=P[+P...]",
    [
        {
            "name": "G",
            "allowed": "Cn, Zn, Dn (order 2n), Sn, An, Q8, V4, products joined by x "
            "(C2xC4, A4xC5); order <= 5040",
        },
        {"name": "SEL", "allowed": ", ".join(SELECTORS) + " (K >= 2)", "default": "all"},
    ],
)


# -- counting and Chomsky-hierarchy tasks --------------------------------------------------------
@register("modcount", "modular counting: input 1^T, label T mod m at every position")
def _modcount(arg: str | None) -> Task:
    from statetrack.tasks.modcount import ModCount  # heavy: numpy

    return ModCount(parse_int("modcount", "modulus", arg, 2, MAX_MODULUS))


_meta("modcount", "modcount:m", [{"name": "m", "allowed": f"integer 2..{MAX_MODULUS}"}])


@register("modarith", "modular arithmetic without brackets (digits and + - *), value mod m at the end")
def _modarith(arg: str | None) -> Task:
    main, opt = _split(arg, "modarith", ("equals",))
    m = parse_int("modarith", "modulus", main, 2, 1000, default=5)
    from statetrack.tasks.modarith import ModularArithmetic  # heavy: numpy

    return ModularArithmetic(m, equals=opt == "equals")


_meta(
    "modarith",
    "modarith | modarith:m | modarith:m/equals",
    [
        {"name": "m", "allowed": "integer 2..1000", "default": 5},
        {
            "name": "equals",
            "allowed": "/equals ends every string with '=', where the answer is read",
            "default": "off",
        },
    ],
)


@register("modarith-brackets", "modular arithmetic with brackets (context-free), value mod m at the end")
def _modarith_brackets(arg: str | None) -> Task:
    main, opt = _split(arg, "modarith-brackets", ("mult",))
    m = parse_int("modarith-brackets", "modulus", main, 2, 1000, default=5)
    from statetrack.tasks.modarith_brackets import ModularArithmeticBrackets  # heavy: numpy

    return ModularArithmeticBrackets(m, mult=opt == "mult")


_meta(
    "modarith-brackets",
    "modarith-brackets | modarith-brackets:m | modarith-brackets:m/mult",
    [
        {"name": "m", "allowed": "integer 2..1000", "default": 5},
        {"name": "mult", "allowed": "/mult adds * to + and -", "default": "off"},
    ],
)


@register("cycle", "cycle navigation: actions -1, 0, +1 on a cycle of m positions; final position")
def _cycle(arg: str | None) -> Task:
    main, opt = _split(arg, "cycle", ("every", "final"))
    m = parse_int("cycle", "modulus", main, 2, 1000, default=5)
    from statetrack.tasks.base import Scoring  # heavy: numpy
    from statetrack.tasks.cycle import CycleNavigation

    return CycleNavigation(m, scoring=Scoring(opt or "final"))


_meta(
    "cycle",
    "cycle | cycle:m | cycle:m/every",
    [
        {"name": "m", "allowed": "integer 2..1000", "default": 5},
        {"name": "scoring", "allowed": "final (default), every"},
    ],
)


@register("evenpairs", "even pairs: is the number of 01 and 10 pairs even (first symbol == last)")
def _evenpairs(arg: str | None) -> Task:
    from statetrack.tasks.base import Scoring  # heavy: numpy
    from statetrack.tasks.evenpairs import EvenPairs

    if arg in (None, "", "final"):
        return EvenPairs(Scoring.FINAL)
    if arg == "every":
        return EvenPairs(Scoring.EVERY)
    raise UserError(f"unknown evenpairs variant {arg!r}; allowed: every, final")


_meta("evenpairs", "evenpairs | evenpairs:every", [{"name": "scoring", "allowed": "final (default), every"}])


# -- regular languages ----------------------------------------------------------------------------
@register("dfa", "regular language of a DFA in a JSON file: accept/reject at every position")
def _dfa(arg: str | None) -> Task:
    from statetrack.tasks.dfa import DFATask, load_dfa  # heavy: numpy

    if not arg:
        raise UserError(
            "task 'dfa' needs a JSON file, e.g. dfa:my_language.json or dfa:my_language.json/balanced"
        )
    path, balanced = (arg[: -len("/balanced")], True) if arg.endswith("/balanced") else (arg, False)
    return DFATask(load_dfa(path), f"dfa:{arg}", balanced_training=balanced)


_meta(
    "dfa",
    "dfa:PATH | dfa:PATH/balanced",
    [
        {"name": "PATH", "allowed": "JSON file with states, alphabet, start, accept, transitions"},
        {
            "name": "balanced",
            "allowed": "/balanced trains on half accepted, half rejected strings (the test draw)",
            "default": "off: uniform strings",
        },
    ],
)


@register("tomita", "Tomita grammars 1-7 over {0, 1}: accept/reject at every position")
def _tomita(arg: str | None) -> Task:
    from statetrack.tasks.dfa import DFATask, tomita_dfa  # heavy: numpy

    main, opt = _split(arg, "tomita", ("balanced",))
    k = parse_int("tomita", "grammar", main, 1, 7)
    return DFATask(tomita_dfa(k), f"tomita:{k}" + ("/balanced" if opt else ""), balanced_training=bool(opt))


_meta(
    "tomita",
    "tomita:k | tomita:k/balanced",
    [
        {"name": "k", "allowed": "integer 1..7"},
        {
            "name": "balanced",
            "allowed": "/balanced trains on half accepted, half rejected strings (the test draw)",
            "default": "off: uniform strings",
        },
    ],
)


# -- offset prediction and the parity witnesses ---------------------------------------------------
@register("offset", "offset prediction (P2, Khavari2025): predict the end of each 10-step burst of 1s")
def _offset(arg: str | None) -> Task:
    from statetrack.tasks.offset import OffsetPrediction  # heavy: numpy

    if arg in (None, ""):
        return OffsetPrediction()
    if arg in PROBES:
        return OffsetPrediction(arg)
    raise UserError(f"unknown offset variant {arg!r}; allowed: {', '.join(PROBES)} (or none)")


_meta(
    "offset",
    "offset | offset:two-isis | offset:double-isi",
    [{"name": "probe", "allowed": ", ".join(PROBES), "default": "none (random ITIs)"}],
)

_WITNESS_FORMS = "ones, alt, block:K:M (K >= 1, M odd), pulse:W (W >= 1)"


@register("witness", "the parity proofs' fixed witness inputs; label = prefix parity")
def _witness(arg: str | None) -> Task:
    from statetrack.tasks.witness_inputs import Witness  # heavy: numpy

    parts = (arg or "").split(":")
    kind, rest = parts[0], parts[1:]
    if kind == "ones" and not rest:
        return Witness("ones", [1])
    if kind == "alt" and not rest:
        return Witness("alt", [0, 1])
    if kind == "block" and len(rest) == 2:
        k = parse_int("witness", "block K", rest[0], 1, 100000)
        m = parse_int("witness", "block M", rest[1], 1, 100000)
        if m % 2 == 0:
            raise UserError(f"bad block M {rest[1]!r} for task family 'witness'; allowed: an odd integer")
        return Witness("block", [0] * k + [1] * m, (k, m))
    if kind == "pulse" and len(rest) == 1:
        w = parse_int("witness", "pulse W", rest[0], 1, 100000)
        return Witness("pulse", [1] + [0] * (w - 1), (w,))
    raise UserError(f"unknown witness {arg!r}; allowed: {_WITNESS_FORMS}")


_meta(
    "witness",
    "witness:ones | witness:alt | witness:block:K:M | witness:pulse:W",
    [{"name": "form", "allowed": _WITNESS_FORMS}],
)


# -- language modelling ---------------------------------------------------------------------------
@register(
    "lm",
    "language modelling on a corpus (next-token loss, bits per byte): lm:stdlib, lm:synthetic, lm:traces",
)
def _lm(arg: str | None) -> Task:
    from statetrack.tasks.corpus_tasks import LMTask, parse_lm_arg  # heavy: numpy, the corpus

    return LMTask(*parse_lm_arg(arg))


_meta(
    "lm",
    "lm:CORPUS | lm:CORPUS/bpe | lm:CORPUS/bpe=N | lm:CORPUS/seed=S",
    [
        {
            "name": "CORPUS",
            "allowed": "stdlib (this Python's standard library), synthetic (programs whose answers need "
            "far state), traces (permutation composition as REPL sessions)",
        },
        {
            "name": "tokens",
            "allowed": "bytes (default, 259 ids), bpe / bpe=N (needs tokenizers; N default 4096)",
        },
        {"name": "seed", "allowed": "the split's seed, an integer >= 0", "default": 0},
    ],
)


# -- the listing -----------------------------------------------------------------------------------
def list_tasks() -> list[dict]:
    """One dict per registered family: family, syntax, description, parameters."""
    out = []
    for family, (_, description) in FAMILIES.items():
        syntax, parameters = META.get(family, (family, []))
        out.append({"family": family, "syntax": syntax, "description": description, "parameters": parameters})
    return out
