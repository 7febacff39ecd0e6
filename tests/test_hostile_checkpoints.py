"""Checkpoints are checked before anything is built: metadata types, the declared model and its size,
tensor names, shapes and dtypes, finite weights, and whether a task fits. Each problem is one line,
exit 2, for every command that reads a checkpoint (eval, counterexample, spectrum)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from statetrack import ModelConfig, TrainConfig, build_model, get_task
from statetrack.cli import main
from statetrack.config import ModelConfig as MC
from statetrack.errors import UserError
from statetrack.layers import MIXERS
from statetrack.training.checkpoint import (
    FORMAT,
    MAX_PARAMS,
    SMALL_BUILD_BYTES,
    declared_model,
    declared_params,
    inspect_checkpoint,
    load_checkpoint,
    meta_model,
    save_checkpoint,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")
COMMANDS = [["eval"], ["counterexample"], ["spectrum"]]


def _craft(path, config, tensors=None, extra="{}"):
    """A safetensors file with statetrack's metadata and whatever config and tensors we like."""
    meta = {
        "format": FORMAT,
        "config": config if isinstance(config, str) else json.dumps(config),
        "extra": extra,
    }
    save_file(
        tensors if tensors is not None else {"embed.weight": torch.zeros(2, 2)}, str(path), metadata=meta
    )
    return path


def _good(tmp_path, layers="rnn", **kw):
    cfg = TrainConfig(model=ModelConfig(layers=layers, d_model=4, d_state=4), **kw)
    model = build_model(cfg.model, get_task(cfg.task))
    return model, cfg, save_checkpoint(model, cfg.model_dump(), tmp_path / "good.safetensors")


