"""Study files, sweeps (resume after SIGKILL, Ray = local), selection rules and reports."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from statetrack.cli import main
from statetrack.errors import UserError
from statetrack.experiments import Study, builtin_studies, load_study, parse_lengths
from statetrack.report.finding import protocol_changes
from statetrack.report.selection import select
from statetrack.report.table import study_tables
from statetrack.reproduce import sweep
from statetrack.runs.store import Store

SRC = str(Path(__file__).resolve().parents[1] / "src")

# two tables; tasks as columns; a grid over learning rates and seeds; per-task depth and probes
GRID = textwrap.dedent("""
    name: tiny-grid
    title: tiny grid
    source: test
    metric: scaled_accuracy
    score: {kind: mean, lengths: [8, 20]}
    select: {seeds: max, lrs: max, using: test}
    train: {batch_size: 8, eval_every: 5, val_sequences: 16, lr: 0.01}
    train_lengths: [2, 6]
    lrs: [0.01, 0.003]
    tables:
      - name: main
        tasks:
          - {label: parity, task: parity, depth: 2}
          - {label: offsets, task: offset, train_lengths: [30, 30], probes: ["offset:double-isi"]}
        models:
          - label: RNN
            model: {layers: rnn, d_model: 2, d_state: 4}
            published: {parity: 1.0, offsets: 0.5}
          - label: Mamba
            model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}
            tasks: [parity]
            published: {parity: 0.0}
      - name: layers
        tasks: [parity]
        models:
          - label: RNN x2
            model: {layers: "rnn*2", d_model: 2, d_state: 4}
    scales:
      quick: {seeds: 2, steps: 10, eval_batch: 4, test_lengths: "30..50/20", lrs: [0.01]}
      paper: {seeds: 2, steps: 10, eval_batch: 4, test_lengths: [8, 20, 40], tables: [main]}
""")

# four runs of a few steps each: for the kill/resume and Ray tests
SMALL = textwrap.dedent("""
    name: tiny-sweep
    title: tiny sweep
    source: test
    task: parity
    train: {batch_size: 8, eval_every: 10, val_sequences: 16, lr: 0.01}
    models:
      - {label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [2, 5]}
      - {label: Mamba, model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}, train_lengths: [2, 5]}
    scales:
      quick: {seeds: 2, steps: STEPS, eval_batch: 8, test_lengths: [8, 16]}
""")


def _write(tmp_path, name, text):
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return str(p)


def _paper_cells(tmp_path, name, paper_fields, text=GRID):
    """The paper scale's runs of ``text`` with ``paper_fields`` added to that scale."""
    scale = text.replace("tables: [main]}", f"tables: [main], {paper_fields}}}")
    return load_study(_write(tmp_path, name, scale)).cells("paper")


def _numbers(db, study):
    """(label, seed) -> per-length metrics of the complete runs, and the count of complete rows per key."""
    store = Store(db)
    out, per_key = {}, {}
    for r in store.runs(study=study):
        if r.status != "complete":
            continue
        per_key[r.key] = per_key.get(r.key, 0) + 1
        ms = [(m.length, m.accuracy, m.token_accuracy, m.scaled_accuracy) for m in store.metrics(r.id)]
        out[(r.label, r.seed, r.config["lr"])] = (ms, r.summary["best_val_accuracy"])
    return out, per_key


# -- the schema ------------------------------------------------------------------------------------
def test_builtin_studies_have_quick_and_paper_scales():
    assert {
        "khavari2025-parity",
        "khavari2025-offset",
        "diag-limits-2026",
        "grazzi2024",
        "deletang2023",
    } <= set(builtin_studies())
    for name in builtin_studies():
        study = load_study(name)
        assert {"quick", "paper"} <= set(study.scales), name
        for scale in study.scales:
            jobs = study.cells(scale)
            assert len({j.key for j in jobs}) == len(jobs), f"{name}/{scale}: two runs share a key"


