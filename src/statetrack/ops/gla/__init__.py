"""Gated linear attention: its chunked form and fla's kernels."""
