"""Recurrences as pure tensor functions: a float64 step-by-step reference beside each fast form."""
from statetrack.ops.diag_scan import diag_scan, diag_scan_ref

__all__ = ["diag_scan", "diag_scan_ref"]