def test_grid_expansion(tmp_path):
    study = load_study(_write(tmp_path, "g", GRID))
    quick = study.cells("quick")
    # main: RNN x {parity, offsets} + Mamba x parity; layers: RNN x2 x parity; 1 lr, 2 seeds
    assert len(quick) == (3 + 1) * 2
    assert {c.lr for c in quick} == {0.01} and quick[0].eval.lengths == [30, 50]
    by = {(c.table, c.label, c.column): c for c in quick}
    assert by[("main", "RNN", "parity")].train.model.layers == "rnn,rnn"  # depth 2
    assert by[("main", "RNN", "offsets")].train.train_lengths == (30, 30)  # the task's lengths
    assert by[("main", "RNN", "offsets")].probes == ("offset:double-isi",)
    paper = study.cells("paper")
    assert len(paper) == 3 * 2 * 2 and {c.lr for c in paper} == {0.01, 0.003}
    dense = load_study(
        _write(
            tmp_path,
            "d",
            GRID.replace("lrs: [0.01]}", 'lrs: [0.01], replace_tasks: {parity: "parity:final"}}'),
        )
    )
    assert {c.train.task for c in dense.cells("quick") if c.column == "parity"} == {"parity:final"}
    # a task's own overrides come last; an lr among them is that task's one rate, over the scale's grid
    per_task = load_study(
        _write(
            tmp_path,
            "t",
            GRID.replace(
                "tables: [main]}",
                "tables: [main], task_train: {offsets: {lr: 0.02, steps: 7, batch_size: 4}}}",
            ),
        )
    )
    paper = per_task.cells("paper")
    offsets = [c for c in paper if c.column == "offsets"]
    assert {c.lr for c in offsets} == {0.02} and len(offsets) == 2
    assert {(c.train.lr, c.train.steps, c.train.batch_size) for c in offsets} == {(0.02, 7, 4)}
    assert {c.lr for c in paper if c.column == "parity"} == {0.01, 0.003}
    # lrs among them is that task's own grid: every model of the task trains at each rate
    own_grid = load_study(
        _write(
            tmp_path,
            "u",
            GRID.replace(
                "tables: [main]}", "tables: [main], task_train: {offsets: {lrs: [0.02, 0.05], steps: 7}}}"
            ),
        )
    )
    paper = own_grid.cells("paper")
    offsets = [c for c in paper if c.column == "offsets"]
    assert sorted(c.lr for c in offsets) == [0.02, 0.02, 0.05, 0.05]
    assert {(c.train.lr, c.train.steps) for c in offsets} == {(0.02, 7), (0.05, 7)}
    assert {c.lr for c in paper if c.column == "parity"} == {0.01, 0.003}
    # a model's own lr is that model's one rate, over the scale's grid; the other models keep the grid, and a
    # task's own rate still comes last
    mamba = '        model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}\n'
    own_rate_text = GRID.replace(mamba, mamba + "        train: {lr: 0.0005}\n")
    assert own_rate_text != GRID
    paper = load_study(_write(tmp_path, "m", own_rate_text)).cells("paper")
    assert {c.lr for c in paper if c.label == "Mamba"} == {0.0005}
    assert {c.lr for c in paper if c.label == "RNN" and c.column == "parity"} == {0.01, 0.003}
    task_rate = _paper_cells(tmp_path, "n", "task_train: {parity: {lr: 0.02}}", own_rate_text)
    assert {c.lr for c in task_rate if c.label == "Mamba"} == {0.02}
    # model_tasks narrows one row to some of its columns at a scale; the other rows keep theirs
    narrowed = _paper_cells(tmp_path, "v", "model_tasks: {RNN: [offsets]}")
    assert {(c.label, c.column) for c in narrowed} == {("RNN", "offsets"), ("Mamba", "parity")}
    # model_train: one row's training overrides at a scale (here more steps and its own rate); a task's
    # own overrides still come after
    row = _paper_cells(tmp_path, "w", "model_train: {RNN: {steps: 30, lr: 0.05}}")
    assert {(c.label, c.train.steps, c.lr) for c in row} == {
        ("RNN", 30, 0.05),
        ("Mamba", 10, 0.01),
        ("Mamba", 10, 0.003),
    }
    both = _paper_cells(
        tmp_path, "x", "model_train: {RNN: {steps: 30}}, task_train: {parity: {steps: 7, lrs: [0.2]}}"
    )
    assert {(c.label, c.column, c.train.steps, c.lr) for c in both if c.column == "parity"} == {
        ("RNN", "parity", 7, 0.2),
        ("Mamba", "parity", 7, 0.2),
    }
    assert {c.train.steps for c in both if c.label == "RNN" and c.column == "offsets"} == {30}
    # cell_train: one model on one task, over the model's and the task's overrides; its rate replaces the
    # task's grid for that cell only
    cell = _paper_cells(
        tmp_path,
        "c",
        "model_train: {RNN: {steps: 30}}, task_train: {parity: {steps: 7, lrs: [0.2]}}, "
        "cell_train: {RNN: {parity: {steps: 40, lr: 0.07}}}",
    )
    assert {(c.label, c.column, c.train.steps, c.lr) for c in cell} == {
        ("RNN", "parity", 40, 0.07),
        ("Mamba", "parity", 7, 0.2),
        ("RNN", "offsets", 30, 0.01),
        ("RNN", "offsets", 30, 0.003),
    }
    # task_eval: one column's test lengths at a scale, for every model of it, over the task's own
    dense = _paper_cells(tmp_path, "e", 'task_eval: {parity: {lengths: "8..48/20"}}')
    assert {(c.column, tuple(c.eval.lengths)) for c in dense} == {
        ("parity", (8, 28, 48)),
        ("offsets", (8, 20, 40)),
    }
    assert parse_lengths("60..100/20") == [60, 80, 100] and parse_lengths("1..10/4") == [1, 5, 9, 10]


