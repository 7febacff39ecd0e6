"""The Python API reports progress as the command line does: log lines by default, a callback, or none."""

import logging
import subprocess
import sys
import textwrap

from statetrack import ModelConfig, TrainConfig, train
from statetrack.reproduce import sweep

CFG = TrainConfig(
    task="parity",
    model=ModelConfig(layers="rnn", d_model=2, d_state=4),
    steps=20,
    eval_every=10,
    batch_size=8,
    val_sequences=16,
    device="cpu",
)
STUDY = textwrap.dedent("""
    name: tiny-progress
    title: tiny
    source: test
    task: parity
    train: {batch_size: 8, eval_every: 5, val_sequences: 8, lr: 0.01}
    models:
      - {label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [2, 4]}
    scales:
      quick: {seeds: 2, steps: 10, eval_batch: 8, test_lengths: [8]}
""")


def test_train_logs_each_validation_by_default(caplog):
    with caplog.at_level(logging.INFO, logger="statetrack"):
        train(CFG)
    lines = [r.getMessage() for r in caplog.records if r.name == "statetrack"]
    assert [line.split(":")[0] for line in lines] == ["train rnn on parity"] * 3  # steps 0, 10, 20
    assert "step 20/20  loss " in lines[-1] and "val acc " in lines[-1] and "ETA" in lines[-1]


def test_train_progress_callback_or_none(caplog):
    events = []
    with caplog.at_level(logging.INFO, logger="statetrack"):
        train(CFG, progress=events.append)
        train(CFG, progress=False)
        train(CFG, on_step=lambda _step, _info: None)  # own callbacks: no log either
    assert not [r for r in caplog.records if r.name == "statetrack"]
    assert [e["step"] for e in events] == [0, 10, 20] and all(e["event"] == "validation" for e in events)
    assert events[-1]["steps"] == 20 and events[-1]["message"].startswith("train rnn on parity: step 20/20")


def test_sweep_logs_each_finished_run(tmp_path, caplog):
    (tmp_path / "s.yaml").write_text(STUDY)
    with caplog.at_level(logging.INFO, logger="statetrack"):
        sweep(str(tmp_path / "s.yaml"), db=str(tmp_path / "r.db"))
    done = [r.getMessage() for r in caplog.records if "done:" in r.getMessage()]
    assert len(done) == 2 and done[0].startswith(
        "tiny-progress (quick): run 1/2 done: RNN / parity lr 0.01 seed 0"
    )
    events = []
    sweep(str(tmp_path / "s.yaml"), db=str(tmp_path / "r.db"), progress=events.append)  # reused: 2 events
    assert [e["event"] for e in events] == ["run done", "run done"] and all(e["reused"] for e in events)


def test_a_plain_script_prints_progress_on_stderr():
    code = (
        "from statetrack import ModelConfig, TrainConfig, train\n"
        "train(TrainConfig(task='parity', model=ModelConfig(layers='rnn', d_model=2, d_state=4), steps=10,"
        " eval_every=5, batch_size=8, val_sequences=16, device='cpu'))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout == "" and p.stderr.count("train rnn on parity: step ") == 3, p.stderr
