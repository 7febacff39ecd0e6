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
