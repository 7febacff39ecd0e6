"""Recurrences as pure tensor functions: a float64 step-by-step reference beside each fast form.

Importing this package sets ``THP_MEM_ALLOC_ENABLE=1`` unless it is already set: PyTorch's CPU
allocator then asks for transparent huge pages for tensors of 2 MiB and more. The scans and mixers
create (B, T, E, N) tensors of tens of MiB, and on this project's machines first-touching fresh 4 KiB
pages dominated their cost: a 67 MB complex multiply took 48-90 ms without and 13-23 ms with it, a
Mamba training step (batch 64, length 64, width 64) 561 -> 196 ms, AUSSM 1,710 -> 675 ms
(docs/benchmarks.md). Set ``THP_MEM_ALLOC_ENABLE=0`` in the environment to opt out.
"""
import os

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from statetrack.ops.conv import causal_conv
from statetrack.ops.diag_scan import diag_scan, diag_scan_ref, polar, unit_phase, unit_scan, unit_scan_ref
from statetrack.ops.selective_scan import selective_scan, selective_scan_ref
from statetrack.ops.mamba_scan import mamba_scan, mamba_scan_ref
from statetrack.ops.householder import (delta_rule, delta_rule_chunked, delta_rule_recurrent, delta_rule_ref,
                                        delta_step, householder_product, interleave)

__all__ = ["causal_conv", "polar", "diag_scan", "diag_scan_ref", "unit_phase", "unit_scan", "unit_scan_ref", "delta_rule",
           "delta_rule_chunked", "delta_rule_recurrent", "delta_rule_ref", "delta_step", "householder_product",
           "interleave", "mamba_scan", "mamba_scan_ref", "selective_scan", "selective_scan_ref"]
