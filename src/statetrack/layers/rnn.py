"""Non-linear recurrent baselines: RNN (tanh), LSTM and GRU, each as a mixer.

The training path is PyTorch's fused cell loop; the step path writes the cell equations out with the
same weights. These are not linear recurrences, so no theorem of the linear-RNN papers applies.
"""

from __future__ import annotations

import torch
from torch import nn

from statetrack.layers.base import Mixer


class _TorchCell(Mixer):
    cell: type[nn.RNNBase]

    def __init__(self, d_model, d_state, **_):
        super().__init__(d_model, d_state)
        kwargs = {"nonlinearity": "tanh"} if self.cell is nn.RNN else {}
        self.rnn = self.cell(d_model, d_state, batch_first=True, **kwargs)
        self.out = nn.Linear(d_state, d_model)

    def activation_bytes(self):
        # the cell's gates (up to 4 x d_state), its outputs and the output projection
        return 4 * (6 * self.d_state + 2 * self.d_model)

    def init_state(self, batch, device=None, dtype=None):
        return torch.zeros(batch, self.d_state, device=device, dtype=dtype)

    def forward(self, x, state=None):
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        y, h = self.rnn(x, state.unsqueeze(0).contiguous())
        return self.out(y), h.squeeze(0)

    def _gates(self, x, h):
        r = self.rnn
        return x @ r.weight_ih_l0.T + r.bias_ih_l0, h @ r.weight_hh_l0.T + r.bias_hh_l0


class RNN(_TorchCell):
    name = "rnn"
    cell = nn.RNN

    def step(self, x, state):
        gi, gh = self._gates(x, state)
        h = torch.tanh(gi + gh)
        return self.out(h), h


class GRU(_TorchCell):
    name = "gru"
    cell = nn.GRU

    def step(self, x, state):
        gi, gh = self._gates(x, state)
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * state
        return self.out(h), h


class LSTM(Mixer):
    name = "lstm"

    def __init__(self, d_model, d_state, **_):
        super().__init__(d_model, d_state)
        self.rnn = nn.LSTM(d_model, d_state, batch_first=True)
        self.out = nn.Linear(d_state, d_model)

    def init_state(self, batch, device=None, dtype=None):
        z = torch.zeros(batch, self.d_state, device=device, dtype=dtype)
        return (z, z.clone())

    def forward(self, x, state=None):
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h0, c0 = state
        y, (h, c) = self.rnn(x, (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()))
        return self.out(y), (h.squeeze(0), c.squeeze(0))

    def step(self, x, state):
        h, c = state
        r = self.rnn
        g = x @ r.weight_ih_l0.T + r.bias_ih_l0 + h @ r.weight_hh_l0.T + r.bias_hh_l0
        i, f, gg, o = g.chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(h), (h, c)
