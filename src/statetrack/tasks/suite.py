"""Registration of the task suite, and the listing / sampling API used by the CLI.

    list_tasks()                           -> one dict per family: family, syntax, description, parameters
    sample_json(task, length, n, seed, split, suffix) -> one JSON-ready dict per example: inputs, targets,
                                              mask (+ input_symbols where the task names its tokens,
                                               + input_perms / target_perms for group tasks)
    label_shares(task, length, split, n, seed, suffix) -> the share of each final scored label over n
                                              sequences, and the exact distribution where known

``split`` is "train" (the training draw, ``Task.sample_batch``), "test" (the test draw that
``evaluate`` scores, ``Task.test_batch``) or "long" (the long-range draw of a regular task, with a
suffix of ``suffix`` symbols, default ceil(L/2): ``statetrack.tasks.draws``).
"""
from __future__ import annotations

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks import draws
from statetrack.tasks.cycle import CycleNavigation
from statetrack.tasks.dfa import DFATask, load_dfa, tomita_dfa
from statetrack.tasks.evenpairs import EvenPairs
from statetrack.tasks.group import SELECTORS, GroupWordProblem
from statetrack.tasks.lm import LMTask, parse_lm_arg
from statetrack.tasks.modarith import ModularArithmetic
from statetrack.tasks.modarith_brackets import ModularArithmeticBrackets
from statetrack.tasks.modcount import MAX_MODULUS, ModCount
from statetrack.tasks.offset import PROBES, OffsetPrediction
from statetrack.tasks.registry import FAMILIES, get_task, register
from statetrack.tasks.streaming import check_length, parse_int
from statetrack.tasks.witness import Witness

#: family -> (syntax, parameters) for list_tasks
META: dict[str, tuple[str, list[dict]]] = {
    "parity": ("parity | parity:final", [
        {"name": "scoring", "allowed": "every (default), final"}]),
}


def _meta(family: str, syntax: str, parameters: list[dict]):
    META[family] = (syntax, parameters)


def _split(arg: str | None, family: str, options: tuple[str, ...]) -> tuple[str | None, str | None]:
    """'5/every' -> ('5', 'every'), checking the option."""
    if arg is None:
        return None, None
    main, sep, opt = arg.partition("/")
    if sep and opt not in options:
        raise UserError(f"unknown option {opt!r} for task family {family!r}; allowed: "
                        f"{', '.join(options)}")
    return main, (opt if sep else None)


# -- group --------------------------------------------------------------------------------------
@register("group", "word problem of a finite group: label = prefix product of the input elements")
def _group(arg):
    if not arg:
        raise UserError("task 'group' needs a group, e.g. group:S5 or group:S5/transpositions; "
                        "allowed groups: Cn, Dn, Sn, An, Q8, V4 and products like C2xC4")
    name, _, subset = arg.partition("/")
    if _ and not subset:
        raise UserError(f"empty subset in 'group:{arg}'; allowed selectors: {', '.join(SELECTORS)}")
    return GroupWordProblem(name, subset or None)


_meta("group", "group:G | group:G/SEL[+SEL...]", [
    {"name": "G", "allowed": "Cn, Zn, Dn (order 2n), Sn, An, Q8, V4, products joined by x "
                             "(C2xC4, A4xC5); order <= 5040"},
    {"name": "SEL", "allowed": ", ".join(SELECTORS) + " (K >= 2)", "default": "all"}])


# -- counting and Chomsky-hierarchy tasks --------------------------------------------------------
@register("modcount", "modular counting: input 1^T, label T mod m at every position")
def _modcount(arg):
    return ModCount(parse_int("modcount", "modulus", arg, 2, MAX_MODULUS))


_meta("modcount", "modcount:m", [{"name": "m", "allowed": f"integer 2..{MAX_MODULUS}"}])


@register("modarith", "modular arithmetic without brackets (digits and + - *), value mod m at the end")
def _modarith(arg):
    return ModularArithmetic(parse_int("modarith", "modulus", arg, 2, 1000, default=5))


_meta("modarith", "modarith | modarith:m", [{"name": "m", "allowed": "integer 2..1000", "default": 5}])


@register("modarith-brackets", "modular arithmetic with brackets (context-free), value mod m at the end")
def _modarith_brackets(arg):
    main, opt = _split(arg, "modarith-brackets", ("mult",))
    m = parse_int("modarith-brackets", "modulus", main, 2, 1000, default=5)
    return ModularArithmeticBrackets(m, mult=opt == "mult")


