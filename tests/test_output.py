"""Output that fits: tables within COLUMNS (piped too, 80 without it), no value cut (every word of every
value, as --json gives it, is printed whole); progress as one log line per validation without a
terminal."""

import json
import textwrap

import pytest
from rich.cells import cell_len

from statetrack.cli import main
from statetrack.cli.output import Col, pieces, print_table, show, wrap


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    study = d / "study.yaml"
    study.write_text(
        textwrap.dedent("""
        name: a-study-with-a-rather-long-name-2026
        title: t
        source: test
        task: parity
        train: {batch_size: 8, eval_every: 5, val_sequences: 16}
        models:
          - {label: "Negative Mamba [-1,1] (trained on 1-40)", model: {layers: "negmamba(conv=0),negmamba(conv=0)",
             d_model: 2, d_state: 2}, train_lengths: [1, 40]}
        scales: {quick: {seeds: 1, steps: 5, eval_batch: 4, test_lengths: [40]}}
    """)
    )
    db = str(d / "runs.db")
    assert main(["sweep", str(study), "--db", db, "--workers", "1"]) == 0
    assert (
        main(
            [
                "train",
                "--layers",
                "rnn",
                "--d-model",
                "2",
                "--steps",
                "5",
                "--eval-every",
                "5",
                "--test-lengths",
                "8",
                "--eval-batch",
                "4",
                "--label",
                "a label with, commas and spaces",
                "--db",
                db,
            ]
        )
        == 0
    )
    return db


