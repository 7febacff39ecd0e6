# long: eight commands of the theory area and their argparse table
"""Commands of the theory area: ``oracle``, ``construct``, ``counterexample``, ``spectrum``."""

from __future__ import annotations

import json
from collections.abc import Callable

from statetrack.cli.args import add_checkpoint, add_json, add_max_params, checkpoint_path, parse_seed
from statetrack.cli.output import Col, print_horizons, print_table, print_verified, rows_out, say
from statetrack.errors import UserError


def cmd_oracle(a):
    from statetrack.theory.verdicts import Decision, oracle, oracle_table

    if a.table:
        layers = [s.strip() for s in a.layers.split(";") if s.strip()] if a.layers else None
        tasks = [t.strip() for t in a.tasks.split(",") if t.strip()] if a.tasks else None
        rows = oracle_table(layers, tasks)
        if a.json:
            for r in rows:
                print(json.dumps(r))
            return 0
        specs = list(dict.fromkeys(r["layers"] for r in rows))
        tks = list(dict.fromkeys(r["task"] for r in rows))
        cell = {(r["layers"], r["task"]): r for r in rows}
        word = {Decision.POSSIBLE: "yes", Decision.IMPOSSIBLE: "no", Decision.OPEN: "open"}
        colour = {Decision.POSSIBLE: "green", Decision.IMPOSSIBLE: "red", Decision.OPEN: "yellow"}

        def verdict_of(tk: str) -> Callable[[str], str]:
            return lambda s: (
                f"{word[cell[(s, tk)]['verdict']]} {cell[(s, tk)]['basis']}"
                + (f" [{cell[(s, tk)]['condition']}]" if cell[(s, tk)]["condition"] else "")
            )

        cols = [Col("layers", str)] + [Col(tk, verdict_of(tk), "center") for tk in tks]
        print_table(
            "oracle: can the stack solve the task at every length? (verdict, basis)",
            cols,
            specs,
            caption="yes = possible, no = impossible; basis: a result of docs/science.md "
            "(NL = non-linear RNN); [rounding]: holds in float32 through rounding only",
            styles=lambda r, i: colour[cell[(specs[r], tks[i - 1])]["verdict"]] if i else None,
        )
        return 0
    if not a.layers or not a.task:
        raise UserError("oracle needs --layers SPEC and --task TASK (or --table)")
    v = oracle(a.layers, a.task)
    if a.json:
        print(json.dumps({"layers": a.layers, "task": a.task, **v.as_dict()}))
    else:
        say(f"{v.verdict} ({v.qualified_basis}): {v.reason}")
    return 0


def cmd_construct(a):
    from statetrack.constructions import available, save

    if a.list:
        return rows_out(
            a,
            available(),
            "constructions (statetrack construct NAME --out PATH)",
            {
                "name": lambda r: r["name"],
                "basis": lambda r: r["basis"],
                "description": lambda r: r["description"],
                "available": lambda r: "yes" if r["available"] else f"needs {r['needs']}",
            },
        )
    if not a.name or not a.out:
        raise UserError("construct needs NAME and --out PATH (or --list)")
    c = save(a.name, a.out)
    info = {
        "construction": c.name,
        "basis": c.basis,
        "checkpoint": str(a.out),
        "task": c.config.task,
        "layers": c.config.model.layers,
        "d_model": c.config.model.d_model,
        "d_state": c.config.model.d_state,
        "norm": c.config.model.norm,
        "notes": c.notes,
    }
    if a.json:
        print(json.dumps(info))
    else:
        say(
            f"wrote {a.out}: {c.name} ({c.basis}) = {c.config.model.layers} on {c.config.task} "
            f"(d_model {c.config.model.d_model}, d_state {c.config.model.d_state}, norm {c.config.model.norm}); "
            f"check it with: statetrack eval {a.out} --lengths 100,1000,10000"
        )
    return 0


def cmd_counterexample(a):
    from statetrack.analysis.counterexamples import counterexample

    a.checkpoint = checkpoint_path(a)
    r = counterexample(a.checkpoint, task=a.task, max_len=a.max_len, tol=a.tol, max_w=a.max_w, seed=a.seed)
    if a.json:
        print(json.dumps(r))
        return 0
    say(r["message"])
    if r.get("phase_alignment"):
        pa = r["phase_alignment"]
        head = (
            f"W = {pa['W']}"
            if pa["within_tol"]
            else f"no W <= {a.max_w} within tol {r['tol']}; the best is W = {pa['W']}"
        )
        say(
            f"  {head}: {pa['modes']} time-invariant mode(s) with |lambda|^{r['max_len']} above the decay "
            f"floor, max |W q - round(W q)| = {pa['max_dist']:.3g} (tol {r['tol']})"
        )
    return 0