@pytest.mark.parametrize(
    "patch, msg",
    [
        (("using: test", "using: best"), "select.using"),
        (("tasks: [parity]\n", "tasks: [nope]\n"), "unknown task 'nope'"),
        (("published: {parity: 0.0}", "published: {parityy: 0.0}"), "unknown column 'parityy'"),
        (('test_lengths: "30..50/20"', 'test_lengths: "50..30"'), "bad length range"),
        (("lrs: [0.01]}", "lrs: [0.01], models: [GRU]}"), "unknown model 'GRU'"),
        (("lrs: [0.01]}", "lrs: [0.01], model_tasks: {GRU: [parity]}}"), "unknown model 'GRU'"),
        (("lrs: [0.01]}", "lrs: [0.01], model_train: {GRU: {steps: 5}}}"), "unknown model 'GRU'"),
        (
            ("lrs: [0.01]}", "lrs: [0.01], model_train: {RNN: {lr: 0.1, lrs: [0.1]}}}"),
            "model_train for 'RNN'",
        ),
        (("lrs: [0.01]}", "lrs: [0.01], model_tasks: {RNN: [parityy]}}"), "unknown task 'parityy'"),
        (("lrs: [0.01]}", "lrs: [0.01], task_train: {parity: {lr: 0.1, lrs: [0.1]}}}"), "both lr and lrs"),
        (("lrs: [0.01]}", "lrs: [0.01], task_train: {parity: {lrs: []}}}"), "non-empty list of positive"),
        (("lrs: [0.01]}", "lrs: [0.01], cell_train: {GRU: {parity: {steps: 5}}}}"), "unknown model 'GRU'"),
        (("lrs: [0.01]}", "lrs: [0.01], task_eval: {parityy: {lengths: [9]}}}"), "unknown task 'parityy'"),
        (("lrs: [0.01]}", "lrs: [0.01], task_eval: {parity: {chunk: 9}}}"), "unknown eval field 'chunk'"),
        (
            ("lrs: [0.01]}", "lrs: [0.01], cell_train: {RNN: {parityy: {steps: 5}}}}"),
            "unknown task 'parityy'",
        ),
        (
            ("lrs: [0.01]}", "lrs: [0.01], cell_train: {RNN: {parity: {lr: 0.1, lrs: [0.1]}}}}"),
            "cell_train for 'RNN on parity'",
        ),
    ],
)
def test_bad_study_files(tmp_path, patch, msg):
    text = GRID.replace(*patch)
    assert text != GRID
    with pytest.raises(UserError, match=msg):
        load_study(_write(tmp_path, "bad", text))


