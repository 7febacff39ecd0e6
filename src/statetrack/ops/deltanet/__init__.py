"""The delta rule (DeltaNet, DeltaProduct's Householder products): its reference, its chunked form, fla's kernels."""
