"""Long sequences: every mixer whose eigenvalues have modulus <= 1 stays finite at length 100,000."""

import pytest
import torch

from statetrack.config import ModelConfig
from statetrack.layers import MIXERS
from statetrack.model import Model

BOUNDED = sorted(
    n
    for n, cls in MIXERS.items()
    if Model(ModelConfig(layers=n, d_model=4, d_state=2), 2, 2).mixers[0].properties.eigenvalues != "n/a"
)


@pytest.mark.parametrize("name", BOUNDED)
@torch.no_grad()
def test_finite_at_100k(name):
    torch.manual_seed(0)
    model = Model(ModelConfig(layers=name, d_model=4, d_state=2), vocab_size=2, num_classes=2).eval()
    x = torch.randint(0, 2, (1, 100_000))
    states, worst = model.init_state(1), 0.0
    for c in range(0, x.shape[1], 4096):
        y, states = model(x[:, c : c + 4096], states)
        assert torch.isfinite(y).all()
        worst = max(worst, float(y.abs().max()))
    assert worst < 1e6
