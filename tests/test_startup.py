"""The commands a newcomer runs first import no heavy package they do not compute with (the times are
measured by bench/startup.py, not here)."""

import re
import subprocess
import sys

import pytest

from conftest import SRC

#: the checkout's source first, as the other child processes of the tests
ENV = {"PATH": "", "PYTHONPATH": SRC}

#: command -> packages it must not import
LIGHT = {
    ("--version",): ("torch", "numpy", "matplotlib", "safetensors"),
    ("--help",): ("torch", "numpy", "matplotlib", "safetensors"),
    ("train", "--help"): ("torch", "numpy", "matplotlib", "safetensors"),
    ("eval", "--help"): ("torch", "numpy", "matplotlib", "safetensors"),
    ("report", "--help"): ("torch", "numpy", "matplotlib", "safetensors"),
    ("tasks",): ("torch", "numpy", "matplotlib", "safetensors"),
    # the mixers' declarations and the oracle need no torch (the oracle's group algebra uses numpy)
    ("models",): ("torch", "numpy", "matplotlib", "safetensors"),
    ("oracle", "--layers", "mamba,s4d", "--task", "parity"): ("torch", "matplotlib", "safetensors"),
    ("oracle", "--layers", "deltaproduct(nh=3,neg=true)", "--task", "group:A5"): ("torch", "matplotlib"),
}


def imported(argv) -> set[str]:
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "statetrack.cli", *argv],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "100"},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*(\S+)$", p.stderr, re.M)}


@pytest.mark.parametrize("argv", list(LIGHT))
def test_light_commands_import_no_heavy_package(argv):
    assert not imported(argv) & set(LIGHT[argv]), argv


def test_package_import_is_light():
    code = (
        "import statetrack, sys; print(statetrack.__version__); "
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=ENV)
    assert p.stdout.splitlines()[1] == "[]"
    code = "from statetrack import train, get_task, ModelConfig; print(train.__module__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=ENV)
    assert p.stdout.strip() == "statetrack.training.loop"


#: a mistyped name (a mixer, an option, a task, a study, a scale, a config key) -> what the error says; each
#: is said before torch loads, so in well under a second (bench/startup.py times them)
TYPOS = {
    ("train", "--layers", "mamab"): "did you mean 'mamba'?",
    ("train", "--layers", "mamba(con=0)"): "did you mean 'conv'?",
    ("train", "--layers", "rnn", "--task", "partiy"): "did you mean 'parity'?",
    ("train", "--layers", "rnn", "--task", "group:S7x"): "unknown group 'S7x'",
    ("train", "--layers", "rnn", "--task", "lmm:stdlib"): "did you mean 'lm'?",
    ("train", "--layers", "rnn", "--set", "model.d_modl=3"): "did you mean 'model.d_model'?",
    ("reproduce", "khavari2025-parit"): "did you mean 'khavari2025-parity'?",
    ("sweep", "frontier-zo"): "did you mean 'frontier-zoo'?",
    ("report", "frontier-zoo", "--scale", "quik"): "did you mean 'quick'?",
    (
        "eval",
        "run:rnn-parityy",
    ): "not found",  # the database, here; a label: 'did you mean' (test_did_you_mean)
}


@pytest.mark.parametrize("argv", list(TYPOS))
def test_name_typos_are_said_before_torch_loads(argv, tmp_path):
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "statetrack.cli", *argv, "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        env={**ENV, "COLUMNS": "300"},
    )
    said = [line for line in p.stderr.splitlines() if not line.startswith("import time:")]
    assert p.returncode == 2 and len(said) == 1 and TYPOS[argv] in said[0], said
    modules = {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*(\S+)$", p.stderr, re.M)}
    assert "torch" not in modules, argv
    assert not (tmp_path / "x.db").exists()