def _run(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def _words(value):
    """Every unbreakable piece of a JSON value (strings, numbers; lists and dicts walked)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _words(v)
    elif isinstance(value, list):
        for v in value:
            yield from _words(v)
    elif value is not None and not isinstance(value, (bool, float)):
        yield from pieces(str(value))


CASES = {
    "models": (["models"], ("name", "eigenvalues", "structure", "description", "options")),
    "tasks": (["tasks"], ("family", "syntax", "description", "parameters")),
    "groups": (["groups"], ("name", "order", "derived_series", "composition_factors", "exponent")),
    "oracle": (["oracle", "--table"], ("layers", "task", "basis")),
    "runs": (["runs"], ("run_id", "status", "study", "label", "model", "task", "longest_90")),
    "runs show": (["runs", "show", "1"], ("run_id", "study", "label", "model", "task", "config", "summary")),
}


@pytest.mark.parametrize("columns", ["80", "60", None])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fits_and_nothing_cut(db, capsys, monkeypatch, case, columns):
    argv, keys = CASES[case]
    if argv[0] == "runs":
        argv = argv + ["--db", db]
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # piped: 80
    else:
        monkeypatch.setenv("COLUMNS", columns)
    width = int(columns or 80)
    out = _run(capsys, argv)
    long = [l for l in out.splitlines() if cell_len(l.rstrip()) > width]
    assert not long, long[:3]
    rows = [json.loads(l) for l in _run(capsys, argv + ["--json"]).splitlines()]
    if case == "models":  # options print as k=v
        for r in rows:
            r["options"] = [f"{k}={show(v)}" for k, v in r["options"].items()]
    missing = {w for r in rows for k in keys for w in _words(r[k]) if w not in out}
    assert not missing, sorted(missing)[:10]


def test_columns_wider_than_the_terminal_are_folded_or_dropped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    rows = [
        {"a": "alpha", "b": "a long text that wraps at spaces, and, commas", "c": "x" * 12, "d": "optional"}
    ]
    print_table(
        "t",
        [
            Col("a", lambda r: r["a"]),
            Col("b", lambda r: r["b"]),
            Col("c", lambda r: r["c"]),
            Col("d", lambda r: r["d"], optional=True),
        ],
        rows,
    )
    out = capsys.readouterr().out
    assert all(cell_len(l.rstrip()) <= 40 for l in out.splitlines())
    assert "x" * 12 in out and "(not shown, too wide for 40 columns: d;" in out
    monkeypatch.setenv("COLUMNS", "25")
    print_table("t", [Col(h, lambda r, h=h: r[h]) for h in "abc"], rows)  # folded into column groups
    out = " ".join(capsys.readouterr().out.split())
    assert "(1/2: the columns do not fit in 25 columns side by side)" in out and "x" * 12 in out


def test_wrap_never_cuts():
    assert wrap("conv=4, expand=2, dt_min=0.001", 14) == ["conv=4,", "expand=2,", "dt_min=0.001"]
    assert wrap("mamba(conv=0),s4d", 14) == ["mamba(conv=0),", "s4d"]
    assert wrap("abcdefgh", 3) == ["abcdefgh"]  # a word wider than its column stands whole on its line
    assert wrap("/tmp/some/run.db x", 10) == ["/tmp/some/", "run.db x"]  # a path wraps at its folders


def test_progress_lines_without_a_terminal(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--layers",
                "rnn",
                "--d-model",
                "2",
                "--steps",
                "30",
                "--eval-every",
                "10",
                "--test-lengths",
                "8,16",
                "--eval-batch",
                "4",
                "--db",
                str(tmp_path / "p.db"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err.splitlines()
    steps = [l for l in err if " step " in l]
    # step 0: the starting weights are validated before any training step (no training loss yet)
    assert [l.split(" step ")[1].split()[0] for l in steps] == ["0/30", "10/30", "20/30", "30/30"]
    assert "val acc " in steps[0] and "loss " not in steps[0]
    for l in steps[1:]:
        assert l.startswith("train rnn on parity: step ") and all(
            w in l for w in ("loss ", "val acc ", "%", "elapsed ", "ETA ")
        )
    assert len([l for l in err if "test length" in l]) == 2


def test_sweep_progress_lines(tmp_path, rnn_study, capsys):
    assert (
        main(["sweep", rnn_study(seeds=2, steps=10), "--db", str(tmp_path / "s.db"), "--workers", "2"]) == 0
    )
    err = capsys.readouterr().err.splitlines()
    done = [l for l in err if " done: " in l]
    assert sorted(l.split(" done: ")[0] for l in done) == ["s (quick): run 1/2", "s (quick): run 2/2"]
    # 3 validations (steps 0, 5, 10) x 2 runs, from the worker processes
    assert len([l for l in err if ": step " in l]) == 6


def test_piped_progress_lines_fit_80_columns(monkeypatch):
    """A sweep's log lines, piped, with the longest model label of a study: at most 80 columns (COLUMNS
    unset), broken between fields, every field whole; COLUMNS sets the width."""
    import io
    from types import SimpleNamespace

    from statetrack.cli.bars import SweepProgress, fit

    monkeypatch.delenv("COLUMNS", raising=False)
    job = SimpleNamespace(
        label="Negative Mamba (trained on lengths 1-40)",
        column=None,
        train=SimpleNamespace(task="modarith-brackets:5", lr=0.001, steps=20000),
        seed=2,
    )
    res = SimpleNamespace(reused=False, status="complete", summary={"longest_90": 10000})
    stream = io.StringIO()
    with SweepProgress("khavari2025-parity (quick)", 12, stream=stream) as prog:
        prog.validation(job, 12500, {"train_loss": 0.512, "val_accuracy": 0.875})
        prog.done(job, res)
    lines = stream.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and len(lines) >= 3, lines
    text = " ".join(lines)
    for field in ("step 12500/20000", "loss 0.512", "val acc 87.5%", "(complete, longest >=90% 10000)"):
        assert field in text  # no field broken across lines
    assert all(line.startswith("  ") for line in lines if not line.startswith("khavari2025-parity"))
    monkeypatch.setenv("COLUMNS", "200")
    stream = io.StringIO()
    with SweepProgress("khavari2025-parity (quick)", 12, stream=stream) as prog:
        prog.done(job, res)
    assert len(stream.getvalue().splitlines()) == 1
    assert fit("a  b", 3) == ["a", "  b"] and fit("x" * 9, 4) == ["x" * 9]  # a word wider: whole


def test_run_log_names_the_accuracy_it_prints(monkeypatch):
    """A test length's log line names its accuracy (the last position's: a language model's final token)
    and gives the token accuracy beside it where that differs (the number the LM table shows)."""
    import io

    from statetrack.cli.bars import RunProgress
    from statetrack.training.evaluation import LengthMetrics

    monkeypatch.setenv("COLUMNS", "200")
    stream = io.StringIO()
    with RunProgress("train negmamba*2 on lm:synthetic", 0, 2, stream=stream) as prog:
        prog.length(LengthMetrics(64, 0.914, 0.874, 0.0, None, 0.1, 64))
        prog.length(LengthMetrics(512, 1.0, 1.0, 1.0, 1.0, 0.5, 64))
    first, second = stream.getvalue().splitlines()
    assert "last-position accuracy 91.4%  token accuracy 87.4%" in first
    assert "last-position accuracy 100.0%" in second and "token accuracy" not in second
