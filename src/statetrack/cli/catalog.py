"""Commands of the catalogue: ``models`` (mixers), ``tasks``, ``sample`` (examples of a task), ``groups``."""

from __future__ import annotations

from statetrack.cli.args import add_json, parse_seed, parse_split
from statetrack.cli.output import emit_rows, rows_out, say, show, width
from statetrack.config import Split
from statetrack.errors import UserError


def cmd_models(a):
    from statetrack.layers import models_table

    return rows_out(
        a,
        models_table(),
        "mixers (give the names to --layers)",
        {
            "name": lambda r: r["name"],
            "input-dependent": lambda r: show(r["input_dependent"]),
            "eigenvalues": lambda r: r["eigenvalues"],
            "structure": lambda r: r["structure"],
            "n_h": lambda r: show(r["n_h"]),
            "modulus 1": lambda r: "rounding" if r["rounding"] else "exact" if r["linear"] else "-",
            "options": lambda r: ", ".join(f"{k}={show(v)}" for k, v in r["options"].items()),
            "description": lambda r: r["description"],
        },
    )


def cmd_tasks(a):
    from statetrack.tasks import list_tasks

    return rows_out(
        a,
        list_tasks(),
        "tasks (give the string to --task)",
        {
            "family": lambda r: r["family"],
            "syntax": lambda r: r["syntax"],
            "description": lambda r: r["description"],
            "parameters": lambda r: "; ".join(
                f"{p['name']}: {p.get('allowed', '')}"
                + (f" (default {p['default']})" if "default" in p else "")
                for p in r["parameters"]
            ),
        },
    )


def cmd_sample(a):
    from statetrack.tasks import label_shares, sample_json

    if a.n < 1:
        raise UserError(f"--n must be at least 1, got {a.n}")
    rows = sample_json(a.task, a.length, a.n, a.seed, a.split, a.suffix)
    shares = label_shares(a.task, a.length, a.split, SHARES_N, a.seed, a.suffix)
    if a.json:
        emit_rows([{**r, "split": a.split} for r in rows] + [{"label_shares": shares}])
        return 0
    room = width() - len("targets: ")
    for r in rows:
        shown = [str(s) for s in r.get("input_symbols", r["inputs"])]
        if "suffix_start" in r:  # the long-range draw: a bar where the suffix starts
            shown.insert(r["suffix_start"], "|")
        targets = [str(y) if m else "." for y, m in zip(r["targets"], r["mask"], strict=True)]
        ins, outs = abbreviate(shown, room), abbreviate(targets, room)
        print("inputs :", ins)
        print("targets:", outs)
        if ins != " ".join(shown) or outs != " ".join(targets):
            bar = f"; the suffix starts at position {r['suffix_start']}" if "suffix_start" in r else ""
            print(f"({len(r['inputs']):,} symbols, the middle left out{bar}; --json prints them all)")
        print()
    top = sorted(shares["shares"].items(), key=lambda kv: -kv[1])
    text = (
        ", ".join(f"{k} {100 * v:.1f}%" for k, v in top)
        if len(top) <= 12
        else (
            f"{len(top)} labels; largest {top[0][0]} {100 * top[0][1]:.1f}%, "
            f"smallest {top[-1][0]} {100 * top[-1][1]:.1f}%"
        )
    )
    exact = "" if shares["exact"] is None else f"; exact majority share {100 * shares['exact']:.1f}%"
    say(
        f"final label over {shares['n']:,} {a.split} sequences of length {a.length} ({shares['draw']}): {text}"
        f"{exact}"
    )
    if shares["note"]:
        say(f"note: {shares['note']}")
    return 0


#: sequences behind the label shares that ``sample`` prints
SHARES_N = 10_000


def abbreviate(tokens: list[str], room: int) -> str:
    """The tokens joined by spaces, or, where that is longer than ``room`` characters, as many of the first
    and of the last as fit around `` ... ``."""
    text = " ".join(tokens)
    if len(text) <= room:
        return text
    head: list[str] = []
    tail: list[str] = []
    used = len(" ... ")
    for i in range(len(tokens) // 2):
        for side, tok in ((head, tokens[i]), (tail, tokens[-1 - i])):
            if used + len(tok) + 1 > room:
                return " ".join(head) + " ... " + " ".join(reversed(tail))
            side.append(tok)
            used += len(tok) + 1
    return " ".join(head) + " ... " + " ".join(reversed(tail))


def cmd_groups(a):
    from statetrack.algebra import structure_table

    names = [n for n in a.names.split(",") if n] if a.names else None
    cols = {
        "group": "name",
        "order": "order",
        "abelian": "is_abelian",
        "solvable": "is_solvable",
        "derived series": "derived_series",
        "derived length": "derived_length",
        "+-1 series length": "elementary_2_series_length",
        "composition factors": "composition_factors",
        "exponent": "exponent",
    }
    return rows_out(
        a,
        structure_table(names),
        "group structure",
        {h: (lambda r, k=k: show(r[k])) for h, k in cols.items()},
    )


def add_commands(sub) -> None:
    q = sub.add_parser("models", help="list the mixers and their declared properties")
    add_json(q, "one object per mixer")
    q.set_defaults(fn=cmd_models)

    q = sub.add_parser("tasks", help="list the task families and their parameters")
    add_json(q, "one object per task family")
    q.set_defaults(fn=cmd_tasks)

    q = sub.add_parser("sample", help="print examples of a task and the shares of its final labels")
    q.add_argument("task", help="a task string, e.g. parity, group:S3, modcount:3, tomita:5")
    q.add_argument(
        "--split",
        type=parse_split,
        default=Split.TRAIN,
        choices=list(Split),
        help="train: the training draw; test: the test draw that eval scores; long: the long-range "
        "draw of a regular task (the last ceil(L/2) symbols leave both labels possible, the "
        "label is drawn independently of them; docs/long-range.md) (default: train)",
    )
    q.add_argument(
        "--suffix",
        type=int,
        default=None,
        metavar="K",
        help="with --split long: the suffix length k that leaves every label possible (default: ceil(L/2))",
    )
    q.add_argument("--length", type=int, default=16, help="tokens per example")
    q.add_argument("--n", type=int, default=2, help="number of examples")
    q.add_argument("--seed", type=parse_seed, default=0, help="seed of the examples")
    add_json(q, f"one object per example, then one with the final labels' shares over {SHARES_N:,} sequences")
    q.set_defaults(fn=cmd_sample)

    q = sub.add_parser("groups", help="structure of groups: order, derived series, composition factors, ...")
    q.add_argument(
        "names", nargs="?", default=None, help="comma-separated group names (default: the papers' list)"
    )
    add_json(q, "one object per group")
    q.set_defaults(fn=cmd_groups)