def cmd_spectrum(a):
    from pathlib import Path

    from statetrack.analysis.spectra import channel_text, cycle_text, spectrum
    from statetrack.files import check_writable, inside
    from statetrack.report.plots import FORMATS, spectrum_plot

    a.checkpoint = checkpoint_path(a)
    if a.out and a.out.rpartition(".")[2].lower() not in FORMATS:
        raise UserError(
            f"bad --out {a.out!r}: the figure's format comes from its suffix; allowed: "
            f"{', '.join('.' + f for f in FORMATS)}"
        )
    if a.out:  # an unwritable --out fails now, not after the work
        check_writable(Path(a.out).parent, f"cannot write the plot {a.out!r}")
    r = spectrum(a.checkpoint, samples=a.samples, length=a.length, seed=a.seed)
    if a.out:
        with inside(Path(a.out).absolute().parent):  # a link at --out is refused, not written through
            spectrum_plot(r, a.out)
    if a.json:
        slim = {
            **r,
            "layers": [
                {k: v for k, v in l.items() if k not in ("samples", "sample_tokens")} for l in r["layers"]
            ],
        }
        print(json.dumps(slim))
        return 0
    for l in r["layers"]:
        if "min_real" not in l:
            say(f"layer {l['layer']} ({l['mixer']}): {l['no_transition']}")
            continue
        say(
            f"layer {l['layer']} ({l['mixer']}): smallest real part {l['min_real']:.4g}, modulus in "
            f"[{l['min_modulus']:.4g}, {l['max_modulus']:.4g}], {l['n_angles']} distinct angle(s) (deg): "
            f"{', '.join(map(str, l['angles_deg'][:16]))}{' ...' if l['n_angles'] > 16 else ''}"
        )
        if l.get("per_token_min_real"):
            say(
                "  per token (layer input = its embedding): smallest real part "
                + ", ".join(f"token {t}: {v:.4g}" for t, v in l["per_token_min_real"].items())
            )
        if l.get("per_token_cycle"):
            say(
                "  per token, the eigenvalue nearest a root of unity of the order the token has on the "
                "task's states: " + cycle_text(l["per_token_cycle"])
            )
        if l.get("per_channel_cycle"):
            say(
                "  one channel for every symbol, along whole sequences: "
                + channel_text(l["per_channel_cycle"])
            )
    say(r["note"] + (f"; plot: {a.out}" if a.out else ""))
    return 0


def _regular(task):
    auto = task.automaton()
    if auto is None:
        raise UserError(
            f"{task.name} has no witness families: its labels are not computed by a finite "
            "automaton here; allowed: the regular tasks (dfa:, tomita:, parity, evenpairs, cycle, "
            "group, modcount, modarith)"
        )
    return auto


def cmd_witnesses(a):
    from statetrack.tasks import get_task
    from statetrack.tasks.families import witness_pairs

    if a.limit < 1:
        raise UserError(f"--limit must be at least 1, got {a.limit}")
    task = get_task(a.task)
    w = witness_pairs(_regular(task))
    rows = [{**p.as_dict(w.auto), "task": task.name} for p in w.pairs]
    for r in rows:
        r["families"] = r["families"][: a.limit]
    if a.json:
        return rows_out(a, rows, "", [])
    with_family = sum(1 for p in w.pairs if p.families)
    by_reason: dict[str, int] = {}
    for p in w.pairs:
        if p.reason:
            by_reason[p.reason.split(":")[0]] = by_reason.get(p.reason.split(":")[0], 0) + 1
    caption = (
        f"{w.auto.n_states} states in the minimal automaton, {w.pairs_total} pairs"
        + (f" (the first {len(w.pairs)} by access string tried, the cap)" if w.pairs_skipped else "")
        + f"; {with_family} with a family ({len(w.families)} families in all, loops of up to {w.max_word} "
        "symbols)"
        + "".join(f"; {n} {why}" for why, n in by_reason.items())
        + ". --json lists every pair with its families or the reason it has none."
    )
    if not with_family:
        say(
            f"{task.name} has no witness family: every pair of states is merged by a short enough repeated "
            "word, so the label is decided by a bounded window (a window language)"
        )
        say(caption)
        return 0
    print_table(
        f"witness families of {task.name}, per pair of states: two strings per family, the same last "
        "n|W|+|v| symbols, labels that differ and do not depend on n",
        [
            Col("pair of states", lambda r: " | ".join(r["pair"])),
            Col("reached by", lambda r: " | ".join(x or "(empty)" for x in r["access"]), optional=True),
            Col("loops", lambda r: str(r["loops"]), "right"),
            Col("first family", lambda r: r["families"][0]["family"] if r["families"] else "-"),
            Col(
                "labels",
                lambda r: " / ".join(r["families"][0]["label_names"]) if r["families"] else r["reason"],
            ),
        ],
        rows,
        caption=caption,
    )
    return 0


