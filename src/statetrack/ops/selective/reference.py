"""The selective scan and its polar readout in complex128, step by step: the references of
:func:`statetrack.ops.selective.scan.selective_scan` and :func:`statetrack.ops.selective.scan.polar_readout`."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.diag.reference import diag_scan_ref


def selective_scan_ref(a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor | None = None) -> Tensor:
    return diag_scan_ref(a, x.double().unsqueeze(-1) * Bm.double().unsqueeze(-2), h0)


def polar_readout_ref(
    r: Tensor | None, theta: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Reference for :func:`polar_readout`, in float64 / complex128."""
    d = torch.float64
    a = torch.polar(torch.ones_like(theta, dtype=d) if r is None else r.to(d), theta.to(d))
    h = selective_scan_ref(a, x, Bm, h0)
    return (h * Cm.to(h.dtype).unsqueeze(-2)).sum(-1).real, h[:, -1]
