"""The automaton a network computes: the task's minimal automaton for every construction, and for the
twoloops RNN (tests/data) a split of state D, with the shortest word where it and the task disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from statetrack.constructions import available, build
from statetrack.tasks import get_task
from statetrack.training.extract import extract
from statetrack.training.verify import task_automaton

DATA = Path(__file__).parent / "data"


def _constructions() -> list[str]:
    return [c["name"] for c in available() if c["available"]]


@pytest.mark.parametrize("name", _constructions())
def test_every_construction_computes_its_tasks_minimal_automaton(name):
    c = build(name)
    task = get_task(c.config.task)
    if task.automaton() is None:
        pytest.skip(f"{task.name} has no automaton")
    ex = extract(c.model, task, budget=1 << 10)
    mini = task_automaton(c.model, task)
    assert ex.equals_task(), ex.as_dict()
    # one extracted state per reachable task state within the table's prefixes
    reached = {q for ts in ex.task_states for q in ts}
    assert ex.n_states == len(reached)
    assert all(len(ts) == 1 for ts in ex.task_states)
    assert reached <= set(range(mini.n_states))


def test_twoloops_rnn_splits_state_d_and_names_the_word_where_it_errs(monkeypatch):
    from statetrack.training.checkpoint import load_checkpoint

    monkeypatch.chdir(DATA)
    model, _cfg, task, _ = load_checkpoint("twoloops-rnn.safetensors")
    ex = extract(model, task)
    assert (ex.depth, ex.prefix_len) == (18, 7)
    assert not ex.equals_task() and not ex.merges
    [split] = ex.splits
    assert split["task_state"] == "D"
    parts = {p["state"]: p["prefixes"] for p in split["parts"]}
    assert parts["ab"][0] == "ab" and parts["babaaaa"] == ["babaaaa"]
    assert "".join(ex.symbols[a] for a in ex.disagreement) == "babaaaabbbbbbbbbba"


def test_extract_command_prints_the_split(monkeypatch, capsys):
    from statetrack.cli import main

    monkeypatch.chdir(DATA)
    assert main(["extract", "twoloops-rnn.safetensors", "--budget", str(1 << 19)]) == 0
    out = capsys.readouterr().out
    assert "task state D is split" in out and "babaaaabbbbbbbbbba" in out