def _one_line_exit_2(capsys, argv, needle):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("config", ["[1, 2]", '"parity"', "3", "null", "true", "{not json"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_config_metadata_that_is_not_an_object(tmp_path, capsys, config, cmd):
    p = _craft(tmp_path / "c.safetensors", config)
    _one_line_exit_2(capsys, cmd + [str(p)], "damaged metadata")


@pytest.mark.parametrize("extra", ["[]", "7", "{bad"])
def test_extra_metadata_that_is_not_an_object(tmp_path, capsys, extra):
    _, cfg, _ = _good(tmp_path)
    p = _craft(tmp_path / "e.safetensors", cfg.model_dump(), extra=extra)
    _one_line_exit_2(capsys, ["eval", str(p)], "damaged metadata")


@pytest.mark.parametrize(
    "config, needle",
    [
        ({"task": "parity"}, "bad config"),  # no model
        ({"task": "parity", "model": {"layers": "nosuch"}}, "unknown mixer"),
        ({"task": "parity", "model": {"layers": "rnn", "d_model": "wide"}}, "bad config"),
        ({"task": "no-such-task", "model": {"layers": "rnn"}}, "unknown task"),
        ({"task": "parity", "model": {"layers": "rnn"}, "steps": -1}, "bad config"),
    ],
)
def test_declared_config_is_validated(tmp_path, capsys, config, needle):
    p = _craft(tmp_path / "d.safetensors", config)
    _one_line_exit_2(capsys, ["eval", str(p)], needle)


def _huge(tmp_path):
    """1.9 KB: a config declaring transformer*64 at width 4096 (4.3 billion parameters), two tiny tensors."""
    cfg = {"task": "parity", "model": {"layers": "transformer*64", "d_model": 4096, "d_state": 16}}
    return _craft(
        tmp_path / "huge.safetensors",
        cfg,
        {"embed.weight": torch.zeros(2, 4), "head.weight": torch.zeros(2, 4)},
    )


def test_huge_declared_model_is_refused_before_it_is_built(tmp_path):
    p = _huge(tmp_path)
    assert p.stat().st_size < 4000
    with pytest.raises(UserError, match=r"4,29\d,\d{3},\d{3} parameters .* over the limit of 250,000,000"):
        inspect_checkpoint(p)
    # in a fresh process: refused in under 1 s (the whole eval command in under 2 s, its argument parser
    # included) and under 1 GB of memory for the whole process
    code = (
        "import resource, sys, time\nfrom statetrack.training.checkpoint import load_checkpoint\n"
        "from statetrack.cli import main\nfrom statetrack.errors import UserError\n"
        f"t = time.perf_counter()\ntry:\n    load_checkpoint({str(p)!r})\nexcept UserError:\n    pass\n"
        f"refused = time.perf_counter() - t\nt = time.perf_counter()\ncode = main(['eval', {str(p)!r}])\n"
        "print(code, refused, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    rc, refused, command, kib = r.stdout.split()
    assert rc == "2" and r.stderr.count("\n") == 1 and "over the limit" in r.stderr, r.stderr
    assert float(refused) < 1.0 and float(command) < 2.0, (refused, command)
    assert int(kib) < 1024 * 1024, f"{int(kib) / 1024:.0f} MiB"


def test_max_params_raises_the_limit(tmp_path, capsys):
    model, cfg, p = _good(tmp_path)
    n = sum(v.numel() for v in model.state_dict().values())
    _one_line_exit_2(capsys, ["eval", str(p), "--max-params", str(n - 1), "--lengths", "8"], "--max-params")
    assert main(["eval", str(p), "--max-params", str(n), "--lengths", "8"]) == 0
    assert MAX_PARAMS == 250_000_000


def test_tensor_shapes_and_dtypes_are_checked_before_loading(tmp_path, capsys):
    model, cfg, _ = _good(tmp_path)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd["head.weight"] = sd["head.weight"].double()
    p = _craft(tmp_path / "dt.safetensors", cfg.model_dump(), sd)
    _one_line_exit_2(capsys, ["eval", str(p)], "tensor 'head.weight' has dtype F64, the config needs F32")
    sd["head.weight"] = torch.zeros(3, 3)
    p = _craft(tmp_path / "sh.safetensors", cfg.model_dump(), sd)
    _one_line_exit_2(capsys, ["eval", str(p)], "tensor 'head.weight' has shape (3, 3)")
    del sd["head.weight"]
    p = _craft(tmp_path / "mi.safetensors", cfg.model_dump(), sd)
    _one_line_exit_2(capsys, ["eval", str(p)], "missing ['head.weight']")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_non_finite_weights_are_refused(tmp_path, capsys, value, cmd):
    model, cfg, _ = _good(tmp_path)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd["head.weight"][0, 0] = value
    p = _craft(tmp_path / "nan.safetensors", cfg.model_dump(), sd)
    _one_line_exit_2(capsys, cmd + [str(p)], "tensor 'head.weight' has 1 NaN or infinite value(s)")


def test_task_that_does_not_fit_the_checkpoint(tmp_path, capsys):
    _, _, p = _good(tmp_path)
    _one_line_exit_2(
        capsys,
        ["eval", str(p), "--task", "group:S3", "--lengths", "8"],
        f"task group:S3 has 6 input tokens; checkpoint {str(p)!r} was built for 2 (parity)",
    )
    _one_line_exit_2(
        capsys, ["eval", str(p), "--task", "modcount:3", "--lengths", "8"], "task modcount:3 has 3 classes"
    )
    assert main(["eval", str(p), "--task", "parity:final", "--lengths", "8"]) == 0


@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_every_mixer_builds_on_the_meta_device(mixer):
    """The size check builds the declared model on the meta device: every mixer must allow it, with the
    same state dict (names, shapes, dtypes) as a real build."""
    cfg = MC(layers=mixer, d_model=4, d_state=4)
    meta = meta_model(cfg, get_task("parity")).state_dict()
    assert all(v.is_meta for v in meta.values())
    real = build_model(cfg, get_task("parity")).state_dict()
    assert {k: (v.shape, v.dtype) for k, v in meta.items()} == {
        k: (v.shape, v.dtype) for k, v in real.items()
    }


def test_a_small_declared_model_is_built_on_the_cpu_and_a_large_one_on_meta():
    """declared_model: the model's names, shapes and dtypes either way; a small one built for real
    (torch's random state left as it was), one past SMALL_BUILD_BYTES on the meta device,
    refused before its large tensor is allocated."""
    task = get_task("parity")
    small, large = MC(layers="mamba,rnn", d_model=8, d_state=4), MC(layers="rnn", d_model=2048, d_state=2048)
    state = torch.get_rng_state()
    got = declared_model(small, task).state_dict()
    assert torch.equal(torch.get_rng_state(), state)
    assert not any(v.is_meta for v in got.values())
    real = build_model(small, task).state_dict()
    assert {k: (v.shape, v.dtype) for k, v in got.items()} == {k: (v.shape, v.dtype) for k, v in real.items()}
    assert sum(v.nbytes for v in meta_model(large, task).state_dict().values()) > SMALL_BUILD_BYTES
    assert all(v.is_meta for v in declared_model(large, task).state_dict().values())
    with pytest.raises(UserError, match="expand"):
        declared_model(MC(layers="mamba(expand=99)", d_model=8), task)


@pytest.mark.parametrize(
    "layers, mlp",
    [("mamba,s4d,mamba", False), ("rnn*3,lstm", True), ("negmamba(conv=0)*2,transformer", True)],
)
def test_the_size_check_counts_every_layer(layers, mlp):
    cfg, task = MC(layers=layers, d_model=4, d_state=6, mlp=mlp), get_task("group:S3")
    assert declared_params(cfg, task) == sum(v.numel() for v in build_model(cfg, task).state_dict().values())


def test_a_good_checkpoint_still_loads(tmp_path):
    model, cfg, p = _good(tmp_path, layers="mamba,s4d")
    m2, cfg2, _, _ = load_checkpoint(p)
    assert cfg2 == cfg and all(torch.equal(v, m2.state_dict()[k]) for k, v in model.state_dict().items())


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5000) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_model = st.fixed_dictionaries(
    {},
    optional={
        "layers": st.sampled_from(["rnn", "mamba", "transformer*64", "s4d*2", "x", 3]),
        "d_model": _json | st.integers(1, 4096),
        "d_state": _json,
        "mlp": _json,
        "norm": _json,
    },
)
_config = st.fixed_dictionaries(
    {},
    optional={
        "task": st.sampled_from(["parity", "group:S3", "nope"]) | _json,
        "model": _model | _json,
        "seed": _json,
        "steps": _json,
        "init": _json,
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_config, _json), st.one_of(st.just("{}"), _json.map(json.dumps)))
def test_fuzzed_checkpoint_metadata(tmp_path_factory, config, extra):
    """Any metadata either loads or is refused in one line; nothing is ever built at its declared size."""
    p = _craft(tmp_path_factory.mktemp("fz") / "f.safetensors", json.dumps(config), extra=extra)
    try:
        load_checkpoint(p)
    except UserError as e:
        assert str(e) and "\n" not in str(e)


def _naming(tmp_path, plugins):
    """A good checkpoint whose metadata records ``plugins``."""
    model, cfg, _ = _good(tmp_path)
    return save_checkpoint(model, cfg.model_dump(), tmp_path / "p.safetensors", extra={"plugins": plugins})


SENTINEL = (
    "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').write_text('code from a checkpoint ran')\n"
)


@pytest.mark.parametrize("module", ["st_sentinel", "st_sentinel.sub", "this", "venv.__main__"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_a_checkpoint_naming_a_module_imports_nothing(tmp_path, capsys, monkeypatch, module, cmd):
    """A checkpoint records the plugin modules that made it; loading it names them and imports none (a
    sentinel module on the path would write a file; 'this' would print the Zen of Python, 'venv.__main__'
    make a virtualenv in the working folder)."""
    pkg = tmp_path / "st_sentinel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(SENTINEL)
    (pkg / "sub.py").write_text(SENTINEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    p = _naming(tmp_path, [module])
    before = set(os.listdir(tmp_path))
    assert main(cmd + [str(p)]) == 2
    out, err = capsys.readouterr()
    assert err == (
        f"error: checkpoint {str(p)!r} names plugin module {module!r}, not loaded; data never imports "
        f"code: if you trust it, pass --plugin {module}\n"
    )
    assert "Beautiful is better" not in out and set(os.listdir(tmp_path)) == before
    assert not (pkg / "IMPORTED").exists() and "st_sentinel" not in sys.modules


@pytest.mark.parametrize("module", ["../st_sentinel", "os; import st_sentinel", "st_sentinel\nx", ""])
def test_a_recorded_plugin_that_is_not_a_module_name(tmp_path, capsys, module):
    p = _naming(tmp_path, [module])
    if module:
        _one_line_exit_2(
            capsys, ["eval", str(p)], f"names plugin module {module!r}, which is not a module name"
        )
    else:  # an empty name names nothing
        assert main(["eval", str(p), "--lengths", "8"]) == 0


def test_a_sentinel_checkpoint_in_a_fresh_process(tmp_path):
    """As a user runs it: `statetrack eval FILE` with the module importable from the working folder."""
    (tmp_path / "st_sentinel.py").write_text(SENTINEL)
    p = _naming(tmp_path, ["st_sentinel"])
    r = subprocess.run(
        [sys.executable, "-m", "statetrack.cli", "eval", str(p)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC])},
        timeout=120,
    )
    assert r.returncode == 2 and "pass --plugin st_sentinel" in r.stderr and "Traceback" not in r.stderr, (
        r.stderr
    )
    assert not (tmp_path / "IMPORTED").exists()
    # trusted on the command line, it is imported (and registers nothing this checkpoint needs: it loads)
    r = subprocess.run(
        [sys.executable, "-m", "statetrack.cli", "--plugin", "st_sentinel", "eval", str(p), "--lengths", "8"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC])},
        timeout=120,
    )
    assert r.returncode == 0 and (tmp_path / "IMPORTED").exists(), r.stderr


@pytest.mark.parametrize("kind", ["folder", "fifo"])
@pytest.mark.parametrize("cmd", COMMANDS)
def test_a_folder_or_fifo_given_as_a_checkpoint_is_named_as_such(tmp_path, capsys, kind, cmd):
    p = tmp_path / f"x.{kind}"
    if kind == "folder":
        p.mkdir()
    else:
        os.mkfifo(p)
    what = "a folder" if kind == "folder" else "a FIFO (named pipe)"
    _one_line_exit_2(capsys, cmd + [str(p)], f"checkpoint {str(p)!r} is {what}, not a checkpoint file")
