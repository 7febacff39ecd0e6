"""A study's report collected from the database alone: each run of the grid found by its key, its
metrics, curves and probe traces, the tables beside the published numbers, and the verdicts. Rendering
them (markdown, CSV, LaTeX, figures) is ``report.writer``'s; the HTML page is ``report.html``'s."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from statetrack.errors import UserError
from statetrack.experiments import Study, StudyKind
from statetrack.progress import Ticker
from statetrack.report.finding import Finding, finding
from statetrack.report.folder import Extent
from statetrack.report.lm_tables import LMTable, lm_tables
from statetrack.report.selection import MARK
from statetrack.report.state_tables import state_tables
from statetrack.report.table import StudyTable, study_tables
from statetrack.report.verdict_tables import VerdictTable, verdict_table
from statetrack.runs.jobs import MAX_RUNS
from statetrack.runs.probes import read_traces
from statetrack.runs.runner import complete_result
from statetrack.runs.store import Damaged, RunRecord, RunStatus, Store, warn_damaged


@dataclass
class Report:
    study: Study
    scale: str
    tables: Sequence[StudyTable | LMTable]
    results: list  # (Job, RunResult or None)
    traces: dict[int, dict] = field(default_factory=dict)  # run_id -> probe -> trace
    curves: dict[int, list] = field(default_factory=dict)
    interrupted: int = 0  # running or interrupted rows of the grid's keys (not counted)
    machines: list[str] = field(default_factory=list)  # where the runs ran (from their recorded versions)
    verdicts: VerdictTable | None = None  # studies with ``oracle: true``: the theory's verdict per cell
    db: str = ""  # the database the runs were read from
    wall_time: float = 0.0  # seconds, summed over the complete runs of the grid (as each run recorded it)
    devices: list[str] = field(default_factory=list)  # the devices the complete runs trained on
    cpu_time: float = 0.0  # CPU seconds, summed over the complete runs that recorded theirs
    cpu_runs: int = 0  # how many complete runs recorded their CPU time
    seeds: int = 1  # seeds per cell of the grid reported
    # job key -> why its last run failed (the jobs with no complete run)
    failures: dict[str, str] = field(default_factory=dict)

    def extent(self) -> Extent:
        """How much the report holds: scale, seeds per cell, complete runs (``report.folder``)."""
        return Extent(self.scale, self.seeds, self.complete)

    def record(self, meta: dict | None = None) -> dict:
        """The report's record in its folder's index.json (``report.folder``)."""
        meta = meta or {}
        compared, agree = self.agreement()
        return {
            "study": self.study.name,
            "title": self.study.title,
            "scale": self.scale,
            "seeds": self.seeds,
            "runs": len(self.results),
            "complete": self.complete,
            "missing": self.missing,
            "cells_compared": compared,
            "cells_agree": agree,
            "finding": self.finding().agreement if self.study.kind is not StudyKind.LM else None,
            "run_time_s": round(self.wall_time, 1),
            "devices": self.devices,
            "machines": self.machines,
            "date": meta.get("Date"),
            "command": meta.get("Command"),
        }

    def finding(self) -> Finding:
        """What the study found: the headline of its report (``report.finding``)."""
        return finding(self)

    @property
    def complete(self) -> int:
        return len(self.results) - self.missing

    def agreement(self) -> tuple[int, int]:
        """(cells compared with a published number, cells that agree within the study's tolerance)."""
        flags = [
            v
            for t in self.tables
            for r in getattr(t, "rows", [])
            if isinstance(r, dict)
            for v in r.get("differs", {}).values()
            if v is not None
        ]
        return len(flags), sum(1 for v in flags if not v)

    @property
    def missing(self) -> int:
        return sum(1 for _, r in self.results if r is None)

    def probe_rows(self) -> list[dict]:
        """Per model and probe: median over its runs of token accuracy and accuracy on input-1 steps."""
        out = []
        for tdef in self.study.tables:
            for m in tdef.models:
                for t in tdef.tasks:
                    for probe in t.probes:
                        runs = [
                            r
                            for j, r in self.results
                            if r is not None
                            and j.table == tdef.name
                            and j.label == m.label
                            and j.column == t.label
                        ]
                        tr = [x for x in (self.traces.get(r.run_id, {}).get(probe) for r in runs) if x]
                        if not tr:
                            continue
                        row = {"model": m.label, "task": t.label, "probe": probe, "runs": len(tr)}
                        for k in ("token_accuracy", "accuracy_input1", "offset_accuracy", "hold_accuracy"):
                            v = [x[k] for x in tr if x.get(k) is not None]
                            row[k] = statistics.median(v) if v else None
                        out.append(row)
        return out


def collect(
    study, db, scale: str = "quick", seeds: int | None = None, device: str = "auto", max_runs: int = MAX_RUNS
) -> Report:
    """Look up every run of the study's grid (at ``scale``) by its key; read metrics, curves, traces."""
    jobs = study.grid(scale, seeds, device, max_runs)  # refused above max_runs before the database is opened
    store = Store(db, readonly=True)
    results, traces, curves, unfinished, wall = [], {}, {}, 0, 0.0
    machines: Counter[str] = Counter()
    devices: dict[str, None] = {}  # an ordered set
    cpu_time, cpu_runs = 0.0, 0
    for job in Ticker(f"report {study.name}", len(jobs), "runs of the grid read").each(jobs):  # a line / 5 s
        res = complete_result(store, job.key)
        results.append((job, res))
        rows = store.runs(key=job.key)
        unfinished += sum(1 for r in rows if r.status in (RunStatus.RUNNING, RunStatus.INTERRUPTED))
        if res is not None:
            row = next((r for r in rows if r.id == res.run_id), None)
            v, summary, config = (row.versions or {}, row.summary or {}, row.config) if row else ({}, {}, {})
            wall += (row.wall_time if row else None) or 0.0
            cpu = summary.get("cpu_time")
            if isinstance(cpu, (int, float)):
                cpu_time, cpu_runs = cpu_time + cpu, cpu_runs + 1
            dev = config.get("device")
            if dev:
                devices[dev] = None
            machines[_machine(v)] += 1
            try:
                curves[res.run_id] = store.curve(res.run_id)
            except Damaged as e:  # the figure of learning curves leaves it out; its numbers stay
                warn_damaged(store.path, e)
            if job.probes:
                traces[res.run_id] = read_traces(db, res.run_id)
    tables: Sequence[StudyTable | LMTable]
    if study.kind is StudyKind.LM:  # a language-modelling study: bpb tables (statetrack.report.lm_tables)
        tables = lm_tables(study, results, scale, db=db)
    else:
        tables = state_tables(study, results, study_tables(study, results, scale), curves)
    rep = Report(
        study,
        scale,
        tables,
        results,
        traces,
        curves,
        unfinished,
        [f"{m} ({n} run{'s' if n > 1 else ''})" for m, n in machines.items()],
        db=str(db),
        wall_time=wall,
        devices=list(devices),
        cpu_time=cpu_time,
        cpu_runs=cpu_runs,
        seeds=study.scale(scale).seeds if seeds is None else seeds,
        failures={j.key: why for j, r in results if r is None and (why := _failure(store.runs(key=j.key)))},
    )
    if study.kind is not StudyKind.LM:
        _compare_probes(rep)
    if getattr(study, "oracle", False):
        rep.verdicts = verdict_table(study, results)
    return rep


def _machine(v: dict) -> str:
    """Where a run ran, from its recorded versions: platform, torch, threads and, where recorded, the CPU
    kernels torch dispatched to (their rounding can move a fragile run)."""
    m = f"{v.get('platform', '?')}, torch {v.get('torch', '?')}, {v.get('threads', '?')} thread(s)"
    return m + (f", {v['cpu_capability']} kernels" if v.get("cpu_capability") else "")


def _failure(rows: list[RunRecord]) -> str | None:
    """Why the newest failed record of one run's key failed (None: no failed record), as one plain line for
    a report: the database may come from others, so its error's first line only, characters that markdown
    or HTML would read as markup blanked, at most 160."""
    failed = [r for r in rows if r.status == RunStatus.FAILED]
    if not failed:
        return None
    text = str(max(failed, key=lambda r: r.id).error or "").strip()
    line = text.splitlines()[0] if text else "no reason recorded"
    return re.sub(r"[^\w .,:;=+()'%-]", " ", line)[:160]


def _compare_probes(rep: Report) -> None:
    """Published columns compared with a probe (``compare: {key: "probe:TASK"}``): 'yes' when the median
    over runs of the probe's offset accuracy and of its hold accuracy are both above the study's
    threshold (the model predicts every end of an ISI and no end too early), else 'no'."""
    thr = rep.study.score.threshold
    rows = rep.probe_rows()
    for t in rep.tables:
        tdef = next((x for x in rep.study.tables if x.name == t.name), None)
        if tdef is None or isinstance(t, LMTable):  # a long-range or failure-horizon table: no published
            continue  # column to compare; an LM table: no probe
        for key, spec in tdef.compare.items():
            if not (isinstance(spec, str) and spec.startswith("probe:")):
                continue
            probe = spec.removeprefix("probe:")
            for row in t.rows:
                hit = [
                    r
                    for r in rows
                    if r["model"] == row["label"]
                    and r["probe"] == probe
                    and r["offset_accuracy"] is not None
                    and r["hold_accuracy"] is not None
                ]
                pub = row["published"].get(key)
                if not hit:
                    continue
                off, hold = hit[0]["offset_accuracy"], hit[0]["hold_accuracy"]
                ours = "yes" if off > thr and hold > thr else "no"
                differs = isinstance(pub, str) and pub.strip().lower() != ours
                row["differs"][key] = differs
                row["ours_text"][key] = ours
                row["ours_title"][key] = (
                    f"ours on the probe {probe}: offsets {100 * off:.0f}%, holds "
                    f"{100 * hold:.0f}% (yes: both above {100 * thr:g}%)"
                )
                row["published_text"][key] = (
                    f"{pub if pub is not None else '-'} (ours: {ours}; offsets "
                    f"{100 * off:.0f}%, holds {100 * hold:.0f}%"
                    f"{'; ' + MARK if differs else ''})"
                )


def check_reportable(rep: Report, db) -> None:
    """Refuse (one line) a report of a grid none of whose runs is complete in the database: it would
    show only dashes, and written over an earlier report it would replace measured numbers."""
    if rep.results and rep.missing == len(rep.results):
        raise UserError(
            f"no run of study {rep.study.name!r} at scale {rep.scale!r} is complete in {str(db)!r} "
            f"(0 of {len(rep.results)}); no report written (run 'statetrack sweep {rep.study.name} "
            f"--scale {rep.scale} --db {db}' first)"
        )
