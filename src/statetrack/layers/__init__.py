"""Mixers by name. Each mixer declares its properties (input dependence, eigenvalues, structure)."""
from __future__ import annotations

from statetrack import plugins
from statetrack.errors import allowed
from statetrack.layers.aussm import AUSSM, DCD, SimpleAUSSM
from statetrack.layers.base import Mixer, Properties, check_options
from statetrack.layers.deltanet import DeltaNet, DeltaProduct
from statetrack.layers.gateddeltanet import GatedDeltaNet
from statetrack.layers.gateddeltaproduct import GatedDeltaProduct
from statetrack.layers.gla import GLA
from statetrack.layers.kda import KDA
from statetrack.layers.lru import LRU
from statetrack.layers.mamba import Mamba, NegativeMamba
from statetrack.layers.mamba2 import Mamba2
from statetrack.layers.mamba3 import Mamba3
from statetrack.layers.mlstm import MLSTM
from statetrack.layers.pdssm import PDSSM
from statetrack.layers.rnn import GRU, LSTM, RNN
from statetrack.layers.rwkv7 import RWKV7
from statetrack.layers.s4d import S4D
from statetrack.layers.slstm import SLSTM
from statetrack.layers.transformer import Transformer
from statetrack.spec import LayerSpec

MIXERS: dict[str, type[Mixer]] = {}
#: mixer name -> the plugin module that registered it (mixers of statetrack itself are absent)
ORIGIN: dict[str, str] = {}


def register(cls: type[Mixer]) -> type[Mixer]:
    """Register a Mixer subclass under its ``name`` (usable as a class decorator). A name registered by
    another module (statetrack's own mixers included) is not replaced: a UserError says so."""
    plugins.check_replacement("mixer", cls.name, MIXERS.get(cls.name), cls)
    MIXERS[cls.name] = cls
    if plugins.origin(cls):
        ORIGIN[cls.name] = plugins.origin(cls)
    return cls


for _cls in (RNN, LSTM, GRU, S4D, Mamba, NegativeMamba, AUSSM, SimpleAUSSM, DCD, DeltaNet, DeltaProduct,
             Transformer, Mamba2, Mamba3, GatedDeltaNet, RWKV7, MLSTM, SLSTM, LRU, GLA, GatedDeltaProduct, KDA, PDSSM):
    register(_cls)


def build_mixer(spec: LayerSpec, d_model: int, d_state: int) -> Mixer:
    if spec.name not in MIXERS:
        plugins.autoload()
    if spec.name not in MIXERS:
        raise allowed("mixer", spec.name, MIXERS)
    cls = MIXERS[spec.name]
    return cls(d_model, d_state, **check_options(cls, spec.options))


def models_table() -> list[dict]:
    """One row per registered mixer, built with its default options (for ``statetrack models``).

    Keys: name, description, input_dependent, eigenvalues, structure, n_h, linear, rounding (how float32
    rounding reaches modulus 1, or ""), options (the defaults). Properties that depend on an option
    (mamba's and deltanet's ``neg``, s4d's ``init``)
    are those of the defaults; the description names the switch."""
    rows = []
    for name, cls in MIXERS.items():
        p = cls(8, 4, **check_options(cls, {})).properties
        rows.append({"name": name, "description": cls.description, "input_dependent": p.input_dependent,
                     "eigenvalues": p.eigenvalues, "structure": p.structure, "n_h": p.n_h, "linear": p.linear,
                     "rounding": p.rounding,
                     "options": dict(cls.options)})
    return rows


__all__ = ["MIXERS", "ORIGIN", "Mixer", "Properties", "build_mixer", "models_table", "register"]
