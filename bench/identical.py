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

``run`` also writes each study's report (``statetrack report NAME --scale SCALE --db OUT/runs.db --out
OUT/reports --figures ''`` with the same ``--model``/``--task`` filters: markdown, CSV, LaTeX, the verdicts'
CSV and the folder's index.json) and keeps their text in ``OUT/reports.json``. ``compare`` then compares
the reports line by line too, less the lines that measure the machine or the moment (the header's
command, machine, the machine the runs ran on, date and wall time, the summed wall and CPU times, the
hours a projected number of steps takes at the run's pace; in index.json the date, command, machines and
run time), and prints the first line that differs in each file (``--no-reports`` skips them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


#: report lines that measure the machine or the moment: the header's and the summed wall/CPU times
REPORT_HEADER = (
    "- Command:",
    "- Machine:",
    "- Runs ran on:",
    "- Date:",
    "- Wall time",
    "Wall time of the complete runs",
)
#: the summed wall and CPU times where a line ends with them (the runs line of an incomplete or complete report)
WALL_TIME = re.compile(r"(Wall time of the complete runs, summed: ).*$")
#: the hours a projection takes at the run's own pace ('projected 11k steps (0.1 h)'): its training time
#: per step, a measure of the machine (``report.state_tables.unlearnt_text``); the steps are compared
PACE = re.compile(r"( steps) \([\d,.]+ h\)")
#: index.json fields of the same kind
INDEX_TIMING = {"date", "command", "run_time_s", "cpu_time_s", "machine", "machines"}


def _report_lines(name: str, text: str) -> list[str]:
    """A report file's lines, less those that measure the machine or the moment (filtered when compared,
    so a dump keeps the whole text)."""
    if name == "index.json":
        records = json.loads(text)
        clean = {s: {k: v for k, v in r.items() if k not in INDEX_TIMING} for s, r in records.items()}
        return json.dumps(clean, indent=1, sort_keys=True).splitlines()
    return [
        PACE.sub(r"\1 (hours not compared)", WALL_TIME.sub(r"\1(not compared)", line))
        for line in text.splitlines()
        if not line.lstrip().startswith(REPORT_HEADER)
    ]


def dump_reports(folder: Path) -> dict[str, str]:
    """The text of every report file in ``folder`` (markdown, CSV, LaTeX, index.json), by name."""
    return {
        p.name: p.read_text()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix in (".md", ".csv", ".tex", ".json")
    }


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


def write_reports(out: Path, studies: list[str], scale: str, only: list[str]) -> None:
    """Each study's report of ``out``/runs.db in ``out``/reports, their lines in ``out``/reports.json."""
    folder = out / "reports"
    for study in studies:
        cmd = [
            sys.executable,
            "-m",
            "statetrack.cli",
            "report",
            study,
            "--scale",
            scale,
            "--db",
            str(out / "runs.db"),
        ]
        cmd += ["--out", str(folder), "--figures", "", *only]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    reports = dump_reports(folder)
    (out / "reports.json").write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n")
    print(f"{len(reports)} report files dumped to {out / 'reports.json'}")


def run(out: Path, studies: list[str], scale: str, only: list[str], reports: bool = True) -> None:
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
    if reports:
        write_reports(out, studies, scale, only)


def _both(ra: dict, rb: dict, what: str) -> tuple[list[str], int]:
    """The names in both dumps, and how many are in one only (each printed, as ``what`` only in A or B)."""
    one = sorted(set(ra) ^ set(rb))
    for name in one:
        print(f"{what}only in {'B' if name not in ra else 'A'}: {name}")
    return sorted(set(ra) & set(rb)), len(one)


def compare_reports(a: Path, b: Path) -> int:
    """Differences between the reports dumped in ``a`` and ``b``: one line per file (its first differing
    line); how many files differ."""
    if not all((p / "reports.json").exists() for p in (a, b)):
        missing = [str(p) for p in (a, b) if not (p / "reports.json").exists()]
        print(f"reports not compared: no reports.json in {', '.join(missing)}")
        return 0
    ra, rb = (json.loads((p / "reports.json").read_text()) for p in (a, b))
    names, bad = _both(ra, rb, "report ")
    for name in names:
        la, lb = _report_lines(name, ra[name]), _report_lines(name, rb[name])
        if la != lb:
            i = next(
                (i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), min(len(la), len(lb))
            )
            xa, xb = (lines[i] if i < len(lines) else "(end of file)" for lines in (la, lb))
            print(f"report differs: {name} line {i + 1}:\n  A: {xa}\n  B: {xb}")
            bad += 1
    lines = sum(len(_report_lines(k, v)) for k, v in ra.items())
    print(f"{len(ra)} report files, {lines} lines compared: {'identical' if not bad else f'{bad} differ'}")
    return bad


def compare(a: Path, b: Path, config: bool, reports: bool = True) -> int:
    ra, rb = (json.loads((p / "rows.json").read_text()) for p in (a, b))
    names, bad = _both(ra, rb, "")
    for name in names:
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
    if reports:
        bad += compare_reports(a, b)
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
    r.add_argument("--no-reports", action="store_true", help="sweep and dump the numbers only, no reports")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument(
        "--no-config", action="store_true", help="compare numbers only, not stored configs and keys"
    )
    c.add_argument("--no-reports", action="store_true", help="do not compare the reports")
    args = p.parse_args()
    if args.command == "run":
        only = [x for m in args.model for x in ("--model", m)] + [x for t in args.task for x in ("--task", t)]
        run(args.out, args.study or list(STUDIES), args.scale, only, not args.no_reports)
    else:
        sys.exit(compare(args.a, args.b, not args.no_config, not args.no_reports))


if __name__ == "__main__":
    main()
