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


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "runs" / "test.db")
