"""Theory: what the proofs say about a layer stack, made executable.

    from statetrack.theory import oracle
    oracle("mamba,s4d", "parity")      # Verdict(verdict='impossible', basis='T4', reason='...')

* :func:`oracle` (module :mod:`statetrack.theory.oracle`): possible / impossible / open, with the basis
  (SCIENCE.md section 3) and a one-sentence reason, from the mixers' declared properties and the
  task's algebra (:mod:`statetrack.theory.algebra`).
* :mod:`statetrack.theory.constructions`: models whose weights are set by hand from the proofs.
* :mod:`statetrack.theory.counterexample`: the proofs' failing inputs, built from a model's weights.
* :mod:`statetrack.theory.spectrum`: eigenvalues of A(x) per layer and token.

Note: ``statetrack.theory.oracle`` is the function; import the module's other names with
``from statetrack.theory.oracle import oracle_table, layer_infos``.
"""
from statetrack.theory.oracle import Verdict, oracle, oracle_table  # noqa: F401  (the function shadows the module)
from statetrack.theory.constructions import build as build_construction  # noqa: F401
from statetrack.theory.counterexample import counterexample  # noqa: F401
from statetrack.theory.spectrum import spectrum  # noqa: F401

__all__ = ["Verdict", "oracle", "oracle_table", "build_construction", "counterexample", "spectrum"]
