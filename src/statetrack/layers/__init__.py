"""Mixers by name. Each mixer declares its properties (input dependence, eigenvalues, structure).

Importing this package is light: the mixers' declarations (``layers.properties``, ``layers.declarations``)
need no torch, so ``statetrack models`` and the oracle start without it. The classes (``MIXERS``,
``Mixer``, ``build_mixer``) are loaded on first use (PEP 562): the built-in mixers are the modules of this
package, and ``register`` adds a plugin's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from statetrack import plugins
from statetrack.errors import allowed
from statetrack.layers import declarations as _declarations  # noqa: F401  (the built-ins' declarations)
from statetrack.layers.properties import (
    DECLARED,
    ORIGIN,
    Declared,
    EigenvalueDomain,
    Properties,
    Structure,
    check_options,
    declaration,
    declare,
    declared_properties,
)
from statetrack.spec import LayerSpec

if TYPE_CHECKING:
    from statetrack.layers.base import Mixer

#: mixer name -> class, the built-ins first (filled by ``mixers()``, the first time a class is needed)
_MIXERS: dict[str, type[Mixer]] = {}
#: the built-in mixers' classes: module, class names
_BUILTIN = {
    "rnn": ("RNN", "LSTM", "GRU"),
    "s4d": ("S4D",),
    "mamba": ("Mamba", "NegativeMamba"),
    "aussm": ("AUSSM", "SimpleAUSSM", "DCD"),
    "deltanet": ("DeltaNet", "DeltaProduct"),
    "transformer": ("Transformer",),
    "mamba2": ("Mamba2",),
    "mamba3": ("Mamba3",),
    "gateddeltanet": ("GatedDeltaNet",),
    "rwkv7": ("RWKV7",),
    "mlstm": ("MLSTM",),
    "slstm": ("SLSTM",),
    "lru": ("LRU",),
    "gla": ("GLA",),
    "gateddeltaproduct": ("GatedDeltaProduct",),
    "kda": ("KDA",),
    "pdssm": ("PDSSM",),
}


_loaded: list[bool] = []  # whether the built-in classes are in _MIXERS


def mixers() -> dict[str, type[Mixer]]:
    """Every registered mixer class by name, in the order of the declarations (imports torch)."""
    if not _loaded:
        _loaded.append(True)
        found = {}
        for module, names in _BUILTIN.items():
            mod = importlib.import_module(
                f"statetrack.layers.{module}"
            )  # heavy (torch): classes on first use
            for cls_name in names:
                cls = getattr(mod, cls_name)
                found[cls.name] = cls
        plugged = dict(_MIXERS)
        _MIXERS.clear()
        _MIXERS.update({n: found[n] for n in DECLARED if n in found})
        _MIXERS.update(plugged)
    return _MIXERS


def register(cls: type[Mixer]) -> type[Mixer]:
    """Register a Mixer subclass under its ``name`` (usable as a class decorator): its class, and its
    declaration (description, options, and properties read from an instance built at small sizes). A name
    registered by another module (statetrack's own mixers included) is not replaced: a UserError says so."""
    from statetrack.layers.base import Mixer  # heavy (torch): a class to register has imported it anyway

    registry = mixers()  # the built-ins first, so that a plugin cannot take one of their names
    plugins.check_replacement("mixer", cls.name, registry.get(cls.name), cls)
    registry[cls.name] = cls
    plugin = plugins.origin(cls)
    if plugin:
        ORIGIN[cls.name] = plugin
    own = cls.properties is not Mixer.properties  # a plugin's class computes its own

    def props(o: dict[str, Any], cls: type[Mixer] = cls) -> Properties:
        return cls(8, 4, **{k: v for k, v in o.items() if k in cls.options}).properties

    if own or cls.name not in DECLARED:
        declare(
            Declared(
                cls.name, cls.description, dict(cls.options), props if own else None, dict(cls.fixed_options)
            )
        )
    return cls


def build_mixer(spec: LayerSpec, d_model: int, d_state: int) -> Mixer:
    cls = mixers().get(spec.name)
    if cls is None:
        declaration(spec.name)  # an unknown name: the allowed ones (plugins loaded first)
        cls = mixers().get(spec.name)
    if cls is None:
        raise allowed("mixer", spec.name, mixers())
    return cls(d_model, d_state, **check_options(cls, spec.options))


def models_table() -> list[dict]:
    """One row per declared mixer (for ``statetrack models``), read from the declarations: no torch.

    Keys: name, description, input_dependent, eigenvalues, structure, n_h, linear, rounding (how float32
    rounding reaches modulus 1, or ""), options (the defaults). Properties that depend on an option
    (mamba's and deltanet's ``neg``, s4d's ``init``) are those of the defaults; the description names the
    switch."""
    rows = []
    for name, d in DECLARED.items():
        p = d.properties_of()
        rows.append(
            {
                "name": name,
                "description": d.description,
                "input_dependent": p.input_dependent,
                "eigenvalues": p.eigenvalues,
                "structure": p.structure,
                "n_h": p.n_h,
                "linear": p.linear,
                "rounding": p.rounding,
                "options": dict(d.options),
            }
        )
    return rows


def __getattr__(name: str) -> Any:
    if name == "MIXERS":  # the classes, loaded on first use
        return mixers()
    if name == "Mixer":
        from statetrack.layers.base import Mixer  # heavy (torch): the class on first use

        return Mixer
    raise AttributeError(f"module 'statetrack.layers' has no attribute {name!r}")


__all__ = [
    "DECLARED",
    "MIXERS",
    "ORIGIN",
    "Declared",
    "EigenvalueDomain",
    "Mixer",
    "Properties",
    "Structure",
    "build_mixer",
    "declaration",
    "declared_properties",
    "mixers",
    "models_table",
    "register",
]