def test_selection_rules():
    def study(**sel):
        return Study(
            name="s",
            title="t",
            source="s",
            scales={},
            score={"kind": "mean"},
            select=sel,
            tables=[{"tasks": ["parity"], "models": [{"label": "m", "model": {"layers": "rnn"}}]}],
        )

    # (lr, test score, validation accuracy, validation loss)
    entries = [(0.1, 0.9, 0.80, 1.0), (0.1, 0.2, 0.99, 0.5), (0.01, 0.6, 0.95, 0.7), (0.01, 0.4, 0.96, 0.6)]
    c = select(study(seeds="max", lrs="max", using="test"), entries)
    assert (c.selected, c.lr) == (0.9, 0.1)  # max over everything, on the test score
    c = select(study(seeds="median", lrs="max", using="test"), entries)
    assert (c.selected, c.lr) == (0.55, 0.1) and sorted(c.values) == [0.2, 0.9]
    c = select(study(seeds="max", using="validation"), entries)
    assert (c.selected, c.lr) == (0.2, 0.1)  # the best validated run, whatever its test score
    c = select(study(seeds="median", using="validation"), entries)
    assert (c.lr, c.selected) == (0.01, 0.5)  # median validation 0.955 > 0.895


# -- sweeps ----------------------------------------------------------------------------------------
def _cli(args, **kw):
    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "statetrack.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def _count(db, status):
    if not os.path.exists(db):
        return 0
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status=?", (status,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow  # two sweeps in child processes, one killed with SIGKILL
def test_sigkill_mid_sweep_then_resume(tmp_path):
    path = _write(tmp_path, "s", SMALL.replace("STEPS", "60"))
    (tmp_path / "killed").mkdir()  # the command line makes no folder but runs/
    db = str(tmp_path / "killed" / "r.db")
    proc = _cli(["sweep", path, "--db", db, "--workers", "1"], start_new_session=True)
    t0 = time.time()
    # kill once the first run is complete and the next one has started
    while _count(db, "complete") < 1 or _count(db, "running") < 1:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() - t0 < 120, "no run completed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and any worker it started
    proc.wait()
    store = Store(db)
    first = {r.key: r.status for r in store.runs()}
    assert list(first.values()).count("complete") >= 1 and list(first.values()).count("complete") < 4
    assert "running" in first.values()  # the run killed mid-way

    again = _cli(["sweep", path, "--db", db, "--workers", "1"])
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err.decode()
    assert "reused" in out.decode()
    rows = Store(db).runs()
    statuses = [r.status for r in rows]
    assert statuses.count("complete") == 4 and "running" not in statuses
    assert statuses.count("interrupted") == 1
    killed, per_key = _numbers(db, "tiny-sweep")
    assert sorted(per_key.values()) == [1, 1, 1, 1]  # every run exactly once complete

    # an uninterrupted sweep of the same grid gives the same numbers
    ref_db = str(tmp_path / "ref" / "r.db")
    study, _ = sweep(path, db=ref_db, workers=1)
    ref, _ = _numbers(ref_db, "tiny-sweep")
    assert killed == ref

    # the report counts each run once and says the killed record was not counted
    main(["report", path, "--db", db, "--out", ""])
    from statetrack.report.collect import collect

    rep = collect(study, db)
    assert rep.missing == 0 and rep.interrupted == 1
    assert all(row["seeds"] == 2 for t in rep.tables for row in t.rows)


