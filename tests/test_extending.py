"""docs/extending.md, run as written: its files are extracted into a folder outside the package and its
commands run there, in new processes; then the plugin through an installed distribution's entry points."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def doc_blocks():
    """(files: name -> text, shell lines, python snippets) from the page: a block whose first line is
    '# NAME' is (part of) file NAME; the bash block is the commands; other python blocks are snippets."""
    files, shell, snippets = {}, [], []
    for lang, body in BLOCK.findall(DOC.read_text()):
        first = body.splitlines()[0]
        if re.fullmatch(r"# \w+/[\w.]+\.py", first):  # a recurrence's folder: tests/test_ops_registry.py
            continue
        if lang in ("python", "yaml") and re.fullmatch(r"# [\w.]+\.(py|yaml)", first):
            files[first[2:]] = files.get(first[2:], "") + body.split("\n", 1)[1] + "\n"
        elif lang == "bash":
            shell += [l for l in body.splitlines() if l.strip()]
        elif lang == "python" and not first.startswith("# needs:"):
            snippets.append(body)
    return files, shell, snippets


def needing_blocks() -> list[tuple[list[str], str]]:
    """The page's Python blocks that need a package (first line '# needs: transformers' or 'fla, cuda')."""
    out = []
    for lang, body in BLOCK.findall(DOC.read_text()):
        first = body.splitlines()[0]
        if lang == "python" and first.startswith("# needs:"):
            out.append(([x.strip() for x in first.removeprefix("# needs:").split(",")], body))
    return out