def _checkpoint_on_task(a):
    """The checkpoint the arguments name, its config and the regular task it is read on (--task or its own)."""
    from statetrack.tasks import get_task
    from statetrack.training.checkpoint import check_task_fits, load_checkpoint

    a.checkpoint = checkpoint_path(a)
    model, cfg, task, _ = load_checkpoint(a.checkpoint, max_params=a.max_params)
    if a.task:
        task = get_task(a.task)
        check_task_fits(model, task, a.checkpoint, cfg.task)
    _regular(task)
    return model, cfg, task


def cmd_horizon(a):
    from statetrack.tasks.families import MAX_FAMILIES
    from statetrack.training.verify import BUDGET, horizons_record

    a.max_families = MAX_FAMILIES if a.max_families is None else a.max_families
    a.budget = BUDGET if a.budget is None else a.budget
    if a.max_len < 1 or a.max_families < 1 or a.budget < 1:
        raise UserError(
            f"--max-len, --max-families and --budget must be positive, got {a.max_len}, {a.max_families} "
            f"and {a.budget}"
        )
    model, cfg, task = _checkpoint_on_task(a)
    h = horizons_record(
        model, task, a.max_len, budget=a.budget, max_families=a.max_families, keep_families=a.json
    )
    if a.json:
        print(
            json.dumps({"checkpoint": str(a.checkpoint), "task": task.name, "layers": cfg.model.layers, **h})
        )
        return 0
    if not h["pairs"]:
        say(f"{task.name} has no witness family (a window language): the families measure nothing")
        print_verified(h["verified"], rows=a.rows)
        return 0
    print_horizons(
        h,
        title=f"{a.checkpoint}: {cfg.model.layers} on {task.name}, every pair of states up to "
        f"length {a.max_len}",
        rows=a.rows,
    )
    return 0


def cmd_extract(a):
    from statetrack.training.extract import BUDGET, extract

    a.budget = BUDGET if a.budget is None else a.budget
    for name in ("budget", "depth", "prefix_len"):
        v = getattr(a, name)
        if v is not None and v < 1:
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {v}")
    model, cfg, task = _checkpoint_on_task(a)
    ex = extract(model, task, budget=a.budget, depth=a.depth, prefix_len=a.prefix_len)
    d = ex.as_dict()
    if a.json:
        print(
            json.dumps({"checkpoint": str(a.checkpoint), "task": task.name, "layers": cfg.model.layers, **d})
        )
        return 0
    print_extracted(d, f"{a.checkpoint}: {cfg.model.layers} on {task.name}", ex.symbols)
    return 0


def _next_cell(i: int) -> Callable[[dict], str]:
    return lambda r: r["next"][i] or "-"


def print_extracted(d: dict, what: str, symbols) -> None:
    """The extracted automaton as a table, then how it differs from the task's minimal automaton."""
    print_table(
        f"{what}: the automaton it computes on every string up to {d['depth']} symbols "
        f"(states: prefixes of up to {d['prefix_len']} with equal answers on every suffix)",
        [
            Col("state (shortest prefix)", lambda r: r["name"]),
            Col("answer", lambda r: str(r["answer"]), "right"),
            Col(
                "task states (prefixes)",
                lambda r: ", ".join(f"{k} ({v})" for k, v in r["task_states"].items()),
            ),
            *(Col(f"on {sym}", _next_cell(i)) for i, sym in enumerate(symbols) if len(symbols) <= 6),
        ],
        d["states"],
    )
    lines = []
    for sp in d["splits"]:
        parts = "; ".join(f"{p['state']} ({', '.join(p['prefixes'])})" for p in sp["parts"])
        lines.append(f"task state {sp['task_state']} is split: {parts}")
    for m in d["merges"]:
        lines.append(f"{m['state']} merges task states {', '.join(m['task_states'])}")
    if d["unresolved"]:
        lines.append(f"{d['unresolved']} transitions unresolved (beyond the table's prefixes)")
    lines.append(
        "the task's minimal automaton, state for state"
        if d["equals_task"]
        else f"shortest word where they disagree: {d['disagreement']}"
        if d["disagreement"] is not None
        else "no word where they disagree within the table"
    )
    for line in lines:
        say(line)