@pytest.mark.slow  # starts Ray
def test_ray_executor_matches_local(tmp_path):
    pytest.importorskip("ray")
    path = _write(tmp_path, "s", SMALL.replace("STEPS", "15"))
    local_db, ray_db = str(tmp_path / "l" / "r.db"), str(tmp_path / "ray" / "r.db")
    sweep(path, db=local_db, workers=1)
    _, results = sweep(path, db=ray_db, workers=2, executor="ray")
    assert all(r.status == "complete" and not r.reused for _, r in results)
    local, lk = _numbers(local_db, "tiny-sweep")
    viaray, rk = _numbers(ray_db, "tiny-sweep")
    assert local == viaray and lk == rk  # same numbers, same keys
    for _, r in results:  # the driver wrote checkpoints, curves and the worker's versions
        assert Path(r.checkpoint).is_file() and Store(ray_db).curve(r.run_id)
        assert Store(ray_db).run(r.run_id).versions["threads"] == 1
    _, again = sweep(path, db=ray_db, workers=2, executor="ray")
    assert all(r.reused for _, r in again) and Store(ray_db).counts()["runs"] == 4


def test_address_needs_ray(tmp_path, db, capsys):
    path = _write(tmp_path, "s", SMALL.replace("STEPS", "5"))
    assert main(["sweep", path, "--db", db, "--address", "auto"]) == 2
    assert "--address needs --executor ray" in capsys.readouterr().err
    assert not os.path.exists(db)


# -- reports ---------------------------------------------------------------------------------------
def test_report_from_database(tmp_path, db, capsys):
    path = _write(tmp_path, "g", GRID)
    assert main(["sweep", path, "--db", db, "--workers", "1"]) == 0
    n = Store(db).counts()["runs"]
    out = tmp_path / "report"
    assert main(["report", path, "--db", db, "--out", str(out)]) == 0
    assert Store(db).counts()["runs"] == n  # nothing retrained
    text = capsys.readouterr().out
    assert "tiny grid" in text and "report written" in text
    md = (out / "tiny-grid.md").read_text()
    assert "| RNN |" in md and "paper: parity" in md and "## Probes" in md
    assert "offset:double-isi" in md
    assert "## Accuracy of every run, with 95% intervals" in md and "| chance | parity |" in md
    figs = {p.name for p in (out / "tiny-grid").iterdir()}
    assert {
        "length-main-parity.png",
        "curves-main-offsets.png",
        "curves-main-parity.png",
        "length-layers-parity.png",
    } <= figs
    # offsets: all 4 test sequences end on label 0 at lengths 30 and 50, but chance comes from the final
    # label's distribution over 10,000 draws (below 1), so the scaled accuracy is defined and drawn
    assert "length-main-offsets.png" in figs
    assert any(f.startswith("trace-rnn") for f in figs)
    csv = (out / "tiny-grid.csv").read_text().splitlines()
    # four cells, and the learning table's row for each
    assert csv[0].startswith("study,table,model,column,selected") and len(csv) == 1 + 4 + 4
    assert sum("-learning," in line for line in csv) == 4
    assert "\\begin{tabular}" in (out / "tiny-grid.tex").read_text()


def test_table_marks_disagreement(tmp_path, db):
    study = load_study(
        _write(tmp_path, "g", GRID.replace("score: {kind: mean, lengths: [8, 20]}", "score: {kind: mean}"))
    )
    _, results = sweep(study, db=db, workers=1)
    tables = study_tables(study, results, "quick")
    assert [t.name for t in tables] == ["main", "layers"]
    rnn = tables[0].rows[0]
    cell = rnn["cells"]["parity"]
    assert cell.selected is not None and len(cell.values) == 2
    assert cell.differs == (abs(cell.selected - 1.0) > 0.1)
    assert ("*" in rnn["text"]["parity"]) == bool(cell.differs)


