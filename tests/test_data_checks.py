"""Checks of data (a task's batch, a mixer's declared properties, a matrix given to the theory) raise
exceptions that ``python -O`` keeps; ``assert`` is left for invariants of the code itself."""

import subprocess
import sys

import numpy as np
import pytest

from statetrack.layers.base import EigenvalueDomain, Properties, Structure
from statetrack.tasks.base import Batch
from statetrack.theory.representations import householder_factors


def test_a_batch_of_mismatched_arrays_is_refused():
    x = np.zeros((2, 5), dtype=np.int64)
    with pytest.raises(ValueError, match="differ in shape"):
        Batch(x, x[:, :4], np.ones((2, 5), dtype=bool))


def test_properties_read_names_as_enums_and_refuse_unknown_ones():
    p = Properties(input_dependent=True, eigenvalues="[-1,1]", structure="diagonal")
    assert p.eigenvalues is EigenvalueDomain.REAL and p.structure is Structure.DIAGONAL
    with pytest.raises(ValueError, match=r"unknown eigenvalues '\[-2,2\]'.*allowed: '\[0,1\]'"):
        Properties(input_dependent=True, eigenvalues="[-2,2]", structure="diagonal")
    with pytest.raises(ValueError, match="unknown structure 'circulant'"):
        Properties(input_dependent=True, eigenvalues="[0,1]", structure="circulant")


def test_householder_factors_refuse_a_matrix_that_is_not_orthogonal():
    assert len(householder_factors(np.array([[0.0, 1.0], [1.0, 0.0]]))) == 1
    with pytest.raises(ValueError, match="not orthogonal"):
        householder_factors(np.array([[2.0, 0.0], [0.0, 1.0]]))


def test_the_checks_hold_under_python_optimised():
    code = (
        "import numpy as np\nfrom statetrack.tasks.base import Batch\n"
        "x = np.zeros((2, 5), dtype=np.int64)\n"
        "try:\n    Batch(x, x[:, :4], x.astype(bool))\nexcept ValueError:\n    print('refused')\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "refused", out.stderr
