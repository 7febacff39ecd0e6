"""Recurrences as pure tensor functions: a float64 step-by-step reference beside each fast form.

One folder per recurrence (``ops/<name>/``: ``reference.py``, its fast forms, its C source where it has one,
``declaration.py``), listed in ``ops.recurrences.BUILTIN``; the modules of this folder are what they share
(docs/architecture.md, "One folder per recurrence"). This package re-exports the most used functions.

The CPU forms are fastest with the allocator settings of :mod:`statetrack.training.memory` (huge pages for
large tensors, fixed glibc malloc thresholds: training steps up to 2.5x faster on this project's
machines); the entry points (the CLI, sweep workers, the benchmarks) apply them with
``memory.configure()``, a notebook may call it too. Importing this package changes nothing.
"""

from statetrack.ops.conv import causal_conv
from statetrack.ops.deltanet.chunk import delta_rule, delta_rule_chunked, interleave
from statetrack.ops.deltanet.reference import (
    delta_rule_recurrent,
    delta_rule_ref,
    delta_step,
    householder_product,
)
from statetrack.ops.diag.reference import diag_scan_ref, unit_scan_ref
from statetrack.ops.diag.scan import diag_scan, polar, unit_phase, unit_scan
from statetrack.ops.mamba.reference import mamba_scan_ref
from statetrack.ops.mamba.scan import mamba_scan
from statetrack.ops.selective.reference import polar_readout_ref, selective_scan_ref
from statetrack.ops.selective.scan import polar_readout, selective_scan

__all__ = [
    "causal_conv",
    "polar",
    "diag_scan",
    "diag_scan_ref",
    "unit_phase",
    "unit_scan",
    "unit_scan_ref",
    "delta_rule",
    "delta_rule_chunked",
    "delta_rule_recurrent",
    "delta_rule_ref",
    "delta_step",
    "householder_product",
    "interleave",
    "mamba_scan",
    "mamba_scan_ref",
    "polar_readout",
    "polar_readout_ref",
    "selective_scan",
    "selective_scan_ref",
]
