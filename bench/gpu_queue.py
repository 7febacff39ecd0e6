"""The GPU queue: the paper cells a lent GPU runs next (bench/gpu_queue.yaml), each with all its seeds at
once, one process per seed, and their results as one JSON per cell for the repository.

    bash bench/gpu_queue.sh [N]                              # on the GPU machine: the next N cells (1)
    PYTHONPATH=src python bench/gpu_queue.py run [--next N] [--out DIR] [--budget SECONDS] [--device cuda]
    PYTHONPATH=src python bench/gpu_queue.py report          # the committed cells beside the papers

``run`` takes the first ``--next`` cells of the queue whose JSON is not in ``--results`` (the committed
ones, docs/results/gpu-queue/), builds each seed's configs from its study's grid (the study, scale, model
row, task and learning rate the queue names, changed by the queue's ``model`` and ``train`` where the
paper's layout or recipe is not the scale's), and trains the seeds as concurrent processes, each within
the budget left (``gpu_check.train_within``: the paper cell's code; a run the budget cuts is tested on its
last weights and says where it was cut). It writes OUT/NAME.json per cell, atomically, which the lease's
caller copies into docs/results/gpu-queue/ and commits. ``--steps`` and ``--tiny`` (a small model and
batch) run the same path on the CPU, as the tests do.

``report`` scores every committed cell by its study's own statistic and selection (the mean scaled
accuracy over 40-256, best seed, for grazzi2024 and mamba3-2026; the longest length with accuracy > 90%,
median over seeds, for diag-limits-2026) and writes docs/results/gpu-queue/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
QUEUE = ROOT / "bench" / "gpu_queue.yaml"
RESULTS = ROOT / "docs" / "results" / "gpu-queue"


def load_queue(path: Path = QUEUE) -> list[dict]:
    cells = yaml.safe_load(path.read_text())["cells"]
    names = [c["name"] for c in cells]
    if len(set(names)) != len(names):
        raise SystemExit(f"gpu_queue: {path}: a cell name is repeated")
    return cells


def pending(cells: list[dict], results: Path) -> list[dict]:
    """The cells without a JSON in ``results``, in the queue's order."""
    return [c for c in cells if not (results / f"{c['name']}.json").exists()]


def cell_jobs(cell: dict, device: str, steps: int | None = None, tiny: bool = False) -> list:
    """The cell's runs, one per seed: its study's grid at its scale, narrowed to its model row, task and
    learning rate, with the queue's changes to the model and training configs."""
    from statetrack.config import EvalConfig, TrainConfig
    from statetrack.experiments import load_study

    study = load_study(cell["study"]).restrict(cell["scale"], [cell["model_row"]], [cell["task"]])
    jobs = [j for j in study.grid(cell["scale"], device=device) if j.train.lr == cell["lr"]]
    if not jobs:
        lrs = sorted({j.train.lr for j in study.grid(cell["scale"], device=device)})
        raise SystemExit(f"gpu_queue: {cell['name']}: lr {cell['lr']} is not in the grid's {lrs}")
    out = []
    for j in jobs:
        train = {**j.train.model_dump(), **cell.get("train", {})}
        train["model"] = {**j.train.model.model_dump(), **cell.get("model", {})}
        ev = j.eval.model_dump()
        if steps is not None:
            train["steps"] = steps
            train["eval_every"] = min(train["eval_every"], steps)
        if tiny:  # the same path at a size the CPU runs in seconds (the tests)
            train["model"].update(d_model=8, d_state=4)
            train.update(batch_size=8, val_sequences=16)
            ev.update(lengths=ev["lengths"][:2], batch_size=8, doublings=0)
        out.append((j, TrainConfig.model_validate(train), EvalConfig.model_validate(ev)))
    return out