def cmd_predict_horizon(a):
    from statetrack.training.predict_horizon import MAX_FAMILIES, SAMPLES, predict_horizon

    a.samples = SAMPLES if a.samples is None else a.samples
    a.max_families = MAX_FAMILIES if a.max_families is None else a.max_families
    if a.samples < 2 or a.max_families < 1:
        raise UserError(
            f"--samples must be at least 2 and --max-families at least 1, got {a.samples} and "
            f"{a.max_families}"
        )
    model, cfg, task = _checkpoint_on_task(a)
    train_max = a.train_max_len or cfg.train_max_len
    p = predict_horizon(model, task, train_max, a.samples, a.max_families, a.seed)
    if a.json:
        print(
            json.dumps(
                {
                    "checkpoint": str(a.checkpoint),
                    "task": task.name,
                    "layers": cfg.model.layers,
                    "train_max_len": train_max,
                    **p,
                }
            )
        )
        return 0

    _print_prediction(p, f"{a.checkpoint}: {cfg.model.layers} on {task.name}", train_max, a.rows)
    return 0


def _print_prediction(p: dict, what: str, train_max: int, limit: int) -> None:
    """A predicted failure horizon as a table: per pair of states (the ``limit`` first to fail), the
    predicted horizon, its interval, the read-out's separation and spread, and the witness family."""

    def num(v):
        return "none" if v is None else str(v)

    rows = sorted(p["pairs"], key=lambda r: (r["horizon"] is None, r["horizon"] or 0))[:limit]
    verdict = (
        f"predicted failure horizon {p['horizon']} [{num(p['low'])}-{num(p['high'])}]: first the pair "
        f"{' and '.join(p['pair'])}" + (" (already wrong within the training lengths)" if p["seen"] else "")
        if p["horizon"] is not None
        else "no predicted failure: on every pair the read-out's margin stays positive as it is extrapolated"
    )
    print_table(
        f"{what}, predicted from its read-out on strings up to length {train_max}",
        [
            Col("pair of states", lambda r: " | ".join(r["pair"])),
            Col("predicted", lambda r: num(r["horizon"]) if r["reason"] is None else "-", "right"),
            Col(
                "interval",
                lambda r: f"{num(r['low'])}-{num(r['high'])}" if r["reason"] is None else "-",
                "right",
            ),
            Col(
                "separation",
                lambda r: f"{r['separation']:.2f}" if r["reason"] is None else "-",
                "right",
                optional=True,
            ),
            Col(
                "spread",
                lambda r: f"{r['spread']:.2f}" if r["reason"] is None else "-",
                "right",
                optional=True,
            ),
            Col("family", lambda r: r["family"] if r["reason"] is None else r["reason"], optional=True),
        ],
        rows,
        caption=f"{verdict}; {p['families_predicted']} witness families of {len(p['pairs'])} of {p['pairs_total']} "
        "pairs of states (round robin over the pairs); per pair the family predicted to fail first; "
        "interval: 10th-90th percentile over resamplings of the "
        "strings; separation and spread: the between-class margin sum and within-class deviation of the "
        "read-out at the longest training length",
    )


