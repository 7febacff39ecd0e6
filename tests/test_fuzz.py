"""Fuzzing every parser: each input either works or raises one clear UserError line; never a crash.

At least 200 examples per parser (the conftest's hypothesis profile).
"""

import string

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statetrack.cli import main
from statetrack.config import ModelConfig, validated
from statetrack.errors import UserError
from statetrack.experiments import load_study
from statetrack.layers import MIXERS
from statetrack.model import Model
from statetrack.spec import parse_layers
from statetrack.tasks import FAMILIES, get_task
from statetrack.tasks.dfa import DFA

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


def _one_line(e: Exception):
    msg = str(e)
    assert msg and "\n" not in msg, repr(msg)


# -- layer specs --------------------------------------------------------------------------------
_names = st.sampled_from(sorted(MIXERS) + ["foo", "Mamba", "s4", "", "rnn2"])
_keys = st.sampled_from(["conv", "neg", "init", "disc", "expand", "x", "", "dt_min"])
_values = st.sampled_from(["0", "1", "4", "-1", "true", "lin", "inv", "zoh", "2.5", "", "1e-9", "99"])
_opts = st.lists(st.tuples(_keys, _values), max_size=3)
_item = st.builds(
    lambda n, o, r: n + ("(" + ",".join(f"{k}={v}" for k, v in o) + ")" if o else "") + r,
    _names,
    _opts,
    st.sampled_from(["", "*2", "*0", "*x", "*70"]),
)
_spec = st.one_of(
    st.lists(_item, min_size=0, max_size=3).map(",".join),
    st.text(alphabet=string.ascii_lowercase[:14] + "()=,*0123456789-_ ", max_size=30),
)


@SETTINGS
@given(_spec)
def test_layer_spec_fuzz(text):
    try:
        layers = parse_layers(text)
        Model(validated(ModelConfig, layers=text, d_model=4, d_state=2), vocab_size=2, num_classes=2)
    except UserError as e:
        _one_line(e)
        return
    assert layers


# -- task strings -------------------------------------------------------------------------------
_args = st.one_of(
    st.sampled_from(
        [
            "",
            "S3",
            "S0",
            "Q7",
            "C2xC4",
            "A4xC5",
            "3",
            "-1",
            "0",
            "x",
            "final",
            "every",
            "5/every",
            "S5/transpositions",
            "S4/3cycles+transpositions",
            "S3/nope",
            "block:2:3",
            "block:2:2",
            "pulse:5",
            "ones",
            "alt",
            "two-isis",
            "double-isi",
            "1",
            "7",
            "8",
            "99999999",
            "C0",
            "D1",
            "A1",
            "V4",
            "Q8",
            "S9999",
        ]
    ),
    st.text(alphabet=string.ascii_letters + string.digits + ":/+x-", max_size=12),
)
_task = st.one_of(
    st.builds(lambda f, a: f"{f}:{a}" if a else f, st.sampled_from(sorted(FAMILIES) + ["nope"]), _args),
    st.text(max_size=15),
)


@SETTINGS
@given(_task)
def test_task_string_fuzz(name):
    try:
        task = get_task(name)
    except UserError as e:
        _one_line(e)
        return
    b = task.sample_batch(np.random.default_rng(0), 2, 5)
    assert b.inputs.shape == (2, 5) and (b.inputs < task.vocab_size).all()
    assert (b.targets[b.mask] < task.num_classes).all()


# -- DFA specs ----------------------------------------------------------------------------------
_sym = st.sampled_from(["0", "1", "a", ""])
_state = st.sampled_from(["q0", "q1", "q2", "", "x"])
_dfa = st.fixed_dictionaries(
    {},
    optional={
        "states": st.one_of(st.lists(_state, max_size=3), st.integers(), st.none()),
        "alphabet": st.one_of(st.lists(_sym, max_size=3), st.text(max_size=2)),
        "start": st.one_of(_state, st.integers()),
        "accept": st.one_of(st.lists(_state, max_size=3), _state),
        "transitions": st.one_of(
            st.dictionaries(
                _state, st.dictionaries(_sym, st.one_of(_state, st.integers()), max_size=3), max_size=3
            ),
            st.lists(st.integers(), max_size=2),
        ),
        "extra": st.integers(),
    },
)


@SETTINGS
@given(_dfa)
def test_dfa_spec_fuzz(spec):
    try:
        DFA(spec, where="fuzzed DFA")
    except UserError as e:
        _one_line(e)


# -- experiment files ---------------------------------------------------------------------------
_base = {
    "name": "s",
    "title": "t",
    "source": "x",
    "task": "parity",
    "models": [{"label": "a", "model": {"layers": "rnn"}, "train_lengths": [1, 2]}],
    "scales": {"quick": {"seeds": 1, "steps": 1, "test_lengths": [4]}},
}
_values = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.text(max_size=5),
    st.lists(st.integers(-1, 3), max_size=3),
    st.dictionaries(st.sampled_from(["seeds", "steps", "layers", "x"]), st.integers(-1, 2), max_size=2),
)


@SETTINGS
@given(st.sampled_from(sorted(_base) + ["extra"]), _values, st.booleans())
def test_experiment_file_fuzz(tmp_path_factory, key, value, as_text):
    p = tmp_path_factory.mktemp("exp") / "s.yaml"
    data = dict(_base, **{key: value})
    p.write_text(yaml.safe_dump(data) if not as_text else str(value))
    try:
        study = load_study(str(p))
        list(study.configs("quick"))
    except UserError as e:
        _one_line(e)


# -- CLI arguments ------------------------------------------------------------------------------
_tok = st.sampled_from(
    [
        "--layers",
        "rnn",
        "foo",
        "mamba,s4d",
        "--task",
        "parity",
        "group:Q7",
        "--train-lengths",
        "8",
        "1-40",
        "-3",
        "0",
        "--test-lengths",
        "8",
        "4",
        "",
        "x",
        "--seed",
        "--json",
        "--n",
        "--length",
        "--scale",
        "huge",
        "show",
        "99",
        "S3,A5",
        "S0",
        "--lr",
        "-1",
        "nan",
        "--set",
        "lr=-1",
        "model.d_modl=2",
        "eval.lengths=4,x",
        "--config",
        "missing.yaml",
        "--plugin",
        "no_such_module",
        "--step",
    ]
)
_cmd = st.sampled_from(
    [
        ["sample"],
        ["groups"],
        ["tasks"],
        ["runs"],
        ["eval", "missing.safetensors"],
        [
            "train",
            "--steps",
            "1",
            "--eval-every",
            "1",
            "--eval-batch",
            "2",
            "--d-model",
            "2",
            "--d-state",
            "2",
            "--batch-size",
            "2",
            "--test-lengths",
            "8",
        ],
        ["reproduce"],
        [],
    ]
)


@SETTINGS
@given(_cmd, st.lists(_tok, max_size=5))
def test_cli_fuzz(tmp_path_factory, capsys, cmd, rest):
    db = str(tmp_path_factory.mktemp("cli") / "f.db")
    argv = cmd + rest
    if argv[:1] in (["train"], ["runs"], ["reproduce"]):
        argv = argv + ["--db", db]
    if argv[:1] == ["reproduce"] and "--scale" not in argv:
        argv = argv + ["--scale", "huge"]  # a valid study at a real scale would train for minutes
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (argv, code)
    assert "Traceback" not in err
    if code == 2:
        assert err.count("\n") == 1, (argv, err)