def run_seed(args) -> int:
    """One seed of one cell, in a process of its own: train within the budget, test, write the JSON."""
    import torch

    import gpu_check

    torch.set_num_threads(1)  # one core per seed: the seeds run side by side
    cell = next(c for c in load_queue(Path(args.queue)) if c["name"] == args.cell)
    job, cfg, ev = next(
        x for x in cell_jobs(cell, args.device, args.steps, args.tiny) if x[0].seed == args.seed
    )
    out, ms = gpu_check.train_within(cfg, ev, args.budget, test_share=args.test_share)
    out.update(seed=job.seed, metrics=[m.as_dict() for m in ms], train=cfg.model_dump(), eval=ev.model_dump())
    write_json(Path(args.json), out)
    return 0


def write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    tmp.replace(path)


def run_cell(cell: dict, a, budget: float) -> dict:
    """Every seed of ``cell`` as concurrent processes within ``budget`` seconds; the cell's record."""
    seeds = sorted(j.seed for j, _, _ in cell_jobs(cell, a.device, a.steps, a.tiny))
    work = Path(a.out) / f".{cell['name']}"
    work.mkdir(parents=True, exist_ok=True)
    procs = []
    t0 = time.monotonic()
    try:
        for s in seeds:
            cmd = [
                sys.executable,
                __file__,
                "seed",
                "--cell",
                cell["name"],
                "--seed",
                str(s),
                "--queue",
                a.queue,
            ]
            cmd += ["--json", str(work / f"seed{s}.json"), "--budget", str(budget), "--device", a.device]
            cmd += ["--test-share", str(cell.get("test_share", a.test_share))] + (
                ["--steps", str(a.steps)] if a.steps else []
            )
            procs.append(subprocess.Popen(cmd + (["--tiny"] if a.tiny else []), env={**os.environ}))
        end, codes = time.monotonic() + budget + 120, []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1.0, end - time.monotonic())))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("killed: past the budget")
    finally:  # no seed outlives the call
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    runs = []
    for s, code in zip(seeds, codes, strict=True):
        f = work / f"seed{s}.json"
        runs.append(json.loads(f.read_text()) if f.exists() else {"seed": s, "failed": f"exit {code}"})
        f.unlink(missing_ok=True)
    work.rmdir()
    return {
        "cell": cell,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "env": env_line(a.device),
        "seconds": time.monotonic() - t0,
        "concurrent_processes": len(seeds),
        "runs": runs,
    }


def env_line(device: str) -> dict:
    import torch

    out = {"torch": torch.__version__, "device": device}
    if device == "cuda" and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
    return out


def run(a) -> int:
    # a TERM (the lease's timeout) ends this process through its finally blocks: no seed outlives it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cells = pending(load_queue(Path(a.queue)), Path(a.results))[: a.next]
    if not cells:
        print("gpu_queue: every cell of the queue has its JSON")
        return 0
    end = time.monotonic() + a.budget
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for i, cell in enumerate(cells):
        left = (end - time.monotonic()) / (len(cells) - i)  # the cells left share what is left
        if left < 60 and not a.tiny:
            print(f"gpu_queue: {cell['name']}: {left:.0f} s left, not started")
            break
        rec = run_cell(cell, a, left)
        write_json(Path(a.out) / f"{cell['name']}.json", rec)
        done = sum(1 for r in rec["runs"] if "metrics" in r)
        print(f"gpu_queue: {cell['name']}: {done}/{len(rec['runs'])} seeds in {rec['seconds']:.0f} s")
    return 0


