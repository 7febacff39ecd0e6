"""Do two versions of statetrack give the same numbers? Runs studies into a fresh database through the
command line and dumps every stored number, so that a refactoring can be checked bit for bit.

    python bench/identical.py run OUT [--study deletang2023 --study khavari2025-parity] [--scale quick]
                                      [--model LABEL ...] [--task LABEL ...]
    python bench/identical.py compare OUT_A OUT_B

``run`` sweeps each study (``statetrack sweep NAME --scale SCALE --db OUT/runs.db --workers 1``) with the
``statetrack`` of the current ``PYTHONPATH``, then writes ``OUT/rows.json``: per run (keyed by study, model,
task, seed, learning rate and key) its metric rows (``metrics``, ``split_metrics``, ``lm_metrics``), its
validation curve, its probe traces, its training summary without wall times, and its stored config. Floats
are written with ``repr``, so equal text means equal bits. ``compare`` prints each difference and exits 1
when there is one (0 when every row is identical). It reads the database with ``sqlite3`` alone, so the
same script checks any two versions of the package, however their modules are laid out.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

STUDIES = ("deletang2023", "khavari2025-parity")
#: summary fields that measure the machine, not the computation
TIMING = {
    "wall_time",
    "train_time",
    "cpu_time",
    "load_average",
    "seconds",
    "steps_per_s",
    "time",
    "elapsed",
    "tokens_per_s",
    "eval_seconds",
}


def _clean(value):
    """Drop timing fields at any depth; floats as their exact repr."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in TIMING}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def _untimed(value):
    """``value`` without timing fields at any depth (a dump of an older version may hold ones added since)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _rows(con: sqlite3.Connection, table: str, run_id: int) -> list:
    have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
    if not have:
        return []
    cols = sorted(have - {"run_id"})
    rows = con.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE run_id=? ORDER BY {cols[0]}", (run_id,))
    out = []
    for r in rows:
        row = {}
        for c, v in zip(cols, r, strict=True):
            if c in ("data", "buckets", "answer_buckets") and isinstance(v, str):
                v = json.loads(v)
            row[c] = _clean(v)
        out.append(row)
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def dump(db: Path) -> dict:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = {}
    for run_id, key, study, label, model, task, seed, config, status, summary in con.execute(
        "SELECT id, key, study, label, model, task, seed, config, status, summary FROM runs ORDER BY id"
    ):
        cfg = json.loads(config)
        lr = cfg.get("lr", cfg.get("train", {}).get("lr") if isinstance(cfg.get("train"), dict) else None)
        name = f"{study} | {label} | {model} | {task} | seed {seed} | lr {lr!r}"
        out[name] = {
            "key": key,
            "status": status,
            "config": _clean(cfg),
            "summary": _clean(json.loads(summary)) if summary else None,
            "metrics": _rows(con, "metrics", run_id),
            "split_metrics": _rows(con, "split_metrics", run_id),
            "lm_metrics": _rows(con, "lm_metrics", run_id),
            "curves": _rows(con, "curves", run_id),
            "traces": _rows(con, "traces", run_id),
        }
    con.close()
    return out


def run(out: Path, studies: list[str], scale: str, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "runs.db"
    if db.exists():
        sys.exit(f"{db} exists: give a fresh folder")
    exe = [sys.executable, "-m", "statetrack.cli"]
    for study in studies:
        cmd = [
            *exe,
            "sweep",
            study,
            "--scale",
            scale,
            "--db",
            str(db),
            "--workers",
            "1",
            "--device",
            "cpu",
            *only,
        ]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    rows = dump(db)
    (out / "rows.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} runs dumped to {out / 'rows.json'}")


def compare(a: Path, b: Path, config: bool) -> int:
    ra, rb = (json.loads((p / "rows.json").read_text()) for p in (a, b))
    bad = 0
    for name in sorted(set(ra) | set(rb)):
        if name not in ra or name not in rb:
            print(f"only in {'B' if name not in ra else 'A'}: {name}")
            bad += 1
            continue
        for part in ra[name]:
            if part in ("config", "key") and not config:
                continue
            if _untimed(ra[name][part]) != _untimed(rb[name].get(part)):
                print(f"differs: {name}: {part}")
                bad += 1
    fields = sum(len(v[t]) for v in ra.values() for t in ("metrics", "split_metrics", "lm_metrics", "curves"))
    print(
        f"{len(ra)} runs, {fields} rows of metrics, splits, LM metrics and curves compared: "
        f"{'identical' if not bad else f'{bad} differences'}"
        f"{'' if config else ' (configs and keys not compared)'}"
    )
    return 1 if bad else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--study", action="append", help=f"default: {', '.join(STUDIES)}")
    r.add_argument("--scale", default="quick")
    r.add_argument("--model", action="append", default=[], help="only this model row (repeatable)")
    r.add_argument("--task", action="append", default=[], help="only this task column (repeatable)")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument(
        "--no-config", action="store_true", help="compare numbers only, not stored configs and keys"
    )
    args = p.parse_args()
    if args.command == "run":
        only = [x for m in args.model for x in ("--model", m)] + [x for t in args.task for x in ("--task", t)]
        run(args.out, args.study or list(STUDIES), args.scale, only)
    else:
        sys.exit(compare(args.a, args.b, not args.no_config))


if __name__ == "__main__":
    main()
