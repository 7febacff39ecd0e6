"""Recurrences as pure tensor functions: a float64 step-by-step reference beside each fast form."""
from statetrack.ops.conv import causal_conv
from statetrack.ops.diag_scan import diag_scan, diag_scan_ref, unit_phase, unit_scan, unit_scan_ref
from statetrack.ops.selective_scan import selective_scan, selective_scan_ref
from statetrack.ops.householder import (delta_rule, delta_rule_chunked, delta_rule_recurrent, delta_rule_ref,
                                        delta_step, householder_product, interleave)

__all__ = ["causal_conv", "diag_scan", "diag_scan_ref", "unit_phase", "unit_scan", "unit_scan_ref", "delta_rule",
           "delta_rule_chunked", "delta_rule_recurrent", "delta_rule_ref", "delta_step", "householder_product",
           "interleave", "selective_scan", "selective_scan_ref"]