def score_cell(rec: dict) -> dict:
    """A committed cell scored by its study's statistic and selection, beside the paper's number."""
    from statetrack.experiments import load_study
    from statetrack.report.selection import compare, run_score, select
    from statetrack.runs.runner import RunResult
    from statetrack.training.evaluation import LengthMetrics

    cell = rec["cell"]
    study = load_study(cell["study"])
    model = next(m for t in study.tables for m in t.models if m.label == cell["model_row"])
    entries, rows = [], []
    for r in rec["runs"]:
        if "metrics" not in r:
            rows.append({"seed": r["seed"], "failed": r.get("failed")})
            continue
        res = RunResult(0, "complete", [LengthMetrics(**m) for m in r["metrics"]], {}, None)
        score = run_score(study, res)
        entries.append((cell["lr"], score, r.get("best_val_accuracy"), r.get("best_val_loss")))
        rows.append(
            {
                "seed": r["seed"],
                "score": score,
                "steps": r["steps"],
                "learned_at_step": r.get("learned_at_step"),
                "cut_at_step": r.get("cut_at_step"),
                "steps_per_s": r["steps_per_s"],
            }
        )
    sel = select(study, entries)
    sel.published = model.published.get(cell["task"])
    tested = max((m["length"] for r in rec["runs"] for m in r.get("metrics", [])), default=0)
    sel.capped = study.score.kind == "longest" and sel.selected is not None and sel.selected >= tested
    sel.differs = compare(study, sel)
    return {
        "name": cell["name"],
        "value": sel.selected,
        "seeds": rows,
        "published": sel.published,
        "differs": sel.differs,
        "statistic": f"{study.select.seeds} over seeds of {study.score.kind}",
    }


def report(a) -> int:
    results = Path(a.results)
    done = [
        json.loads((results / f"{c['name']}.json").read_text())
        for c in load_queue(Path(a.queue))
        if (results / f"{c['name']}.json").exists()
    ]
    lines = [
        "# The GPU queue's cells",
        "",
        (
            "Written by `PYTHONPATH=src python bench/gpu_queue.py report` from the cells' JSON in this folder "
            '(bench/gpu_queue.yaml names the cells, in order; docs/gpu.md, "The queue").'
        ),
        "",
    ]
    lines += [
        "| cell | device | statistic | ours | paper | differs | seeds: score, steps, learnt at, steps/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for rec in done:
        s = score_cell(rec)
        seeds = "; ".join(
            f"{r['seed']}: failed ({r['failed']})"
            if "failed" in r
            else f"{r['seed']}: {r['score']:.3g}, {r['steps']:,}{' (cut)' if r['cut_at_step'] else ''}, "
            f"{r['learned_at_step'] if r['learned_at_step'] is not None else '-'}, {r['steps_per_s']:.0f}"
            for r in s["seeds"]
        )
        val = "-" if s["value"] is None else f"{s['value']:.3g}"
        lines.append(
            f"| {s['name']} | {rec['env'].get('gpu', rec['env']['device'])} | {s['statistic']} | {val} | "
            f"{s['published']} | {s['differs']} | {seeds} |"
        )
    left = pending(load_queue(Path(a.queue)), results)
    lines += [
        "",
        f"Cells still queued ({len(left)}): " + (", ".join(c["name"] for c in left) or "none") + ".",
    ]
    text = "\n".join(lines) + "\n"
    if a.write:
        (results / "README.md").write_text(text)
    print(text, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "seed", "report"):
        q = sub.add_parser(name)
        q.add_argument("--queue", default=str(QUEUE))
        q.add_argument("--results", default=str(RESULTS), help="the folder of the committed cells' JSON")
        if name == "report":
            q.add_argument("--write", action="store_true", help="also write RESULTS/README.md")
            continue
        q.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        q.add_argument("--budget", type=float, default=480.0, help="seconds for the whole call (default 480)")
        q.add_argument("--test-share", type=float, default=45.0, help="seconds kept for each run's test")
        q.add_argument("--steps", type=int, default=None, help="every run's steps (default: the cell's)")
        q.add_argument("--tiny", action="store_true", help="a small model and batch (the tests, on the CPU)")
        if name == "run":
            q.add_argument("--next", type=int, default=1, help="how many pending cells (default 1)")
            q.add_argument("--out", default=os.environ.get("OUT", "."), help="where the cells' JSON go")
        else:
            q.add_argument("--cell", required=True)
            q.add_argument("--seed", type=int, required=True)
            q.add_argument("--json", required=True)
    a = ap.parse_args(argv)
    return {"run": run, "seed": run_seed, "report": report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
