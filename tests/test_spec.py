import copy
import dataclasses
import json
import pickle

import pytest

from statetrack.config import ModelConfig, flatten, run_configs, validated
from statetrack.errors import UserError
from statetrack.spec import Layers, LayerSpec, format_layers, parse_layers


def test_parse_simple_and_repeat():
    assert [l.name for l in parse_layers("mamba,s4d")] == ["mamba", "s4d"]
    assert [l.name for l in parse_layers("negmamba*2")] == ["negmamba", "negmamba"]
    layers = parse_layers("mamba(conv=0,neg=true), s4d(init=inv)*2")
    assert layers[0].options == {"conv": 0, "neg": True}
    assert [l.options for l in layers[1:]] == [{"init": "inv"}] * 2
    assert format_layers(layers) == "mamba(conv=0,neg=true),s4d(init=inv),s4d(init=inv)"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        ",",
        "mamba,",
        "mamba((",
        "mamba(conv)",
        "mamba(=1)",
        "1abc",
        "mamba*0",
        "mamba*65",
        "mamba)",
        "ma mba(x=1",
        "mamba(a=(1))",
    ],
)
def test_malformed(bad):
    with pytest.raises(UserError) as e:
        parse_layers(bad)
    assert "\n" not in str(e.value)


def _every_mixer_with_its_options():
    from statetrack.layers import MIXERS

    return [(name, dict(MIXERS[name].options)) for name in sorted(MIXERS)]


@pytest.mark.parametrize("name,options", _every_mixer_with_its_options(), ids=lambda x: str(x)[:20])
def test_text_specs_text_for_every_mixer_and_its_options(name, options):
    # every registered mixer, bare and with each of its options at its default: text -> specs -> text
    # gives the text back, and the specs keep each value's type (an int stays an int, true a bool)
    assert str(parse_layers(name)) == name and parse_layers(name).names == [name]
    spec = LayerSpec(name, options)
    text = str(spec)
    layers = parse_layers(f"{text}*2")
    assert str(layers) == f"{text},{text}" == format_layers(layers)
    assert list(layers) == [spec, spec]
    assert {k: type(v) for k, v in layers[0].options.items()} == {k: type(v) for k, v in options.items()}
    assert parse_layers(str(layers)) == layers


def test_layers_are_read_only_hashable_and_pickle():
    layers = parse_layers("mamba(neg=true, conv=0),s4d*2")
    assert repr(layers) == "Layers('mamba(conv=0,neg=true),s4d,s4d')" and len(layers) == 3
    assert isinstance(layers[1:], Layers) and str(layers[1:]) == "s4d,s4d"
    with pytest.raises(TypeError):
        layers[0].options["conv"] = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        layers[0].name = "s4d"
    assert pickle.loads(pickle.dumps(layers)) == layers and copy.deepcopy(layers) == layers
    assert hash(parse_layers("mamba(conv=0,neg=true),s4d,s4d")) == hash(layers)
    # specs are equal when written the same: an int and a bool of the same value are two options
    assert parse_layers("mamba(conv=1)") != parse_layers("mamba(conv=true)")
    assert layers != str(layers) and layers != list(layers)  # the text is said as text: str(layers)
    with pytest.raises(TypeError):
        json.dumps({"layers": layers})


def test_a_model_config_parses_once_and_stores_the_canonical_text():
    cfg = ModelConfig(layers="mamba( neg=true, conv=0 ),s4d*2")
    assert isinstance(cfg.layers, Layers) and cfg.layers.names == ["mamba", "s4d", "s4d"]
    dumped = cfg.model_dump()
    assert dumped["layers"] == "mamba(conv=0,neg=true),s4d,s4d"
    assert json.loads(cfg.model_dump_json())["layers"] == dumped["layers"]
    assert ModelConfig.model_validate(dumped) == cfg == ModelConfig.model_validate_json(cfg.model_dump_json())
    assert ModelConfig(layers=cfg.layers) == cfg == ModelConfig(layers=list(cfg.layers))
    assert ModelConfig(layers=cfg.layers).layers is cfg.layers  # parsed layers are taken, not parsed again
    assert pickle.loads(pickle.dumps(cfg)) == cfg and len({cfg, ModelConfig(layers=str(cfg.layers))}) == 1
    with pytest.raises(UserError, match="unbalanced"):
        validated(ModelConfig, layers="mamba(conv=0")
    for bad in ([], 3, ["mamba"]):
        with pytest.raises(UserError, match="layers"):
            validated(ModelConfig, layers=bad)


#: a run's config as the version before parsed layers stored it (in the database and in checkpoints),
#: and the key it stored for it with study 's' and label 'l' (runner.run_key)
OLD_CONFIG = (
    '{"task": "parity", "model": {"layers": "mamba(conv=0,neg=true),s4d,s4d", "d_model": 8, "d_state": 16, '
    '"mlp": false, "norm": "rmsnorm"}, "train_min_len": 8, "train_max_len": 8, "steps": 1, "batch_size": 64, '
    '"lr": 0.01, "weight_decay": 0.0, "warmup_frac": 0.1, "clip": 1.0, "restart_steps": null, '
    '"restart_mult": 2, "lr_min": 0.0, "no_decay": [], "eval_every": 50, "patience": 20, '
    '"val_sequences": 512, "seed": 0, "device": "cpu", "precision": "float32", "cuda_graphs": true, '
    '"init": null, "init_noise": 0.0, "supervision": "task", "train_split": "train", '
    '"curriculum_start": null, "curriculum_stages": 4, "learned_accuracy": 0.99, "learned_validations": 3, '
    '"stop_when_learned": false}'
)
OLD_KEY = "1a1eb12e8de93fc6"


def test_a_config_stored_as_text_loads_and_keeps_its_key(tmp_path):
    from statetrack.runs.runner import run_key
    from statetrack.runs.store import Store

    store = Store(tmp_path / "runs.db")
    run_id = store.start_run(json.loads(OLD_CONFIG), study="s", label="l", key=OLD_KEY)
    stored = store.run(run_id).config
    tcfg, ecfg = run_configs(flatten(stored, "a stored run"))  # as `statetrack rerun` reads it
    assert tcfg.model.layers == parse_layers("mamba(conv=0,neg=true),s4d*2")
    assert json.dumps(tcfg.model_dump()) == OLD_CONFIG  # written back as it was stored
    assert run_key(tcfg, ecfg.model_copy(update={"device": "cpu"}), "s", "l") == OLD_KEY


def test_an_old_checkpoint_loads_with_parsed_layers():
    from pathlib import Path

    from statetrack.training.checkpoint import inspect_checkpoint

    path = Path(__file__).parent / "data" / "negmamba-parity.safetensors"
    cfg = inspect_checkpoint(path).config
    assert isinstance(cfg.model.layers, Layers) and set(cfg.model.layers.names) == {"negmamba"}


def test_layers_format_as_their_text():
    layers = parse_layers("mamba,s4d")
    assert f"{layers}" == "mamba,s4d" and f"{layers:12s}|" == "mamba,s4d   |"
    assert f"{layers!r}" == repr(layers) == "Layers('mamba,s4d')"
