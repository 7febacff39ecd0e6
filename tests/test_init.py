"""Training from a construction: the starting weights are validated (step 0) and kept unless beaten,
the construction defines the model, and the S3 construction survives training."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from statetrack import EvalConfig, ModelConfig, TrainConfig, evaluate, get_task, train
from statetrack.cli import main
from statetrack.constructions import build, init_config, init_model


def _s3_cfg(**kw):
    c = build("s3-aussm")
    base = {
        "task": "group:S3",
        "model": c.config.model,
        "train_min_len": 1,
        "train_max_len": 16,
        "steps": 20,
        "eval_every": 10,
        "lr": 0.01,
        "weight_decay": 0.0,
        "seed": 0,
        "val_sequences": 128,
        "batch_size": 32,
        "init": "construction:s3-aussm",
    }
    base.update(kw)
    return TrainConfig(**base)


def test_step_zero_is_validated_and_kept_unless_beaten():
    cfg = TrainConfig(
        model=ModelConfig(layers="rnn", d_model=2, d_state=8),
        train_min_len=8,
        train_max_len=8,
        steps=30,
        eval_every=10,
        lr=1.0,
        clip=100.0,
        weight_decay=0.0,
        seed=1,
        val_sequences=64,
    )
    from statetrack.model import build_model

    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, get_task("parity"))
    start = copy.deepcopy(model.state_dict())
    r = train(cfg, model=model)
    assert r.curve[0].step == 0 and r.curve[0].train_loss is None
    assert r.curve[0].val_accuracy <= r.best_val_accuracy
    later = [(p.val_accuracy, -p.val_loss) for p in r.curve[1:]]
    if r.best_step == 0:  # an absurd learning rate: nothing beat the start, so the start is returned
        assert all(x <= (r.curve[0].val_accuracy, -r.curve[0].val_loss) for x in later)
        assert all(torch.equal(start[k], v) for k, v in r.model.state_dict().items())
    else:
        assert max(later) > (r.curve[0].val_accuracy, -r.curve[0].val_loss)


def test_construction_readout_is_a_fixed_point():
    """The read-out is scaled to a margin of 50: the training loss's gradient is far below Adam's eps,
    so a step moves no weight (measured: max change about 1e-10 at lr 0.01)."""
    c = build("s3-aussm")
    assert c.notes["readout_scale"] > 1
    m = c.model.train()
    before = [p.detach().clone() for p in m.parameters()]
    opt = torch.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.0)
    task = get_task("group:S3")
    b = task.sample_batch(np.random.default_rng(0), 32, 16)
    logits, _ = m(torch.as_tensor(b.inputs))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.as_tensor(b.targets).flatten())
    assert float(loss.detach()) < 1e-15
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert (
        max(float((p.detach() - q).abs().max()) for p, q in zip(m.parameters(), before, strict=True)) < 1e-6
    )


def test_training_from_the_s3_construction_keeps_it():
    res = train(_s3_cfg(), model=init_model(_s3_cfg()))
    assert res.curve[0].step == 0 and res.curve[0].val_accuracy == 1.0
    m = evaluate(res.model, get_task("group:S3"), EvalConfig(lengths=[100], batch_size=64))[0]
    assert m.accuracy == 1.0


def test_hundred_steps_from_the_s3_construction_keep_length_1000():
    cfg = _s3_cfg(steps=100, eval_every=50, val_sequences=512, batch_size=64)
    res = train(cfg, model=init_model(cfg))
    ms = evaluate(res.model, get_task("group:S3"), EvalConfig(lengths=[100, 1000], batch_size=128))
    assert all(m.accuracy >= 0.99 for m in ms)


def test_init_config_checks_given_fields():
    mine = init_config("construction:s3-aussm", "group:S3", layers="aussm*2", d_model=16, d_state=None)
    assert mine.layers == "aussm,aussm" and mine.d_state == 1
    with pytest.raises(Exception, match="d_model 8 differs from the construction's 16"):
        init_config("construction:s3-aussm", "group:S3", d_model=8)


def test_cli_init_fields_must_agree(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert (
        main(["train", "--task", "group:S3", "--init", "construction:s3-aussm", "--d-model", "8", "--db", db])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "d_model 8" in err and "16" in err
    argv = ["train", "--task", "group:S3", "--init", "construction:s3-aussm", "--norm", "rmsnorm", "--db", db]
    assert main(argv) == 2
    assert "norm 'rmsnorm'" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()
    assert (
        main(
            [
                "train",
                "--task",
                "group:S3",
                "--init",
                "construction:s3-aussm",
                "--layers",
                "aussm*2",
                "--d-state",
                "1",
                "--steps",
                "2",
                "--eval-every",
                "1",
                "--train-lengths",
                "1-8",
                "--test-lengths",
                "16",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    from statetrack.runs.store import Store

    run = Store(db).runs()[-1]
    assert run.config["model"] == build("s3-aussm").config.model.model_dump()
    assert run.summary["best_step"] == 0


def test_cli_init_without_a_task_trains_on_the_construction_s(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert (
        main(
            [
                "train",
                "--init",
                "construction:s3-aussm",
                "--steps",
                "2",
                "--eval-every",
                "1",
                "--train-lengths",
                "1-8",
                "--test-lengths",
                "16",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    from statetrack.runs.store import Store

    assert Store(db).runs()[-1].task == build("s3-aussm").config.task == "group:S3"
    assert main(["train", "--task", "parity", "--init", "construction:s3-aussm", "--db", db]) == 2
    assert "solves 'group:S3', not 'parity'" in capsys.readouterr().err
