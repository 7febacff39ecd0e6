"""Numeric constants shared by the PyTorch forms of the ops and their Triton kernels."""

import math

#: log2(e): exp(x) = exp2(x * LOG2E), the form the scans use (one multiply folded into A)
LOG2E = 1.0 / math.log(2.0)
