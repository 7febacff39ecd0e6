"""Mamba-3's complex, exponential-trapezoidal scan: its reference, its scan and its C kernel."""
