"""Mixers by name. Each mixer declares its properties (input dependence, eigenvalues, structure)."""
from __future__ import annotations

from statetrack.errors import allowed
from statetrack.layers.base import Mixer, Properties, check_options
from statetrack.layers.mamba import Mamba, NegativeMamba
from statetrack.layers.rnn import GRU, LSTM, RNN
from statetrack.layers.s4d import S4D
from statetrack.spec import LayerSpec

MIXERS: dict[str, type[Mixer]] = {}


def register(cls: type[Mixer]) -> type[Mixer]:
    MIXERS[cls.name] = cls
    return cls


for _cls in (RNN, LSTM, GRU, S4D, Mamba, NegativeMamba):
    register(_cls)


def build_mixer(spec: LayerSpec, d_model: int, d_state: int) -> Mixer:
    if spec.name not in MIXERS:
        raise allowed("mixer", spec.name, MIXERS)
    cls = MIXERS[spec.name]
    return cls(d_model, d_state, **check_options(cls, spec.options))


__all__ = ["MIXERS", "Mixer", "Properties", "build_mixer", "register"]