_meta("modarith-brackets", "modarith-brackets | modarith-brackets:m | modarith-brackets:m/mult", [
    {"name": "m", "allowed": "integer 2..1000", "default": 5},
    {"name": "mult", "allowed": "/mult adds * to + and -", "default": "off"}])


@register("cycle", "cycle navigation: actions -1, 0, +1 on a cycle of m positions; final position")
def _cycle(arg):
    main, opt = _split(arg, "cycle", ("every", "final"))
    m = parse_int("cycle", "modulus", main, 2, 1000, default=5)
    return CycleNavigation(m, scoring=opt or "final")


_meta("cycle", "cycle | cycle:m | cycle:m/every", [
    {"name": "m", "allowed": "integer 2..1000", "default": 5},
    {"name": "scoring", "allowed": "final (default), every"}])


@register("evenpairs", "even pairs: is the number of 01 and 10 pairs even (first symbol == last)")
def _evenpairs(arg):
    if arg in (None, "", "final"):
        return EvenPairs("final")
    if arg == "every":
        return EvenPairs("every")
    raise UserError(f"unknown evenpairs variant {arg!r}; allowed: every, final")


_meta("evenpairs", "evenpairs | evenpairs:every", [
    {"name": "scoring", "allowed": "final (default), every"}])


# -- regular languages ----------------------------------------------------------------------------
@register("dfa", "regular language of a DFA in a JSON file: accept/reject at every position")
def _dfa(arg):
    if not arg:
        raise UserError("task 'dfa' needs a JSON file, e.g. dfa:my_language.json or dfa:my_language.json/balanced")
    path, balanced = (arg[:-len("/balanced")], True) if arg.endswith("/balanced") else (arg, False)
    return DFATask(load_dfa(path), f"dfa:{arg}", balanced_training=balanced)


_meta("dfa", "dfa:PATH | dfa:PATH/balanced", [
    {"name": "PATH", "allowed": "JSON file with states, alphabet, start, accept, transitions"},
    {"name": "balanced", "allowed": "/balanced trains on half accepted, half rejected strings (the test draw)",
     "default": "off: uniform strings"}])


@register("tomita", "Tomita grammars 1-7 over {0, 1}: accept/reject at every position")
def _tomita(arg):
    main, opt = _split(arg, "tomita", ("balanced",))
    k = parse_int("tomita", "grammar", main, 1, 7)
    return DFATask(tomita_dfa(k), f"tomita:{k}" + ("/balanced" if opt else ""), balanced_training=bool(opt))


_meta("tomita", "tomita:k | tomita:k/balanced", [
    {"name": "k", "allowed": "integer 1..7"},
    {"name": "balanced", "allowed": "/balanced trains on half accepted, half rejected strings (the test draw)",
     "default": "off: uniform strings"}])


# -- offset prediction and the parity witnesses ---------------------------------------------------
@register("offset", "offset prediction (P2, Khavari2025): predict the end of each 10-step burst of 1s")
def _offset(arg):
    if arg in (None, ""):
        return OffsetPrediction()
    if arg in PROBES:
        return OffsetPrediction(arg)
    raise UserError(f"unknown offset variant {arg!r}; allowed: {', '.join(PROBES)} (or none)")


_meta("offset", "offset | offset:two-isis | offset:double-isi", [
    {"name": "probe", "allowed": ", ".join(PROBES), "default": "none (random ITIs)"}])

_WITNESS_FORMS = "ones, alt, block:K:M (K >= 1, M odd), pulse:W (W >= 1)"


@register("witness", "the parity proofs' fixed witness inputs; label = prefix parity")
def _witness(arg):
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


_meta("witness", "witness:ones | witness:alt | witness:block:K:M | witness:pulse:W", [
    {"name": "form", "allowed": _WITNESS_FORMS}])


# -- language modelling ---------------------------------------------------------------------------
@register("lm", "language modelling on a corpus (next-token loss, bits per byte): lm:stdlib, lm:synthetic, lm:traces")
def _lm(arg):
    return LMTask(*parse_lm_arg(arg))


_meta("lm", "lm:CORPUS | lm:CORPUS/bpe | lm:CORPUS/bpe=N | lm:CORPUS/seed=S", [
    {"name": "CORPUS", "allowed": "stdlib (this Python's standard library), synthetic (programs whose answers need "
                                  "far state), traces (permutation composition as REPL sessions)"},
    {"name": "tokens", "allowed": "bytes (default, 259 ids), bpe / bpe=N (needs tokenizers; N default 4096)"},
    {"name": "seed", "allowed": "the split's seed, an integer >= 0", "default": 0}])


