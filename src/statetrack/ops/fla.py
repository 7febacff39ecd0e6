"""The gated delta rule, Gated DeltaProduct, KDA, RWKV-7 and GLA through flash-linear-attention's Triton
kernels (CUDA; the optional package ``fla-core``).

Same contracts as ``ops.dplr.chunk.gated_delta_rule``, ``gated_delta_product``, ``kda_rule``, ``rwkv7_rule`` and
``gla_rule``: [B, T, H, ...] tensors, the state [B, H, K, V], o_t = S_t^T q_t, which is fla's layout. fla's
conventions that differ from ours are turned off: the query scale (fla defaults to K^-1/2; our layers scale
q themselves, so scale = 1) and fla's in-kernel L2 normalisation and gate activations (our layers compute
beta, the gates and the normalised keys). The recurrences are the same equations (``tests/test_ops_frontier.py``
checks ours against fla's PyTorch references on the CPU where fla is installed):

* gated delta rule: S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T;
* Gated DeltaProduct: the gate, then n_h delta steps per token (fla's (T n_h) sub-step layout);
* KDA: S_t = (I - beta_t k_t k_t^T) diag(exp(g_t)) S_{t-1} + beta_t k_t v_t^T, g per key channel;
* RWKV-7 (fla's DPLR form): S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T with
  a = kappa_hat, b = -kappa_hat * a_lr (what fla's RWKV-7 layer passes as a = -kk, b = kk * a);
* GLA: S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T.

The exactness rule is the delta rule's (``ops.deltanet.fla``): where a transition can have a unit-modulus
eigenvalue other than 1 (``neg=true``: beta up to 2, a reflection) chunk kernels with bfloat16 keys do not
keep products of reflections exact, so the float32 recurrent kernel runs, in evaluation only: fla
implements no backward pass for it, so training with ``neg=true`` runs the PyTorch chunked forms
(``ops.gated_delta.chunk``, ``ops.kda.chunk``) on the GPU. The others (Gated DeltaNet, Gated DeltaProduct and KDA
with beta in [0, 1], RWKV-7, GLA) have no eigenvalue of modulus 1 but 1 and run fla's chunk kernels with
q, k, v (and RWKV-7's a, b) in bfloat16 and the gates, the state and the accumulation in float32, so they
agree with the CPU to bfloat16 precision; the log-gates stay float32. The delta-rule forms with beta in
[0, 1] and GLA are contractions (every factor has 2-norm <= 1), so rounding errors do not grow along the
sequence.

RWKV-7's transitions are not contractions: one has 2-norm up to 1.14, a product of two spectral radius up to
1.24 (a = (0.01, 0.99) then (0.99, 0.01), w = 0.999, removal keys at 24 and 66 degrees) or complex
eigenvalues (6% of products of transitions whose a lie near the ends of (0, 1)), so a state can grow. Its
chunk kernel is kept on a measured error bound: on the CPU, the float64 recurrence on inputs rounded to
bfloat16 (what the kernel reads; its float32 accumulation is not emulated) is off from the exact one by
2.7e-3 at T = 1,000 and 3.5e-3 at T = 10,000 for the layer at its initialisation, 3.1e-3 and 4.2e-3 over
the whole parameter ranges, and 2.0e-2 at T = 200 on that alternating pair, whose state grows to 6e9
(relative to the largest output; the PyTorch float32 chunked form is within 9e-7 in all of these):
``bench/rwkv7_precision.py``. On an H100, fla's kernel for one layer at T = 64 was 8.9e-3 from the
float64 reference and its gradients 1.9e-2 (docs/results/gpu/). These paths run only on
CUDA tensors with fla installed (``ops.dispatch.use_fla``); ``tests/test_kernels.py`` checks them against
the float64 references where a GPU is present, and ``tests/test_ops_frontier.py`` their dispatch on the
CPU with stand-in kernels.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor

KERNELS = ("chunk", "recurrent")


@functools.cache
def gated_chunk_backward() -> bool:
    """Does fla's gated chunk backward pass run here? fla 0.6 refuses it (its ``chunk_bwd_dqkwg`` with a
    gate, which the gated delta rule and Gated DeltaProduct use) on Hopper GPUs with Triton 3.4.0 up to
    3.7.1, where Triton miscompiles it, unless tilelang is installed. Seen on an H100 with Triton 3.6.0
    (bench/gpu_check.py); training then runs the PyTorch chunked form of ``ops.dplr.chunk`` instead, and
    evaluation (no backward pass) still runs fla's chunk kernel."""
    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:  # another fla: it has no such refusal
        return True
    broken = IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1
    return not broken or importlib.util.find_spec("tilelang") is not None


