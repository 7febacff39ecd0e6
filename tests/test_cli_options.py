"""The command line derived from the typed configs: one set of defaults, help showing each of them,
--config and --set, no abbreviations, --version, a bare 'statetrack'."""

import json
import re
import subprocess
import sys

import pytest

from conftest import TINY_TRAIN
from statetrack.cli import build_parser, main
from statetrack.cli.run import train_configs
from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.version import __version__


def _train_args(*argv):
    return build_parser().parse_args(["train", *argv])


def _help(command: str) -> dict[str, str]:
    """Option -> its help text, from ``statetrack COMMAND --help`` as printed (wide, so one line each)."""
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    out = {}
    for a in sub._actions:
        if a.option_strings and a.dest != "help":
            out[a.option_strings[0]] = sub._get_formatter()._expand_help(a) if a.help is not None else ""
    return out


def test_version_and_bare_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"statetrack {__version__}\n"
    assert main([]) == 0
    out = capsys.readouterr().out
    for cmd in (
        "train",
        "eval",
        "runs",
        "rerun",
        "reproduce",
        "sweep",
        "report",
        "models",
        "tasks",
        "oracle",
    ):
        assert re.search(rf"^\s+{cmd}\s", out, re.M), cmd


def test_console_script_bare():
    p = subprocess.run([sys.executable, "-m", "statetrack.cli"], capture_output=True, text=True)
    assert p.returncode == 0 and "commands:" in p.stdout and "train" in p.stdout and not p.stderr


def test_no_abbreviations(capsys):
    assert main(["train", "--layers", "rnn", "--step", "5"]) == 2
    assert "unrecognized arguments: --step 5" in capsys.readouterr().err
    assert main(["runs", "--stat", "complete"]) == 2


@pytest.mark.parametrize(
    "command", ["train", "eval", "runs", "sweep", "reproduce", "report", "sample", "oracle"]
)
def test_every_option_shows_its_default(command):
    for opt, text in _help(command).items():
        assert "(default: " in text, (command, opt, text)


def test_train_defaults_are_the_configs():
    fields = {
        **{f"--{k.replace('_', '-')}": f for k, f in TrainConfig.model_fields.items() if k != "model"},
        **{f"--{k.replace('_', '-')}": f for k, f in ModelConfig.model_fields.items()},
        "--test-lengths": EvalConfig.model_fields["lengths"],
        "--eval-batch": EvalConfig.model_fields["batch_size"],
        "--eval-chunk": EvalConfig.model_fields["chunk"],
        "--eval-seed": EvalConfig.model_fields["seed"],
    }
    helps = _help("train")
    for opt, f in fields.items():
        shown = re.search(r"\(default: ([^)]*)\)$", helps[opt])[1]
        if f.is_required():
            assert shown == "required"
            continue
        d = f.get_default(call_default_factory=True)
        want = (
            {True: "on", False: "off", None: "none"}.get(d, d)
            if isinstance(d, (bool, type(None)))
            else ",".join(map(str, d)) or "none"
            if isinstance(d, list)
            else str(d)
        )
        assert shown == want, opt
        assert f.description and helps[opt].startswith(f.description.split(",")[0]), opt
    # and what the command builds from no options is what the configs build
    tcfg, ecfg = train_configs(_train_args("--layers", "rnn"))
    assert tcfg == TrainConfig(model=ModelConfig(layers="rnn")) and ecfg == EvalConfig()


