"""What the gated delta rule, Gated DeltaProduct, KDA, RWKV-7 and GLA share when they run flash-linear-attention's
Triton kernels (CUDA; the optional package ``fla-core``): each folder's ``fla.py`` wraps its own kernels
(``ops.gated_delta.fla``, ``ops.kda.fla``, ``ops.dplr.fla``, ``ops.gla.fla``), this module holds their rules.

Same contracts as ``ops.gated_delta.rule.gated_delta_rule``, ``gated_delta_product``, ``kda_rule``, ``rwkv7_rule`` and
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
    (bench/gpu_check.py); training then runs the PyTorch chunked form of ``ops.gated_delta.chunk`` instead, and
    evaluation (no backward pass) still runs fla's chunk kernel."""
    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:  # another fla: it has no such refusal
        return True
    broken = IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1
    return not broken or importlib.util.find_spec("tilelang") is not None


def fla_state(S0: Tensor | None) -> Tensor | None:
    return None if S0 is None else S0.to(torch.float32)


def needs_grad(*xs: Tensor | None) -> bool:
    """Will autograd want a gradient of any of these (fla's recurrent kernels have no backward pass)?"""
    return torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs)
