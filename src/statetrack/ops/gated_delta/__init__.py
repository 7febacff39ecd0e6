"""The gated delta rule (Gated DeltaNet, Gated DeltaProduct): its chunked form and fla's kernels."""
