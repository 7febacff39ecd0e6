"""Theory: what the proofs say about a layer stack, made executable.

    from statetrack.theory import oracle
    oracle("mamba,s4d", "parity")      # Verdict(verdict='impossible', basis='T4', reason='...', facts={...})

* :func:`oracle` (module :mod:`statetrack.theory.verdicts`, its rules in :mod:`statetrack.theory.rules`):
  possible / impossible / open, with the basis (a result of docs/science.md) and a one-sentence reason,
  from the mixers' declared properties and the task's algebra (:mod:`statetrack.theory.algebra`).
* :mod:`statetrack.theory.constructions`: models whose weights are set by hand from the proofs.
* :func:`counterexample` (module :mod:`statetrack.theory.witness`): the proofs' failing inputs, built
  from a model's weights.
* :func:`spectrum` (module :mod:`statetrack.theory.spectra`): eigenvalues of A(x) per layer and token.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statetrack.theory.constructions import build as build_construction
    from statetrack.theory.spectra import spectrum
    from statetrack.theory.verdicts import Verdict, oracle, oracle_table
    from statetrack.theory.witness import counterexample

#: public name -> (module, its name there): loaded on first use (PEP 562), so that the oracle, which needs
#: no torch, starts without it
_API = {
    "Verdict": ("verdicts", "Verdict"),
    "oracle": ("verdicts", "oracle"),
    "oracle_table": ("verdicts", "oracle_table"),
    "build_construction": ("constructions", "build"),
    "counterexample": ("witness", "counterexample"),
    "spectrum": ("spectra", "spectrum"),
}


def __getattr__(name: str):
    if name in _API:
        module, attr = _API[name]
        value = getattr(importlib.import_module(f"statetrack.theory.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'statetrack.theory' has no attribute {name!r}")


__all__ = ["Verdict", "oracle", "oracle_table", "build_construction", "counterexample", "spectrum"]
