import os

import pytest
import torch

from statetrack import memory

memory.configure()  # as the CLI and the sweep workers do
torch.set_num_threads(1)
os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")

try:
    from hypothesis import settings

    settings.register_profile("ci", deadline=None, max_examples=200)
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # hypothesis is a test requirement; tests that need it import it themselves
    pass


@pytest.fixture(scope="session", autouse=True)
def corpus_cache(tmp_path_factory):
    """Corpora built by the tests go to a temporary cache, never the user's."""
    old = os.environ.get("STATETRACK_CACHE")
    os.environ["STATETRACK_CACHE"] = str(tmp_path_factory.mktemp("statetrack-cache"))
    yield
    if old is None:
        os.environ.pop("STATETRACK_CACHE", None)
    else:
        os.environ["STATETRACK_CACHE"] = old


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "runs" / "test.db")


@pytest.fixture
def dfa_task(tmp_path):
    """dfa_task(name, states, alphabet, start, accept, rows) -> 'dfa:PATH' of a JSON DFA written to tmp_path;
    rows[i] lists the targets of states[i] on each letter of the alphabet, in order."""
    import json

    def make(name, states, alphabet, start, accept, rows):
        spec = {"states": states, "alphabet": alphabet, "start": start, "accept": accept,
                "transitions": {s: dict(zip(alphabet, r)) for s, r in zip(states, rows)}}
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(spec))
        return f"dfa:{p}"
    return make


@pytest.fixture
def rnn_study(tmp_path):
    """make(seeds, steps) -> the path of a one-model study (an RNN on parity) that runs in seconds."""
    def make(seeds: int = 1, steps: int = 5) -> str:
        path = tmp_path / f"s-{seeds}-{steps}.yaml"
        path.write_text(
            "name: s\ntitle: s\nsource: test\ntask: parity\n"
            "train: {batch_size: 8, eval_every: 5, val_sequences: 16}\n"
            "models: [{label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [4, 4]}]\n"
            f"scales: {{quick: {{seeds: {seeds}, steps: {steps}, eval_batch: 8, test_lengths: [8]}}}}\n")
        return str(path)
    return make