# -- the CLI API ----------------------------------------------------------------------------------
def list_tasks() -> list[dict]:
    """One dict per registered family: family, syntax, description, parameters."""
    out = []
    for family, (_, description) in FAMILIES.items():
        syntax, parameters = META.get(family, (family, []))
        out.append({"family": family, "syntax": syntax, "description": description,
                    "parameters": parameters})
    return out


SPLITS = draws.SPLITS


def _draw_args(task_name: str, length: int, n: int, seed, split: str, suffix: int | None = None):
    """Checked arguments of a draw: (task, length, rng); a UserError names a bad one, or a length at
    which the split's draw has no sequences."""
    task = get_task(task_name)
    length = check_length(length)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise UserError(f"number of examples must be a positive integer, got {n!r}")
    draws.check_split(split)
    if split == "long":
        draws.long_plan(task, length, suffix)  # a task that is not regular: one line naming the regular ones
    elif suffix is not None:
        raise UserError(f"a suffix length is an option of the long-range draw; give --split long with it "
                        f"(got split {split!r})")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise UserError(f"seed must be a non-negative integer, got {seed!r}") from None
    reason = draws.unavailable(task, split, length, suffix)
    if reason:
        what = "test set" if split == "test" else "long-range test set"
        raise UserError(f"{task.name} has no {what} of length {length}: {reason}; evaluation reports "
                        "this length as not scored (n/a)")
    return task, length, rng


def sample_json(task_name: str, length: int, n: int = 1, seed: int = 0, split: str = "train",
                suffix: int | None = None) -> list[dict]:
    """``n`` examples of ``task_name`` at ``length`` from the ``split`` draw, as JSON-ready dicts (same
    seed, same examples). The long-range draw's examples also say where their suffix starts
    (``suffix_start``, a position counted from 0)."""
    task, length, rng = _draw_args(task_name, length, n, seed, split, suffix)
    b = draws.batch(task, split, rng, int(n), length, suffix)
    start = length - draws.long_plan(task, length, suffix).suffix if split == "long" else None
    symbols = getattr(task, "symbols", None)
    out = []
    for i in range(int(n)):
        ex = {"inputs": b.inputs[i].tolist(), "targets": b.targets[i].tolist(),
              "mask": b.mask[i].tolist()}
        if symbols is not None:
            ex["input_symbols"] = [symbols[v] for v in ex["inputs"]]
        if isinstance(task, LMTask):
            ex["text"] = task.tokenizer.decode(b.inputs[i])
        if isinstance(task, GroupWordProblem):
            ex["input_perms"] = [task.group.perm(v) for v in ex["inputs"]]
            ex["target_perms"] = [task.group.perm(v) for v in ex["targets"]]
        if start is not None:
            ex["suffix_start"] = start
        out.append(ex)
    return out


def label_shares(task_name: str, length: int, split: str = "test", n: int = 10_000, seed: int = 0,
                 suffix: int | None = None) -> dict:
    """The share of each final scored label (the one ``accuracy`` scores) over ``n`` sequences of the
    ``split`` draw at ``length``: {task, split, length, n, draw, shares: {label: share}, majority,
    exact}, where ``exact`` is the majority share of the exact distribution where the task can compute
    it (the chance evaluation stores), else None. Labels are class ids, or names where the task has them
    (``label_names``). Drawn in streamed batches of 1,000, so memory does not grow with ``n`` or
    ``length``."""
    task, length, rng = _draw_args(task_name, length, n, seed, split, suffix)
    counts = draws.final_label_counts(task, split, length, int(n), rng, suffix)
    names = getattr(task, "label_names", None) or [str(c) for c in range(task.num_classes)]
    total = max(int(counts.sum()), 1)
    shares = {names[c]: float(counts[c] / total) for c in range(task.num_classes) if counts[c]}
    exact = draws.exact_label_distribution(task, split, length, suffix)
    draw = {"train": "the training draw", "test": task.test_draw, "long": LONG_DRAW}[split]
    return {"task": task.name, "split": split, "length": length, "n": int(counts.sum()), "draw": draw,
            "shares": shares, "majority": float(counts.max() / total),
            "exact": None if exact is None else float(exact.max())}


LONG_DRAW = ("the long-range draw: the last k symbols (k = ceil(L/2) unless given) leave every label possible, "
             "the label is drawn independently of them, the prefix uniform among those giving that label")
