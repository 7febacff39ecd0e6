"""A model read against the proofs: what its weights say, where the theory says it must fail.

* :func:`spectrum` (module :mod:`statetrack.analysis.spectra`): the eigenvalues of A(x) per layer and token,
  and how near they sit to the roots of unity the task's cycles need (``cycle_fit``, ``channel_fit``).
* :func:`counterexample` (module :mod:`statetrack.analysis.counterexamples`): the proofs' failing inputs, built from
  the model's weights, and the model run on them.

Both read a model (or a checkpoint) and so need torch; the oracle they are read beside is pure math
(:mod:`statetrack.theory`). The hand-set weights of the constructive proofs are :mod:`statetrack.constructions`.
"""

from statetrack.analysis.counterexamples import counterexample
from statetrack.analysis.spectra import spectrum

__all__ = ["counterexample", "spectrum"]
