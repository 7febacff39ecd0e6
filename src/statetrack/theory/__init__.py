"""Theory: what the proofs say about a layer stack, made executable, as pure math (no torch).

    from statetrack.theory import oracle
    oracle("mamba,s4d", "parity")      # Verdict(verdict='impossible', basis='T4', reason='...', facts={...})

* :func:`oracle` (module :mod:`statetrack.theory.verdicts`, its rules in :mod:`statetrack.theory.rules`):
  possible / impossible / open, with the basis (a result of docs/science.md) and a one-sentence reason,
  from the mixers' declared properties and the task's algebra (:mod:`statetrack.theory.actions`).
* the algebra it reads: monoids (:mod:`~statetrack.theory.monoid`), orthogonal representations
  (:mod:`~statetrack.theory.representations`), float32 holds (:mod:`~statetrack.theory.precision`) and the
  layers as classes (:mod:`~statetrack.theory.layer_classes`).

What needs a model lives beside the model: the proofs' hand-set weights in :mod:`statetrack.constructions`,
a trained model read against the proofs (its failing inputs, its spectra) in :mod:`statetrack.analysis`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statetrack.theory.verdicts import Verdict, oracle, oracle_table

#: public name -> (module, its name there): loaded on first use (PEP 562), so that ``import statetrack.theory``
#: loads neither numpy nor the rules until the oracle is asked
_API = {
    "Verdict": ("verdicts", "Verdict"),
    "oracle": ("verdicts", "oracle"),
    "oracle_table": ("verdicts", "oracle_table"),
}


def __getattr__(name: str):
    if name in _API:
        module, attr = _API[name]
        value = getattr(importlib.import_module(f"statetrack.theory.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'statetrack.theory' has no attribute {name!r}")


__all__ = ["Verdict", "oracle", "oracle_table"]