# long: an argparse table, one block per command, read top to bottom
def add_commands(sub) -> None:
    q = sub.add_parser("oracle", help="can a stack of mixers solve a task at every length? (theorems T1-T6)")
    q.add_argument("--layers", default=None, help="layer spec; with --table: specs separated by ';'")
    q.add_argument("--task", default=None, help="a task string (statetrack tasks)")
    q.add_argument("--table", action="store_true", help="a table of mixers x tasks")
    q.add_argument("--tasks", default=None, help="with --table: comma-separated task strings")
    add_json(q, "one object; with --table, one per (layers, task)")
    q.set_defaults(fn=cmd_oracle)

    q = sub.add_parser("construct", help="write a checkpoint whose weights are set by hand from a proof")
    q.add_argument(
        "name", nargs="?", default=None, help="construction name (see --list), e.g. parity-negmamba"
    )
    q.add_argument("--out", default=None, help="checkpoint path (.safetensors)")
    q.add_argument("--list", action="store_true", help="list the constructions")
    add_json(q, "one object; with --list, one per construction")
    q.set_defaults(fn=cmd_construct)

    q = sub.add_parser("counterexample", help="build the proof's failing input for a checkpoint and run it")
    add_checkpoint(q)
    q.add_argument(
        "--task",
        default="parity",
        help="the task whose failing input is built: parity (the proofs' "
        "witnesses) or another regular task (its witness families)",
    )
    q.add_argument("--max-len", type=int, default=10_000, help="longest input built")
    q.add_argument(
        "--tol", type=float, default=0.01, help="phase alignment tolerance for time-invariant modes"
    )
    q.add_argument("--max-w", type=int, default=10_000, help="largest period W searched for phase alignment")
    q.add_argument("--seed", type=parse_seed, default=0, help="seed of the inputs")
    add_json(q, "one object")
    q.set_defaults(fn=cmd_counterexample)

    q = sub.add_parser(
        "witnesses",
        help="pumped string pairs u1 W^n v / u2 W^n v that a bounded window cannot "
        "tell apart, for a regular task",
    )
    q.add_argument("task", help="a regular task string, e.g. tomita:3, parity, dfa:my.json")
    q.add_argument("--limit", type=int, default=4, help="most families listed per pair of states")
    add_json(q, "one object per pair of states: its families, or why it has none")
    q.set_defaults(fn=cmd_witnesses)

    q = sub.add_parser(
        "horizon",
        help="a checkpoint's failure horizon: every string up to a length, a margin-guided search and the "
        "witness families of every pair of states of its task",
    )
    add_checkpoint(q)
    q.add_argument("--task", default=None, help="a regular task (default: the one it was trained on)")
    q.add_argument("--max-len", type=int, default=1000, help="longest string tested")
    q.add_argument(
        "--max-families",
        type=int,
        default=None,
        help="most families tested, round robin over the pairs (default: the cap of docs/long-range.md)",
    )
    q.add_argument(
        "--rows", type=int, default=20, help="pairs of states shown, those broken first first (default 20)"
    )
    q.add_argument(
        "--budget",
        type=int,
        default=None,
        help="prefix-tree nodes of the exhaustive check: every string up to the longest length that fits "
        "(default: verify.BUDGET, 2,400,000: 20 symbols of two letters, 13 of three)",
    )
    add_max_params(q)
    add_json(q, "one object: the horizon, what it rests on, one entry per pair of states and one per family")
    q.set_defaults(fn=cmd_horizon)

    q = sub.add_parser(
        "predict-horizon",
        help="a checkpoint's failure horizon predicted from its read-out on "
        "training-length strings, per pair of states of its task",
    )
    add_checkpoint(q)
    q.add_argument("--task", default=None, help="a regular task (default: the one it was trained on)")
    q.add_argument(
        "--train-max-len",
        type=int,
        default=None,
        help="longest string read (default: the checkpoint's longest training length)",
    )
    q.add_argument(
        "--samples",
        type=int,
        default=None,
        help="strings per state of a pair (default: predict_horizon.SAMPLES)",
    )
    q.add_argument(
        "--max-families",
        type=int,
        default=None,
        help="witness families predicted, round robin over the pairs (default: predict_horizon.MAX_FAMILIES)",
    )
    q.add_argument("--seed", type=parse_seed, default=0, help="seed of the strings (default 0)")
    q.add_argument("--rows", type=int, default=20, help="pairs shown, those predicted to fail first first")
    add_max_params(q)
    add_json(q, "one object: the predicted horizon, its interval and one entry per pair of states")
    q.set_defaults(fn=cmd_predict_horizon)

    q = sub.add_parser(
        "extract",
        help="the automaton a checkpoint computes on every string up to a length, against its task's "
        "minimal automaton (splits, merges, the shortest word where they disagree)",
    )
    add_checkpoint(q)
    q.add_argument("--task", default=None, help="a regular task (default: the one it was trained on)")
    q.add_argument(
        "--budget",
        type=int,
        default=None,
        help="prefix-tree nodes of the table (default: extract.BUDGET, 2^19: every binary string up to 18)",
    )
    q.add_argument("--depth", type=int, default=None, help="longest string answered (default: from --budget)")
    q.add_argument(
        "--prefix-len", type=int, default=None, help="longest prefix of a row (default: 40%% of the depth)"
    )
    add_max_params(q)
    add_json(q, "one object: the states, splits, merges and the shortest disagreeing word")
    q.set_defaults(fn=cmd_extract)

    q = sub.add_parser("spectrum", help="eigenvalues of A(x) per layer and token, on the complex plane")
    add_checkpoint(q)
    q.add_argument("--out", default=None, help="figure path: .png, .svg or .pdf")
    q.add_argument("--samples", type=int, default=4, help="sample sequences of the model's task")
    q.add_argument("--length", type=int, default=64, help="length of each sample sequence")
    q.add_argument("--seed", type=parse_seed, default=0, help="seed of the inputs")
    add_json(q, "one object (without the sample eigenvalues)")
    q.set_defaults(fn=cmd_spectrum)
