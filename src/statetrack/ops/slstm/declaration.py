"""sLSTM's declaration: a non-linear step loop (no transition matrix, no eigenvalues)."""

from __future__ import annotations

import torch

from statetrack.ops.recurrences import Recurrence, randn
from statetrack.ops.slstm.reference import slstm_recurrent, slstm_ref


def sample(g: torch.Generator, T: int, B: int = 2, H: int = 2, dh: int = 3) -> tuple[torch.Tensor, ...]:
    return randn(g, B, T, 4, H, dh), 0.5 * randn(g, 4, H, dh, dh)


RECURRENCE = Recurrence(
    name="slstm",
    description="sLSTM (xLSTM): scalar cells, exponential input gate, gates recurrent in h (non-linear)",
    sample=sample,
    reference=slstm_ref,
    forms={"recurrent": slstm_recurrent},
)