def test_config_file_options_and_set(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text(
        "task: group:S3\nmodel: {layers: aussm, d_model: 16}\nlr: 0.003\nsteps: 500\n"
        "eval: {lengths: [16, 64], batch_size: 32}\n"
    )
    tcfg, ecfg = train_configs(
        _train_args(
            "--config",
            str(f),
            "--steps",
            "700",
            "--train-lengths",
            "1-40",
            "--set",
            "model.d_state=4",
            "--set",
            "lr=3e-3",
            "--set",
            "steps=900",
            "--set",
            "eval.lengths=100,1000",
            "--device",
            "cpu",
        )
    )
    assert tcfg.task == "group:S3" and tcfg.model == ModelConfig(layers="aussm", d_model=16, d_state=4)
    assert (tcfg.lr, tcfg.steps, tcfg.train_lengths) == (3e-3, 900, (1, 40))  # file < options < --set
    assert ecfg.lengths == [100, 1000] and ecfg.batch_size == 32
    tcfg, _ = train_configs(_train_args("--layers", "rnn", "--set", "init=null", "--set", "model.mlp=true"))
    assert tcfg.init is None and tcfg.model.mlp is True


@pytest.mark.parametrize("null", ["null", "None", "~", ""])
def test_set_null_wherever_a_field_is_optional(null):
    """An optional field of any type takes null: eval.tokens (int | None) as init (str | None) does."""
    tcfg, ecfg = train_configs(
        _train_args(
            "--layers",
            "rnn",
            "--set",
            "eval.tokens=64",
            "--set",
            f"eval.tokens={null}",
            "--set",
            f"curriculum_start={null}",
        )
    )
    assert ecfg.tokens is None and tcfg.curriculum_start is None and ecfg == EvalConfig()


def test_train_with_set_null(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--set",
                "eval.tokens=null",
                "--db",
                str(tmp_path / "x.db"),
            ]
        )
        == 0
    )
    assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "text,key,expected,got",
    [
        ("steps: many\nmodel: {layers: rnn}\n", "steps", "int", "'many'"),
        ("model: {layers: rnn, d_model: 2.5}\n", "model.d_model", "int", "2.5"),
        ("model: {layers: rnn, mlp: maybe}\n", "model.mlp", "bool", "'maybe'"),
        ("model: {layers: rnn}\neval: {lengths: [8, x]}\n", "eval.lengths", "list[int]", "[8, 'x']"),
        ("model: {layers: rnn}\neval: {tokens: lots}\n", "eval.tokens", "int | None", "'lots'"),
        (
            "model: {layers: rnn, norm: batch}\n",
            "model.norm",
            "one of 'rmsnorm', 'layernorm', 'none'",
            "'batch'",
        ),
    ],
)
def test_config_file_wrong_type_names_file_key_and_type(tmp_path, capsys, text, key, expected, got):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    assert main(["train", "--config", str(f), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: config file '{f}': key '{key}' expects {expected}: "), err
    assert f"(got {got})" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.db").exists()


def test_stored_config_trains_again(tmp_path, db, capsys):
    """``runs show ID --json | jq .config`` is a config file."""
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--steps",
                "4",
                "--db",
                db,
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["runs", "show", "1", "--db", db, "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    (tmp_path / "c.yaml").write_text(json.dumps(cfg))
    tcfg, ecfg = train_configs(_train_args("--config", str(tmp_path / "c.yaml"), "--set", "seed=1"))
    assert tcfg.model_dump() == {**{k: v for k, v in cfg.items() if k != "eval"}, "seed": 1}
    assert ecfg.model_dump() == cfg["eval"]


BAD = [
    (
        ["--set", "model.d_modl=3"],
        "--set: unknown key 'model.d_modl' (did you mean 'model.d_model'?); allowed: plugins, task, model.layers",
    ),
    (["--set", "lr"], "bad --set 'lr'; give KEY=VALUE"),
    (["--set", "lr=-1"], "--set: key 'lr' expects float: Input should be greater than 0 (got '-1')"),
    (["--set", "steps=many"], "--set: key 'steps' expects int: Input should be a valid integer"),
    (
        ["--set", "eval.tokens=0"],
        "--set: key 'eval.tokens' expects int | None: Input should be greater than or equal",
    ),
    (
        ["--set", "supervision=evry"],
        (
            "--set: key 'supervision' expects one of 'task', 'every': Input should be 'task' or 'every' "
            "(got 'evry') (did you mean 'every'?)"
        ),
    ),
    (["--train-lengths", "1-4", "--train-max-len", "9"], "not both"),
    (["--config", "missing.yaml"], "config file 'missing.yaml' not found"),
    (["--norm", "batchnorm"], "argument --norm: invalid choice: 'batchnorm'"),
    (["--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
    (["--test-lengths", "0,5"], "argument --test-lengths: bad test length 0"),
]


@pytest.mark.parametrize("extra,needle", BAD)
def test_bad_options_one_line(tmp_path, capsys, extra, needle):
    assert main(["train", "--layers", "rnn", "--db", str(tmp_path / "x.db"), *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.db").exists()


def test_bad_config_file_key(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_text("model: {layers: rnn, width: 3}\n")
    assert main(["train", "--config", str(f), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert f"config file '{f}': unknown key 'model.width'; allowed: plugins, task, model.layers," in err
    f.write_text("- a list\n")
    assert main(["train", "--config", str(f)]) == 2
    assert "must hold a mapping of config keys, got list" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, where",
    [
        (
            "task: group:S3\nmodel: {layers: rnn, d_model: 16\nsteps: 600\n",
            (
                "line 3, column 6: expected ',' or '}', but got ':' (in a flow mapping that starts at "
                "line 2, column 8)"
            ),
        ),
        ("task: group:S3\n  steps: 600\n", "line 2, column 8: mapping values are not allowed here"),
        ('task: "group:S3\n', "line 2, column 1: found unexpected end of stream (in a quoted scalar that"),
    ],
)
def test_broken_yaml_names_line_and_column(tmp_path, capsys, text, where):
    """A config or study file that is not YAML: one line with the line and column of the problem (and where
    the bracket or quote it is in starts), no traceback, nothing written."""
    from statetrack.errors import UserError
    from statetrack.experiments.loading import load_study

    f = tmp_path / "c.yaml"
    f.write_text(text)
    assert main(["train", "--config", str(f), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert f"config file '{f}' is not valid YAML: {where}" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(UserError, match=f"study file .* is not valid YAML: {where[:20]}"):
        load_study(str(f))
