"""The sLSTM recurrence (Beck2024, xLSTM): scalar memory cells with exponential input gates and
recurrent (hence non-linear) gates.

Per head of d_h cells, with pre-activations from the input, w = W x_t + b (four gates: input ti,
forget tf, cell tz, output to) and the recurrent block-diagonal matrices R_g (d_h, d_h) per head::

    (ti, tf, tz, to) = w_t + R h_{t-1}
    m_t = max(logsigmoid(tf) + m_{t-1}, ti)              (the stabiliser)
    i' = exp(ti - m_t),  f' = exp(logsigmoid(tf) + m_{t-1} - m_t)
    c_t = f' c_{t-1} + i' tanh(tz),  n_t = f' n_{t-1} + i',  h_t = sigmoid(to) c_t / n_t

(c and n are stored scaled by exp(-m_t); h is the same as without the stabiliser). The gates read
h_{t-1} through R, so the recurrence is not linear in its state: no parallel or chunked form exists,
and :func:`slstm_recurrent` is the step loop, which autograd differentiates. :func:`slstm_ref` is the
same loop in float64. Shapes: w (B, T, 4, H, d_h), R (4, H, d_h, d_h), state (h, c, n, m) each
(B, H, d_h); returns h (B, T, H, d_h) and the state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def slstm_zero_state(
    B: int, H: int, dh: int, dtype: torch.dtype | None = None, device: torch.device | str | None = None
) -> tuple[Tensor, ...]:
    return tuple(torch.zeros(B, H, dh, dtype=dtype, device=device) for _ in range(4))


def slstm_step(w: Tensor, R: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
    """w (B, 4, H, d_h) -> (h (B, H, d_h), state)."""
    h, c, n, m = state
    raw = w + torch.einsum("ghij,bhj->bghi", R, h)
    ti, tf, tz, to = raw.unbind(1)
    log_f = F.logsigmoid(tf)
    m_new = torch.maximum(log_f + m, ti)
    ip, fp = torch.exp(ti - m_new), torch.exp(log_f + m - m_new)
    c = fp * c + ip * torch.tanh(tz)
    n = fp * n + ip
    # |c| <= n by induction (|tanh| <= 1), so c / n is in [-1, 1]; n = 0 only if the first input gate
    # underflows, where c = 0 too and h = 0
    h = torch.sigmoid(to) * c / n.clamp_min(torch.finfo(n.dtype).tiny)
    return h, (h, c, n, m_new)


def slstm_recurrent(
    w: Tensor, R: Tensor, state: tuple[Tensor, ...] | None = None
) -> tuple[Tensor, tuple[Tensor, ...]]:
    B, T, _, H, dh = w.shape
    state = slstm_zero_state(B, H, dh, w.dtype, w.device) if state is None else state
    out = []
    for t in range(T):
        h, state = slstm_step(w[:, t], R, state)
        out.append(h)
    return (torch.stack(out, 1) if out else w.new_zeros(B, 0, H, dh)), state


def slstm_ref(
    w: Tensor, R: Tensor, state: tuple[Tensor, ...] | None = None
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """Reference: the step loop in float64."""
    d = torch.float64
    state = None if state is None else tuple(s.to(d) for s in state)
    return slstm_recurrent(w.to(d), R.to(d), state)
