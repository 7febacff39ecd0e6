"""Kimi Delta Attention: its chunked form and fla's kernels."""