def _state(S0: Tensor | None) -> Tensor | None:
    return None if S0 is None else S0.to(torch.float32)


def gated_delta_rule_fla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    kernel: str = "recurrent",
) -> tuple[Tensor, Tensor]:
    """fla's gated delta rule; ``kernel`` "recurrent" (float32) or "chunk" (bfloat16 q, k, v)."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    dtype = v.dtype
    beta, g = beta.to(torch.float32), g.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_gated_delta_rule(
            q,
            k,
            v,
            g,
            beta,
            scale=1.0,
            initial_state=_state(S0),
            output_final_state=True,
            use_qk_l2norm_in_kernel=False,
        )
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_gated_delta_rule(
            q,
            k,
            v,
            g=g,
            beta=beta,
            scale=1.0,
            initial_state=_state(S0),
            output_final_state=True,
            use_qk_l2norm_in_kernel=False,
        )
    else:
        raise ValueError(f"unknown gated delta rule kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)


def gated_delta_product_fla(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """fla's ``chunk_gated_delta_product`` (bfloat16 q, k, v; float32 gate, beta and state) for beta in [0, 1].
    k (B, T, n_h, H, d_k), v (B, T, n_h, H, d_v), beta (B, T, n_h, H) are laid out as fla's (T n_h) sub-steps."""
    from fla.ops.gated_delta_product import chunk_gated_delta_product

    dtype = v.dtype
    B, T, nh, H, _ = k.shape
    k, v = (t.reshape(B, T * nh, H, t.shape[-1]) for t in (k, v))
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    o, S = chunk_gated_delta_product(
        q,
        k,
        v,
        g.to(torch.float32),
        beta.reshape(B, T * nh, H).to(torch.float32),
        num_householder=nh,
        scale=1.0,
        initial_state=_state(S0),
        output_final_state=True,
        use_qk_l2norm_in_kernel=False,
    )
    return o.to(dtype), S.to(dtype)


def kda_fla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    kernel: str = "chunk",
) -> tuple[Tensor, Tensor]:
    """fla's KDA: ``kernel`` "chunk" (``chunk_kda``: bfloat16 q, k, v; float32 gates, beta and state) or
    "recurrent" (``fused_recurrent_kda``, float32 throughout; no backward pass). The gate and beta are
    computed by the layer (fla's in-kernel gate, beta sigmoid and L2 norm are off)."""
    from fla.ops.kda.chunk import chunk_kda, fused_recurrent_kda

    dtype = v.dtype
    log_w, beta = log_w.to(torch.float32), beta.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_kda(q, k, v, log_w, beta, scale=1.0, initial_state=_state(S0), output_final_state=True)
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_kda(
            q, k, v, log_w, beta, scale=1.0, initial_state=_state(S0), output_final_state=True
        )
    else:
        raise ValueError(f"unknown KDA kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)


def rwkv7_fla(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, kappa: Tensor, a_lr: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """fla's chunked RWKV-7 kernel (bfloat16 inputs, float32 decay and state; not a contraction: the module
    docstring gives its measured error); fla's recurrent DPLR kernel has no backward pass, so training needs
    this one."""
    from fla.ops.rwkv7 import chunk_rwkv7

    dtype = v.dtype
    a, b = kappa, -kappa * a_lr
    q, k, v, a, b = (t.to(torch.bfloat16) for t in (q, k, v, a, b))
    o, S = chunk_rwkv7(
        q, log_w.to(torch.float32), k, v, a, b, scale=1.0, initial_state=_state(S0), output_final_state=True
    )
    return o.to(dtype), S.to(dtype)


def gla_fla(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, S0: Tensor | None = None, kernel: str = "chunk"
) -> tuple[Tensor, Tensor]:
    """fla's GLA: ``kernel`` "chunk" (bfloat16 q, k, v; float32 gates and state; the default) or
    "recurrent" (float32 throughout)."""
    from fla.ops.gla.chunk import chunk_gla, fused_recurrent_gla

    dtype = v.dtype
    log_w = log_w.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_gla(q, k, v, log_w, scale=1.0, initial_state=_state(S0), output_final_state=True)
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_gla(
            q, k, v, gk=log_w, scale=1.0, initial_state=_state(S0), output_final_state=True
        )
    else:
        raise ValueError(f"unknown GLA kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)
