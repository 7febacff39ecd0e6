"""mLSTM's declaration: a scalar forget gate f' in [0, 1] per head along the stabiliser's trajectory."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from statetrack.ops.mlstm.chunk import mlstm_chunked
from statetrack.ops.mlstm.reference import mlstm_ref, mlstm_transition
from statetrack.ops.recurrences import RealRange, Recurrence, randn


def sample(g: torch.Generator, T: int, B: int = 2, H: int = 2, dk: int = 4, dv: int = 3) -> tuple:
    q, k, v = (
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dv),
    )
    ti, log_f = 3 * randn(g, B, T, H), F.logsigmoid(3 * randn(g, B, T, H))
    state = (randn(g, B, H, dk, dv), randn(g, B, H, dk), randn(g, B, H))
    return q, k, v, ti, log_f, state


RECURRENCE = Recurrence(
    name="mlstm",
    description="C_t = f_t C_{t-1} + i_t k_t v_t^T with the stabiliser and the normalised read-out (xLSTM)",
    sample=sample,
    reference=mlstm_ref,
    forms={"chunked": mlstm_chunked, "chunked (4 steps)": functools.partial(mlstm_chunked, chunk=4)},
    eigenvalues=lambda q, k, v, ti, log_f, state: mlstm_transition(ti, log_f, state[2]),
    eigenvalue_range=RealRange(0.0, 1.0),
)
