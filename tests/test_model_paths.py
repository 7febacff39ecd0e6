"""Every registered mixer: the training path, a chunked forward and the step path agree (float64)."""

import pytest
import torch

from statetrack.config import ModelConfig
from statetrack.layers import MIXERS
from statetrack.model import Model


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_paths_agree(name):
    torch.manual_seed(0)
    model = Model(
        ModelConfig(layers=f"{name},{name}", d_model=8, d_state=4), vocab_size=3, num_classes=3
    ).double()
    x = torch.randint(0, 3, (2, 23))
    full, _ = model(x)
    states, chunks = model.init_state(2), []
    for c in range(0, 23, 5):
        y, states = model(x[:, c : c + 5], states)
        chunks.append(y)
    states, steps = model.init_state(2), []
    for t in range(23):
        y, states = model.step(x[:, t], states)
        steps.append(y)
    assert torch.allclose(full, torch.cat(chunks, 1), atol=1e-5, rtol=0)
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-5, rtol=0)
