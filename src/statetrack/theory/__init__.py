"""Theory: what the proofs say about a layer stack, made executable.

    from statetrack.theory import oracle
    oracle("mamba,s4d", "parity")      # Verdict(verdict='impossible', basis='T4', reason='...', facts={...})

* :func:`oracle` (module :mod:`statetrack.theory.verdicts`): possible / impossible / open, with the
  basis (a result of docs/science.md) and a one-sentence reason, from the mixers' declared properties
  and the task's algebra (:mod:`statetrack.theory.algebra`).
* :mod:`statetrack.theory.constructions`: models whose weights are set by hand from the proofs.
* :func:`counterexample` (module :mod:`statetrack.theory.witness`): the proofs' failing inputs, built
  from a model's weights.
* :func:`spectrum` (module :mod:`statetrack.theory.spectra`): eigenvalues of A(x) per layer and token.
"""
from statetrack.theory.constructions import build as build_construction
from statetrack.theory.spectra import spectrum
from statetrack.theory.verdicts import Verdict, oracle, oracle_table
from statetrack.theory.witness import counterexample

__all__ = ["Verdict", "oracle", "oracle_table", "build_construction", "counterexample", "spectrum"]
