"""Every write fails cleanly: a database, checkpoint, report, plot or construction that cannot be written
(missing folder, a file in the way, no permission, a read-only file system, a full disk) ends in one line
naming the path and the reason, exit 2, no traceback; no empty or half-written file stays behind, no run
stays ``running``; and a command that fails before it trains writes nothing at all."""

import errno
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

from statetrack.cli import main
from statetrack.errors import UserError
from statetrack.files import write_file
from statetrack.runs.store import Store

TRAIN = [
    "train",
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--d-state",
    "4",
    "--steps",
    "4",
    "--eval-every",
    "2",
    "--test-lengths",
    "8",
    "--eval-batch",
    "8",
]
STUDY = textwrap.dedent("""
    name: tiny
    title: tiny
    source: test
    task: parity
    train: {batch_size: 8, eval_every: 2, val_sequences: 8, lr: 0.01}
    models:
      - {label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [2, 4]}
    scales:
      quick: {seeds: 1, steps: 4, eval_batch: 8, test_lengths: [8]}
""")


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def _error(capsys, argv, *needles):
    """The command exits 2 and its last line on stderr (after any progress lines) is the one error line."""
    assert main(argv) == 2, argv
    out = capsys.readouterr().err
    assert "Traceback" not in out and out.endswith("\n"), out
    err = out.splitlines()[-1]
    assert err.startswith("error: ") and sum(line.startswith("error") for line in out.splitlines()) == 1, out
    for n in needles:
        assert n in err, err
    return err


def _complete(capsys, study, db):
    """The tiny study swept into ``db``: a report of it has a complete run to write."""
    assert main(["sweep", study, "--db", db, "--workers", "1"]) == 0
    capsys.readouterr()