def statetrack(args, env, cwd):
    return subprocess.run(
        [sys.executable, "-m", "statetrack.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def base_env():
    env = dict(os.environ)
    env.pop("STATETRACK_PLUGINS", None)
    env["COLUMNS"] = "100"
    # statetrack itself, as an installed package would be
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    return env


@pytest.fixture(scope="module")
def documented(tmp_path_factory):
    """Write the page's files, run its commands and its Python; returns (folder, {command: completed
    process})."""
    d = tmp_path_factory.mktemp("plugin")
    files, shell, snippets = doc_blocks()
    assert set(files) == {"mystuff.py", "mystudy.yaml"}
    for name, text in files.items():
        (d / name).write_text(text)
    env, out = base_env(), {}
    for line in shell:
        words = shlex.split(line, comments=True)
        if words[0] == "export":
            key, _, value = words[1].partition("=")
            value = value.replace("$PWD", str(d))
            env[key] = value + (os.pathsep + base_env()[key] if key == "PYTHONPATH" else "")
        elif words[0] == "unset":
            env.pop(words[1], None)
        else:
            assert words[0] == "statetrack", line
            words = [
                x
                for w in words
                for x in (sorted(str(q.relative_to(d)) for q in d.glob(w)) or [w] if "*" in w else [w])
            ]  # as the shell expands a glob
            p = statetrack(words[1:], env, d)
            assert p.returncode == 0, (line, p.stdout[-2000:], p.stderr[-2000:])
            out[line.split("#")[0].strip()] = p
    for code in snippets:  # the page's Python, in the same folder
        p = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=d,
            timeout=600,
            env={**base_env(), "PYTHONPATH": os.pathsep.join([str(d), base_env()["PYTHONPATH"]])},
        )
        assert p.returncode == 0, (code, p.stderr[-2000:])
    return d, out


def _one(out, prefix):
    return next(p for cmd, p in out.items() if cmd.startswith(prefix))


def test_documented_commands(documented):
    d, out = documented
    tasks = [json.loads(l) for l in _one(out, "statetrack tasks").stdout.splitlines()]
    assert "flipflop" in [t["family"] for t in tasks]
    assert "possible" in _one(out, "statetrack oracle").stdout
    show = json.loads(_one(out, "statetrack runs show").stdout)
    assert show["task"] == "flipflop:0.8" and show["config"]["plugins"] == ["mystuff"]
    page = (d / "runs" / "reports" / "mystudy.html").read_text()
    assert page.count("<svg") >= 2 and "signeddiag(neg=false)" in page
    assert "1000" in _one(out, "statetrack --plugin mystuff eval").stdout  # the plugin given, not recorded


def test_own_module_as_a_mixer(documented):
    """The page's GRU stack, registered from a plain nn.Module: trained by the command line, recorded with
    its plugin, evaluated in chunks with the numbers of one pass; its declared properties reach the oracle."""
    d, out = documented
    train = _one(out, "statetrack train --task parity --layers 'stackedgru")
    assert "run 2" in train.stdout and "64" in train.stdout
    show = statetrack(["runs", "show", "2", "--db", str(d / "runs/plugin.db"), "--json"], base_env(), d)
    assert json.loads(show.stdout)["config"]["plugins"] == ["mystuff"]
    env = {**base_env(), "PYTHONPATH": os.pathsep.join([str(d), base_env()["PYTHONPATH"]])}
    code = (
        "import torch, mystuff\n"
        "from statetrack.layers import build_mixer\nfrom statetrack.spec import parse_layers\n"
        "from statetrack.theory import oracle\n"
        "m = build_mixer(parse_layers('stackedgru(layers=2)')[0], 8, 4).double()\n"
        "x = torch.randn(3, 50, 8, dtype=torch.float64)\n"
        "whole, _ = m(x)\n"
        "s = m.init_state(3, dtype=torch.float64); parts = []\n"
        "for c in x.split(16, dim=1):\n    y, s = m(c, s); parts.append(y)\n"
        "y1, s = m.step(torch.randn(3, 8, dtype=torch.float64), s)\n"
        "assert torch.allclose(torch.cat(parts, 1), whole, atol=1e-12) and y1.shape == (3, 8)\n"
        "print(oracle('stackedgru', 'parity').basis)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=d, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "NL"  # declared a non-linear recurrence


@pytest.mark.parametrize(
    "needs,code", needing_blocks(), ids=lambda x: ",".join(x) if isinstance(x, list) else ""
)
def test_blocks_that_need_a_package(needs, code, tmp_path):
    """The fla and Hugging Face blocks run where their packages are installed (tiny random configs: nothing
    is downloaded), and are skipped, saying why, elsewhere."""
    import importlib.util

    for need in needs:
        if need == "cuda":
            import torch

            if not torch.cuda.is_available():
                pytest.skip("this block needs a CUDA GPU, and none is present")
        elif importlib.util.find_spec(need) is None:
            pytest.skip(f"this block needs the package {need!r}, which is not installed")
    env = {**base_env(), "HF_HUB_OFFLINE": "1"}  # nothing fetched: the models are built from their configs
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=900, env=env
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "complete" in p.stdout


def test_a_recorded_plugin_is_named_never_imported(documented, tmp_path):
    """eval and rerun name the plugin module a run recorded and say how to load it; they import nothing,
    even where the module could be imported (its folder on PYTHONPATH)."""
    d, _ = documented
    [ck] = (d / "runs" / "plugin.checkpoints").glob("run1-*.safetensors")
    env = {**base_env(), "PYTHONPATH": os.pathsep.join([str(d), base_env()["PYTHONPATH"]])}
    p = statetrack(["eval", str(ck), "--lengths", "64"], env, tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert (
        f"checkpoint {str(ck)!r} names plugin module 'mystuff', not loaded; data never imports code: "
        "if you trust it, pass --plugin mystuff"
    ) in p.stderr
    p = statetrack(["rerun", "1", "--db", str(d / "runs/plugin.db")], env, tmp_path)
    assert p.returncode == 2 and "run 1 of " in p.stderr and "pass --plugin mystuff" in p.stderr, p.stderr
    config = tmp_path / "run.yaml"
    config.write_text("plugins: [mystuff]\ntask: flipflop:0.8\nmodel: {layers: signeddiag}\n")
    p = statetrack(["train", "--config", str(config), "--db", str(tmp_path / "c.db")], env, tmp_path)
    assert p.returncode == 2 and f"config file {str(config)!r} names plugin module 'mystuff'" in p.stderr
    assert not (tmp_path / "c.db").exists()


def test_bad_plugin_names(tmp_path, capsys, monkeypatch):
    from statetrack import plugins
    from statetrack.cli import main

    for argv in (["--plugin", "no_such_module", "models"], ["models", "--plugin", "no_such_module"]):
        assert main(argv) == 2
        assert capsys.readouterr().err == (
            "error: plugin module 'no_such_module' (--plugin) not found; "
            "install it or add its folder to PYTHONPATH\n"
        )
    (tmp_path / "broken.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("STATETRACK_PLUGINS", "broken")
    monkeypatch.setattr(plugins, "_auto_done", False)
    assert main(["tasks"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        "plugin module 'broken' (environment variable STATETRACK_PLUGINS) failed to import: broken.py:2: "
        "RuntimeError: boom"
    ) in err


def test_entry_points(documented, tmp_path):
    """A distribution's entry points: tasks and mixers imported at start, a study found by its name."""
    d, _ = documented
    dist = tmp_path / "mystuff-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mystuff\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[statetrack.tasks]\nmystuff = mystuff\n\n[statetrack.studies]\nmystudy = mystuff:STUDY\n"
    )
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(d), env["PYTHONPATH"]])
    p = statetrack(["models", "--json"], env, tmp_path)
    assert p.returncode == 0 and "signeddiag" in p.stdout
    p = statetrack(
        ["report", "mystudy", "--db", str(d / "runs" / "plugin.db"), "--out", "", "--json"], env, tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert {json.loads(l)["model"] for l in p.stdout.splitlines()} == {
        "signeddiag",
        "signeddiag(neg=false)",
        "Mamba",
    }


@pytest.mark.slow
def test_ray_workers_import_the_plugins(documented, tmp_path):
    pytest.importorskip("ray")
    d, _ = documented
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([str(d), env["PYTHONPATH"]])
    p = statetrack(
        [
            "sweep",
            str(d / "mystudy.yaml"),
            "--plugin",
            "mystuff",
            "--executor",
            "ray",
            "--workers",
            "2",
            "--db",
            str(tmp_path / "ray.db"),
            "--json",
        ],
        env,
        tmp_path,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads(l) for l in p.stdout.splitlines()]
    assert {r["model"] for r in rows} == {"signeddiag", "signeddiag(neg=false)", "mamba(conv=0)"}


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """write(name, code) -> a plugin module on the path; the registries and the loaded plugins are restored
    after the test."""
    from statetrack import layers, plugins
    from statetrack.layers import properties
    from statetrack.tasks import registry

    layers.mixers()  # the built-in classes first, so that the copies hold them
    # restored in place: other modules hold these very dicts (the classes, the declarations the models table
    # reads, the modules that registered them, the task families, the plugins loaded)
    saved = [
        (d, dict(d))
        for d in (
            layers._MIXERS,
            properties.DECLARED,
            properties.ORIGIN,
            registry.FAMILIES,
            registry.ORIGIN,
            plugins._loaded,
        )
    ]
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, code: str) -> str:
        (tmp_path / f"{name}.py").write_text(code)
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    yield write
    for d, copy in saved:
        d.clear()
        d.update(copy)


@pytest.mark.parametrize(
    "code, said",
    [
        ("import sys\nsys.exit(0)\n", "exits_0.py:2: it called sys.exit(0) while being imported"),
        ("raise SystemExit('bye')\n", "it called sys.exit('bye') while being imported"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    ],
)
def test_a_plugin_that_exits_or_interrupts_at_import(plugin_dir, capsys, code, said):
    """An exit or a KeyboardInterrupt raised by a plugin's own code is its failure to import: one line, exit
    2, never a silent exit 0 or a fake 'interrupted by SIGINT'."""
    name = plugin_dir("exits_0", code)
    assert main_cli(["--plugin", name, "train", "--layers", "rnn"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: plugin module {name!r} (--plugin) failed to import: ") and said in err, err
    assert err.count("\n") == 1 and "interrupted" not in err


SHADOW_MIXER = (
    "from statetrack.layers import register\nfrom statetrack.layers.rnn import RNN\n\n"
    "class Mine(RNN):\n    name = 'NAME'\n\nregister(Mine)\n"
)
SHADOW_TASK = (
    "from statetrack.tasks import get_task, register\n\n@register('NAME', 'mine')\n"
    "def mine(arg):\n    return get_task('parity')\n"
)


@pytest.mark.parametrize(
    "kind, code, name", [("mixer", SHADOW_MIXER, "rnn"), ("task family", SHADOW_TASK, "parity")]
)
def test_a_plugin_cannot_replace_a_built_in_name(plugin_dir, capsys, kind, code, name):
    from statetrack.layers import MIXERS
    from statetrack.tasks.registry import FAMILIES

    before = MIXERS.get(name) or FAMILIES[name]
    mod = plugin_dir("shadow", code.replace("NAME", name))
    assert main_cli(["--plugin", mod, "models"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{kind} {name!r} is already registered by statetrack itself; module 'shadow' cannot replace it: "
        "register yours under another name"
    ) in err and err.count("\n") == 1, err
    from statetrack.layers import MIXERS as after_m
    from statetrack.tasks.registry import FAMILIES as after_f

    assert (after_m.get(name) or after_f[name]) is before


def test_a_plugin_cannot_take_another_plugins_name(plugin_dir, capsys):
    first = plugin_dir("first_plugin", SHADOW_MIXER.replace("NAME", "ourmix"))
    second = plugin_dir("second_plugin", SHADOW_MIXER.replace("NAME", "ourmix"))
    assert main_cli(["--plugin", first, "--plugin", second, "models"]) == 2
    assert (
        "mixer 'ourmix' is already registered by plugin module 'first_plugin'; module 'second_plugin' cannot "
        "replace it"
    ) in capsys.readouterr().err


def test_a_runs_key_names_the_plugins_of_its_mixer_and_task(monkeypatch):
    """Two plugins' mixers of one name never share a key, so a sweep never reuses one's runs as the other's;
    runs of statetrack's own mixers keep the keys they had (a database's complete runs are still reused)."""
    import hashlib

    from statetrack import EvalConfig, ModelConfig, TrainConfig
    from statetrack.layers import ORIGIN
    from statetrack.runs.runner import run_key

    plain = TrainConfig(model=ModelConfig(layers="rnn"))
    ecfg = EvalConfig()
    legacy = json.dumps(
        {"train": plain.key_dict(), "eval": ecfg.key_dict(), "study": "s", "label": "RNN"}, sort_keys=True
    )
    assert run_key(plain, ecfg, "s", "RNN") == hashlib.sha256(legacy.encode()).hexdigest()[:16]
    cfg = TrainConfig(model=ModelConfig(layers="rnn,ourmix"))
    keys = set()
    for module in ("first_plugin", "second_plugin"):
        monkeypatch.setitem(ORIGIN, "ourmix", module)
        keys.add(run_key(cfg, ecfg, "s", "RNN"))
    assert len(keys) == 2


def main_cli(argv):
    from statetrack.cli import main

    return main(argv)
