"""Validation of ``statetrack predict-horizon`` against measured failure horizons: writes
docs/results/horizon-prediction.md and horizon-prediction/scatter.png.

    nice -n 10 python docs/results/horizon-prediction.py --db runs/horizon-prediction.db \
        --read runs/horizons.db --out docs/results

Trains (or reuses, when the database has them) the small runs of study ``horizon-prediction``: three
mixers (Mamba, Negative Mamba, LSTM) x four tasks (Tomita 4, parity, the group S3, cycle navigation on 5
positions) at two training lengths, 1-20 and 1-40, 300 steps each, with measured failure horizons. Then
every complete run of these databases (--db and each --read) whose summary holds measured failure
horizons and whose checkpoint exists (so runs of the studies run with ``horizons: true`` count too) is
predicted from its read-out on strings within its training lengths (``predict_horizon``) and compared
with its measured horizon. Reads the databases and the checkpoints; writes only under --out and, for its
own runs, the --db database.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

from statetrack.training.checkpoint import load_checkpoint
from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.training.predict_horizon import predict_horizon
from statetrack.runs.runner import run
from statetrack.runs.store import RunStatus, Store

#: the runs trained here: (task, layers) at each training length
EXTRA = [(task, layers) for task in ("tomita:4/balanced", "parity", "group:S3", "cycle:5")
         for layers in ("mamba", "negmamba(conv=0)", "lstm")]
EXTRA_LENGTHS = ((1, 20), (1, 40))
STEPS = 300
TEST_LENGTHS = [20, 50, 100, 200, 500]


def train_extra(db: str) -> float:
    """Train (or reuse) the runs of study horizon-prediction; returns their wall time in seconds."""
    t = time.time()
    for lo, hi in EXTRA_LENGTHS:
        for task, layers in EXTRA:
            tc = TrainConfig(task=task, model=ModelConfig(layers=layers, d_model=16, d_state=16), train_min_len=lo,
                             train_max_len=hi, steps=STEPS, batch_size=32, lr=0.01, eval_every=25, patience=20,
                             val_sequences=128, warmup_frac=0.05, device="cpu", seed=0)
            ec = EvalConfig(lengths=TEST_LENGTHS, batch_size=64, horizons=True, device="cpu")
            r = run(tc, ec, db=db, study="horizon-prediction", label=f"{layers} {lo}-{hi}", threads=1)
            print(f"{task} {layers} {lo}-{hi}: run {r.run_id}{' (reused)' if r.reused else ''}, "
                  f"{time.time() - t:.0f} s so far", flush=True)
    return time.time() - t


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties; inf ranks above every number)."""
    def ranks(v):
        a = np.asarray(v, dtype=float)
        order = np.argsort(a, kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        for val in np.unique(a):  # average the ranks of ties
            same = a == val
            r[same] = r[same].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def pearson(x: list[float], y: list[float]) -> float:
    """Pearson's correlation of two lists of finite numbers."""
    return float(np.corrcoef(np.asarray(x, dtype=float), np.asarray(y, dtype=float))[0, 1])


def collect(dbs: list[str]) -> list[dict]:
    """One row per complete run with measured horizons and a checkpoint: measured against predicted."""
    rows = []
    for db in dbs:
        store = Store(db, readonly=True)
        for r in store.runs(status=RunStatus.COMPLETE):
            h = (r["summary"] or {}).get("horizons")
            if not h or not h.get("pairs") or not r["checkpoint"] or not Path(r["checkpoint"]).is_file():
                continue
            model, cfg, task, _ = load_checkpoint(r["checkpoint"], device="cpu")  # the task of the horizons
            t, c = time.perf_counter(), time.process_time()
            p = predict_horizon(model, task, cfg.train_max_len)
            rows.append({"db": Path(db).name, "run": r["id"], "study": r["study"], "label": r["label"],
                         "layers": str(cfg.model.layers), "task": r["task"], "steps": cfg.steps,
                         "train": f"{cfg.train_min_len}-{cfg.train_max_len}", "train_max": cfg.train_max_len,
                         "train_wall": r["wall_time"], "measured": h["horizon"], "cap": h["horizon_max"],
                         "measured_pair": h.get("pair"), "predicted": p["horizon"], "low": p["low"],
                         "high": p["high"], "seen": p["seen"], "predicted_pair": p["pair"],
                         "cpu": time.process_time() - c, "wall": time.perf_counter() - t})
            print(f"{db} run {r['id']} {cfg.model.layers} {r['task']}: measured {h['horizon']}, predicted "
                  f"{p['horizon']} ({rows[-1]['wall']:.1f} s)", flush=True)
    return rows


def _num(v, cap=None):
    if v is None:
        return f">={cap}" if cap is not None else "none"
    return f"{v:g}"


def _stat(f, x: list[float], y: list[float]) -> str:
    return f"{f(x, y):.2f}" if len(x) > 2 else "-"


def write(rows: list[dict], out: Path, times: dict, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fig_dir = out / "horizon-prediction"
    fig_dir.mkdir(exist_ok=True)
    # measured: censored at the cap (ranked above every number); predicted: none = beyond every length
    pred = [r["predicted"] if r["predicted"] is not None else math.inf for r in rows]
    meas = [r["measured"] if r["measured"] is not None else math.inf for r in rows]
    both = [r for r in rows if r["predicted"] is not None and r["measured"] is not None]
    bp, bm = [r["predicted"] for r in both], [r["measured"] for r in both]
    beyond = [r for r in both if not r["seen"]]
    ratios = [r["predicted"] / r["measured"] for r in both]
    ratios_beyond = [r["predicted"] / r["measured"] for r in beyond]
    censored = [r for r in rows if r["measured"] is None]
    agree_none = sum(1 for r in censored if r["predicted"] is None or r["predicted"] >= r["cap"])
    missed = [r for r in rows if r["measured"] is not None and r["predicted"] is None]
    within2 = sum(1 for x in ratios if 0.5 <= x <= 2)
    same_pair = sum(1 for r in both if r["measured_pair"] and r["predicted_pair"]
                    and sorted(r["measured_pair"]) == sorted(r["predicted_pair"]))
    _plot(rows, fig_dir / "scatter.png")
    studies = sorted({r["study"] or "-" for r in rows} - {"horizon-prediction"})
    intro = ("`statetrack predict-horizon CHECKPOINT` predicts where a model starts to confuse two states of its "
             "task from its read-out on strings within its training lengths only (docs/long-range.md, \"A "
             "predicted horizon\"; the idea of Chung2026, docs/science.md, in our own "
             "construction). Here it is compared with the verified failure horizon: the shortest string the "
             "model gets wrong, found by the exhaustive check of every string up to its budget's length, the "
             "margin-guided search, the witness families with many access words and the test draws "
             "(docs/long-range.md, \"Verified horizons\"), up to the longest test length, on small checkpoints: 24 trained by the "
             "script (study horizon-prediction: Mamba, Negative Mamba and LSTM, width 16, on Tomita 4, parity, "
             "the group S3 and cycle navigation on 5 positions, 300 steps at training lengths 1-20 and 1-40) "
             "and the complete runs of other studies found in the databases read, with measured horizons "
             f"({', '.join(studies) or 'none'}).")
    cost = (f"{len(rows)} checkpoints ({len({r['layers'] for r in rows})} layer specs, "
            f"{len({r['task'] for r in rows})} tasks, training lengths "
            f"{', '.join(sorted({r['train'] for r in rows}))}). Wall time of the script: {times['total']:.0f} s "
            f"(training or reusing its own runs: {times['extra']:.0f} s; their stored training wall times: "
            f"{sum(r['train_wall'] or 0 for r in rows if r['study'] == 'horizon-prediction'):.0f} s in all). "
            f"The predictions: {sum(r['wall'] for r in rows):.0f} s wall, {sum(r['cpu'] for r in rows):.0f} s of "
            f"CPU in all; per checkpoint at most {max(r['wall'] for r in rows):.1f} s wall and "
            f"{max(r['cpu'] for r in rows):.1f} s of CPU (median {statistics.median(r['wall'] for r in rows):.1f} s "
            "wall). Measured on a 2-core machine shared with other work, so the wall "
            "times are inflated; the CPU times are not.")
    med = f"{statistics.median(ratios):.2f}" if ratios else "-"
    med_beyond = f"{statistics.median(ratios_beyond):.2f}" if ratios_beyond else "-"
    logs = ([math.log(x) for x in bp], [math.log(x) for x in bm])
    lines = [
        "# A failure horizon predicted from training lengths, against the measured one", "", intro, "",
        "```bash", command, "```", "", cost, "",
        "## Agreement", "",
        "| statistic | value |",
        "|---|---|",
        f"| checkpoints | {len(rows)} |",
        f"| both finite (a failure measured below the cap and one predicted) | {len(both)} |",
        f"| Spearman rank correlation, both finite | {_stat(spearman, bp, bm)} |",
        f"| Pearson correlation, both finite | {_stat(pearson, bp, bm)} |",
        f"| Pearson correlation of the logarithms, both finite | {_stat(pearson, *logs)} |",
        ("| Spearman rank correlation, all (a horizon beyond the cap and 'none' predicted ranked above every "
         f"number) | {spearman(pred, meas):.2f} |"),
        f"| median ratio predicted / measured, both finite | {med} |",
        f"| within a factor 2, both finite | {within2} of {len(ratios)} |",
        (f"| the pair of states predicted to fail first is the one measured to fail first | {same_pair} of "
         f"{len(both)} |"),
        (f"| of the both finite, observations: a class already wrong within the training lengths (seen) | "
         f"{len(both) - len(beyond)} |"),
        (f"| of the both finite, predicted beyond the training lengths (no class already wrong there) | "
         f"{len(beyond)}: median ratio {med_beyond}, within a factor 2: "
         f"{sum(1 for x in ratios_beyond if 0.5 <= x <= 2)}, Spearman "
         f"{_stat(spearman, [r['predicted'] for r in beyond], [r['measured'] for r in beyond])}, Pearson "
         f"{_stat(pearson, [r['predicted'] for r in beyond], [r['measured'] for r in beyond])} |"),
        f"| a failure measured, none predicted | {len(missed)} |",
        (f"| no failure measured up to the longest test length | {len(censored)}: none predicted or beyond "
         f"the cap for {agree_none} |"),
        "", "![predicted against measured](horizon-prediction/scatter.png)", "",
        ("Predicted against measured horizon (log scales), one colour and marker per mixer. A run with no failure "
         "up to the longest test length is drawn at the cap; no predicted failure, or one beyond 2.5 times the cap, "
         "on the dotted top line; open "
         "markers: the prediction is an observation (a class already wrong within the training lengths); "
         "dashed: predicted = measured."),
        "", "## Every checkpoint", "",
        ("| database | run | study | model | task | train | steps | measured | predicted [interval] | "
         "pair measured / predicted | predict s |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["study"] or "", r["task"], r["layers"], r["train_max"], r["run"])):
        pred_text = _num(r["predicted"]) + (f" [{_num(r['low'])}-{_num(r['high'])}]" if r["predicted"] is not None
                                            else "") + (" (seen)" if r["seen"] else "")
        pairs = " / ".join("-" if q is None else "\\|".join(q) for q in (r["measured_pair"], r["predicted_pair"]))
        lines.append(f"| {r['db']} | {r['run']} | {r['study']} | {r['layers']} | {r['task']} | {r['train']} | "
                     f"{r['steps']} | {_num(r['measured'], r['cap'])} | {pred_text} | {pairs} | {r['wall']:.1f} |")
    lines += ["", ("(seen): a class of the pair is already wrong within the training lengths, so the 'prediction' "
                   "is that observation; none: every pair's margin converges to a positive value or grows; "
                   "measured >=N: no failure up to the longest test length N."), ""]
    (out / "horizon-prediction.md").write_text("\n".join(lines))
    (fig_dir / "rows.json").write_text(json.dumps(rows, indent=0))


def _plot(rows: list[dict], path: Path) -> None:
    from statetrack.report.plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 5.0))
    cap = max(r["cap"] for r in rows)
    top = cap * 2.5
    kinds = sorted({r["layers"].split("(")[0].split("*")[0].split(",")[0] for r in rows})
    markers = "osD^v<>pPhX*"
    for k, kind in enumerate(kinds):
        mine = [r for r in rows if r["layers"].split("(")[0].split("*")[0].split(",")[0] == kind]
        labelled = False
        for seen in (False, True):
            pts = [r for r in mine if r["seen"] == seen]
            if not pts:
                continue
            xs = [r["measured"] if r["measured"] is not None else r["cap"] for r in pts]
            ys = [min(r["predicted"], top) if r["predicted"] is not None else top for r in pts]
            ax.scatter(xs, ys, marker=markers[k % len(markers)], s=28,
                       facecolors="none" if seen else None, edgecolors=f"C{k}", color=f"C{k}",
                       label=None if labelled else kind, alpha=0.8)
            labelled = True
    lim = [1, top * 1.2]
    ax.plot(lim, lim, color="black", lw=0.8, ls="--")
    ax.axhline(top, color="grey", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_xlabel("measured horizon (at the cap: none up to the longest test length)")
    ax.set_ylabel("predicted horizon (top line: none, or beyond the top)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="the database of the runs trained here")
    ap.add_argument("--read", action="append", default=[], help="a further database read (repeatable)")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--no-extra", action="store_true", help="skip the runs this script trains")
    a = ap.parse_args()
    t = time.time()
    extra = 0.0 if a.no_extra else train_extra(a.db)
    rows = collect([a.db, *a.read])
    if not rows:
        raise SystemExit(f"no complete run with measured horizons and a checkpoint in {[a.db, *a.read]}")
    command = ("nice -n 10 python docs/results/horizon-prediction.py --db " + a.db
               + "".join(f" --read {d}" for d in a.read) + f" --out {a.out}")
    write(rows, Path(a.out), {"total": time.time() - t, "extra": extra}, command)
    print(f"{len(rows)} checkpoints; {Path(a.out) / 'horizon-prediction.md'}")


if __name__ == "__main__":
    main()