@pytest.fixture
def study(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text(STUDY)
    return str(p)


@pytest.fixture
def ckpt(tmp_path):
    p = tmp_path / "c.safetensors"
    assert main(["construct", "parity-negmamba", "--out", str(p)]) == 0
    return str(p)


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount_tmpfs(name, size, ro=False): a small tmpfs of our own. Root only: the test is skipped, saying
    so, when not run as root or where the platform does not allow the mount."""
    mounted = []

    def mount(name, size="1m", ro=False):
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            pytest.skip("needs root: mounts a small tmpfs to fill or make read-only")
        d = tmp_path / name
        d.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True, text=True
        )
        if r.returncode != 0:
            pytest.skip(
                f"needs root allowed to mount a tmpfs; the mount failed ({(r.stderr or r.stdout).strip()})"
            )
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _fill(folder, keep: int = 0):
    """Fill the file system of ``folder`` until at most ``keep`` bytes are free."""
    fd = os.open(Path(folder) / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            st = os.statvfs(folder)
            free = st.f_bavail * st.f_frsize
            if free <= keep:
                break
            os.write(fd, b"\0" * max(4096, min(1 << 20, free - keep)))
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


# -- paths that cannot be written ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "where, reason", [("/proc/x", "No such file or directory"), ("FILE/x", "a file is in the way")]
)
def test_unwritable_outputs_are_one_line(tmp_path, capsys, study, ckpt, where, reason):
    (tmp_path / "FILE").write_text("in the way")
    out = where.replace("FILE", str(tmp_path / "FILE"))
    db = str(tmp_path / "r.db")
    _complete(capsys, study, db)  # a report with a complete run, so that only its output can fail
    before = _files(tmp_path)
    _error(
        capsys, ["construct", "parity-negmamba", "--out", f"{out}.safetensors"], f"{out}.safetensors", reason
    )
    _error(capsys, ["report", study, "--db", db, "--out", out], reason)
    _error(capsys, ["spectrum", ckpt, "--out", f"{out}.png"], f"{out}.png", reason)
    _error(capsys, TRAIN + ["--db", f"{out}.db"], f"{out}.db", reason)
    _error(capsys, ["reproduce", study, "--db", str(tmp_path / "new.db"), "--out", out], out, reason)
    assert _files(tmp_path) == before  # nothing written: no database, no row, no stray file


def test_a_read_only_file_system(tmp_path, capsys, study, ckpt, mount_tmpfs):
    ro = mount_tmpfs("ro", ro=True)
    db = str(tmp_path / "r.db")
    _complete(capsys, study, db)
    _error(
        capsys, ["construct", "parity-negmamba", "--out", str(ro / "x.safetensors")], "Read-only file system"
    )
    _error(capsys, ["report", study, "--db", db, "--out", str(ro / "rep")], "Read-only file system")
    _error(capsys, ["spectrum", ckpt, "--out", str(ro / "s.png")], "Read-only file system")
    _error(capsys, TRAIN + ["--db", str(ro / "r.db")], str(ro / "r.db"), "Read-only file system")
    assert _files(ro) == []


# -- a full disk ---------------------------------------------------------------------------------------
@pytest.mark.usefixtures("study")
def test_a_full_disk(capsys, ckpt, mount_tmpfs):
    full = mount_tmpfs("full")
    db = str(full / "r.db")
    assert main(TRAIN + ["--db", db]) == 0
    capsys.readouterr()
    _fill(full)
    before = _files(full)
    _error(
        capsys,
        ["construct", "parity-negmamba", "--out", str(full / "x.safetensors")],
        "No space left on device",
    )
    _error(capsys, ["spectrum", ckpt, "--out", str(full / "s.png")], "No space left on device")
    _error(
        capsys,
        TRAIN + ["--db", str(full / "new.db")],
        "cannot create results database",
        "No space left on device",
    )
    # an existing database on the full disk: named as such, never as damaged
    err = _error(capsys, TRAIN + ["--db", db], "No space left on device")
    assert "not a readable" not in err and "damaged" not in err
    after = _files(full)
    assert [
        f for f in after if f not in before and not f.startswith("r.db-")
    ] == []  # no new file, no 0-byte file
    assert not [f for f in after if f.endswith((".tmp", ".creating"))]
    Path(full / "filler").unlink()
    assert [r.status for r in Store(db).runs()] == ["complete"]


@pytest.mark.parametrize("free", [40_000, 80_000, 120_000, 160_000, 200_000])
def test_a_new_database_on_a_nearly_full_disk_is_whole_or_absent(capsys, mount_tmpfs, free):
    """A new database on a disk with a little room (a 3 MB tmpfs with ``free`` bytes left) is created whole,
    or the command ends in one line and leaves no file: never a traceback, never a malformed file."""
    full = mount_tmpfs("full", size="3m")
    _fill(full, keep=free)
    db = full / "c.db"
    code = main(TRAIN + ["--db", str(db)])
    out = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in out, out
    if code == 2:
        err = out.splitlines()[-1]
        assert err.startswith("error: ") and "No space left on device" in err, out
        if "cannot create results database" in err:
            assert not db.exists()
    assert not [f for f in _files(full) if f.endswith((".tmp", ".creating", "-journal"))], _files(full)
    (full / "filler").unlink()
    if db.exists():  # whole: every later command reads it
        assert main(["runs", "--db", str(db)]) == 0, capsys.readouterr().err
        assert Store(db).schema_version() >= 1


def test_a_full_disk_for_reports(tmp_path, capsys, study, mount_tmpfs):
    full = mount_tmpfs("full")
    db = str(tmp_path / "r.db")
    assert main(["sweep", study, "--db", db, "--workers", "1"]) == 0
    capsys.readouterr()
    _fill(full, keep=12_000)  # room for the folders and a little more, not for the report
    _error(capsys, ["report", study, "--db", db, "--out", str(full / "rep")], "No space left on device")
    assert not [
        f
        for f in _files(full)
        if f.endswith(".tmp") or (full / f).is_file() and (full / f).stat().st_size == 0
    ]


def test_a_checkpoint_that_does_not_fit_keeps_the_runs_metrics(capsys, mount_tmpfs):
    full = mount_tmpfs("full", size="3m")
    db = str(full / "r.db")
    Store(db)
    _fill(full, keep=1_000_000)
    # rnn with a state of 700: a 2 MB checkpoint
    err = _error(
        capsys,
        [
            "train",
            "--layers",
            "rnn",
            "--d-model",
            "4",
            "--d-state",
            "700",
            "--steps",
            "2",
            "--eval-every",
            "1",
            "--test-lengths",
            "8",
            "--eval-batch",
            "4",
            "--db",
            db,
        ],
        "run 1 is recorded complete with its metrics but without a checkpoint",
        str(full / "r.checkpoints"),
        "No space left on device",
    )
    [r] = Store(db).runs()
    assert r.status == "complete" and r.checkpoint is None and Store(db).metrics(1)
    assert "No space left on device" in r.summary["checkpoint_error"] and "run1-" in err
    assert _files(full / "r.checkpoints") == []  # no half-written file


# -- the write helper ----------------------------------------------------------------------------------
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "report.md"
    p.write_text("the old report")
    real = os.write

    def full_disk(fd, data):
        real(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(UserError, match=rf"cannot write report {str(p)!r}: No space left on device"):
        write_file(p, "x" * 100_000, what="report")
    monkeypatch.undo()
    assert p.read_text() == "the old report" and _files(tmp_path) == ["report.md"]
    write_file(p, "the new report")
    assert p.read_text() == "the new report" and _files(tmp_path) == ["report.md"]


# -- nothing written by a command that fails before it trains --------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_writes_nothing(tmp_path, capsys, study):
    db = tmp_path / "runs" / "r.db"
    _error(capsys, TRAIN + ["--device", "cuda", "--db", str(db)], "device 'cuda'")
    _error(capsys, ["sweep", study, "--device", "cuda", "--db", str(db)], "device 'cuda'")
    _error(capsys, ["reproduce", study, "--device", "cuda", "--db", str(db), "--out", ""], "device 'cuda'")
    assert _files(tmp_path) == ["tiny.yaml"]


def test_a_bad_init_writes_nothing(tmp_path, capsys):
    db = tmp_path / "runs" / "r.db"
    _error(capsys, TRAIN + ["--init", "construction:nope", "--db", str(db)], "unknown construction")
    _error(
        capsys,
        ["train", "--init", "construction:parity-negmamba", "--task", "group:S3", "--db", str(db)],
        "solves",
    )
    assert not (tmp_path / "runs").exists()