def test_longest_kind_and_capped(tmp_path, db):
    text = GRID.replace("metric: scaled_accuracy", "metric: accuracy").replace(
        "score: {kind: mean, lengths: [8, 20]}", "score: {kind: longest, threshold: 0.0, fail_below: 10}"
    )
    study = load_study(_write(tmp_path, "g", text))
    _, results = sweep(study, db=db, workers=1)
    t = study_tables(study, results, "quick")[0]
    cell = t.rows[0]["cells"]["parity"]
    # accuracy > 0 at every length: the value reaches our longest test length (50): '>=50'
    assert cell.selected == 50 and cell.capped and t.rows[0]["text"]["parity"].startswith(">=50")
    assert cell.differs is True  # the paper's 1.0 (read as a length) is far below 50


def test_reproduce_writes_report_with_command_machine_and_wall_time(tmp_path, db, capsys):
    path = _write(tmp_path, "s", SMALL.replace("STEPS", "5"))
    out = tmp_path / "docs"
    assert main(["reproduce", path, "--db", db, "--workers", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tiny sweep" in text and "4 run now" in text
    md = (out / "tiny-sweep.md").read_text()
    assert (
        "- Command: `statetrack reproduce" in md and "- Machine:" in md and "- Wall time of the sweep:" in md
    )
    assert (out / "tiny-sweep" / "length-main-parity.png").is_file()


def test_the_reports_scale_line_names_the_rows_and_columns_with_their_own_steps(tmp_path):
    from statetrack.report.finding import why

    text = GRID.replace(
        "tables: [main]}",
        "tables: [main], model_train: {RNN: {steps: 30}}, cell_train: {Mamba: {parity: {steps: 50}}}}",
    ).replace("lrs: [0.01]}", "lrs: [0.01], task_train: {offsets: {steps: 7}}}")
    line = why(load_study(_write(tmp_path, "y", text)), "quick")
    assert line.startswith(
        "Why differences are expected: this is the quick scale (10 training steps (offsets: 7), 2 seeds"
    )
    assert (
        "the paper's protocol (--scale paper) has 10 training steps (RNN: 30; Mamba on parity: 50), 2 seeds per cell"
        in line
    )


def test_narrowing_to_a_cell_the_scale_leaves_out_is_one_line(tmp_path):
    text = GRID.replace("tables: [main]}", "tables: [main], model_tasks: {RNN: [offsets]}}")
    study = load_study(_write(tmp_path, "z", text))
    with pytest.raises(
        UserError, match="runs no cell of model RNN and task parity .*its cells: RNN on offsets"
    ):
        study.restrict("paper", models=["RNN"], tasks=["parity"])
    assert {c.column for c in study.restrict("paper", models=["RNN"]).cells("paper")} == {"offsets"}


def test_a_scales_changes_from_the_paper_protocol_are_read_from_its_cells():
    """The report's scale line names what the scale changes against the paper scale, cell by cell, so a
    scale that trains longer than the paper says so."""
    study = load_study("diag-limits-2026")
    assert protocol_changes(study, "paper") == []
    assert protocol_changes(study, "quick") == ["fewer steps", "fewer learning rates", "smaller models"]
    assert protocol_changes(study, "long-steps") == ["more steps", "fewer learning rates"]
    assert "more seeds" in protocol_changes(
        study.model_copy(
            update={"scales": {**study.scales, "x": study.scales["controls"].model_copy(update={"seeds": 5})}}
        ),
        "x",
    )
    zoo = load_study("frontier-zoo")
    assert protocol_changes(zoo, "medium") is None  # no cell the paper scale runs too
