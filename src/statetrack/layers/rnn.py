"""Non-linear recurrent baselines: RNN (tanh), LSTM and GRU, each as a mixer.

The training path is PyTorch's fused cell loop; the step path writes the cell equations out with the
same weights. These are not linear recurrences, so no theorem of the linear-RNN papers applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from statetrack.layers.base import Device, Mixer


def cell_weights(r: nn.RNNBase) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(W_ih, b_ih, W_hh, b_hh) of a one-layer PyTorch cell."""
    get = r.get_parameter
    return get("weight_ih_l0"), get("bias_ih_l0"), get("weight_hh_l0"), get("bias_hh_l0")


class _TorchCell(Mixer):
    """A PyTorch recurrent cell (``cell``, one layer) with a state of width d_state and a linear output map
    back to d_model. No options: the ``**_`` a layer spec might pass are ignored."""

    cell: ClassVar[Callable[..., nn.RNNBase]]

    def __init__(self, d_model: int, d_state: int, **_: Any) -> None:
        super().__init__(d_model, d_state)
        kwargs = {"nonlinearity": "tanh"} if self.cell is nn.RNN else {}
        self.rnn = self.cell(d_model, d_state, batch_first=True, **kwargs)
        self.out = nn.Linear(d_state, d_model)

    def activation_bytes(self) -> int:
        # the cell's gates (up to 4 x d_state), its outputs and the output projection
        return 4 * (6 * self.d_state + 2 * self.d_model)

    def init_state(self, batch: int, device: Device = None, dtype: torch.dtype | None = None) -> Tensor:
        """h [batch, d_state], zeros."""
        return torch.zeros(batch, self.d_state, device=device, dtype=dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, T, d_model]; state (Tensor): h [B, d_state], None: zeros.
        Returns: y (Tensor): [B, T, d_model], h after x (PyTorch's fused loop)."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        y, h = self.rnn(x, state.unsqueeze(0).contiguous())
        return self.out(y), h.squeeze(0)

    def _gates(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """The cell's input and hidden pre-activations, W_ih x + b_ih and W_hh h + b_hh: [B, gates d_state]."""
        w_ih, b_ih, w_hh, b_hh = cell_weights(self.rnn)
        return x @ w_ih.T + b_ih, h @ w_hh.T + b_hh


class RNN(_TorchCell):
    """Elman RNN, h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), y_t = W_o h_t + b_o.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the width of h.
    """

    name = "rnn"
    cell = nn.RNN

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, d_model], one token; state (Tensor): h [B, d_state].
        Returns: y (Tensor): [B, d_model], h after x."""
        gi, gh = self._gates(x, state)
        h = torch.tanh(gi + gh)
        return self.out(h), h


class GRU(_TorchCell):
    """GRU cell (PyTorch's equations: reset r, update z, candidate n), y_t = W_o h_t + b_o.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the width of h.
    """

    name = "gru"
    cell = nn.GRU

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """Args: x (Tensor): [B, d_model], one token; state (Tensor): h [B, d_state].
        Returns: y (Tensor): [B, d_model], h after x."""
        gi, gh = self._gates(x, state)
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * state
        return self.out(h), h


class LSTM(Mixer):
    """LSTM cell (PyTorch's equations), state (h, c), y_t = W_o h_t + b_o.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the width of h and of c.
    """

    name = "lstm"

    def __init__(self, d_model: int, d_state: int, **_: Any) -> None:
        super().__init__(d_model, d_state)
        self.rnn = nn.LSTM(d_model, d_state, batch_first=True)
        self.out = nn.Linear(d_state, d_model)

    def init_state(
        self, batch: int, device: Device = None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, Tensor]:
        """(h, c), each [batch, d_state], zeros."""
        z = torch.zeros(batch, self.d_state, device=device, dtype=dtype)
        return (z, z.clone())

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (h, c) [B, d_state] each, None: zeros.
        Returns: y (Tensor): [B, T, d_model], (h, c) after x (PyTorch's fused loop)."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h0, c0 = state
        y, (h, c) = self.rnn(x, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()))
        return self.out(y), (h.squeeze(0), c.squeeze(0))

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: (h, c) [B, d_state] each.
        Returns: y (Tensor): [B, d_model], (h, c) after x."""
        h, c = state
        w_ih, b_ih, w_hh, b_hh = cell_weights(self.rnn)
        g = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, gg, o = g.chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(h), (h, c)
