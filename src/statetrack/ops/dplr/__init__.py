"""Diagonal-plus-low-rank transitions (RWKV-7, and the reference of the gated family): reference and chunked form."""
