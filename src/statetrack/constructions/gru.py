"""GRU constructions: Tomita 1 (1*, "no 0 ever") with one GRU unit that latches.

h = (1 - z) n + z h with the update gate z = sigmoid(+-30): sigmoid(30) = 1 exactly in float32, so a
1 keeps h bit for bit; on a 0, z = sigmoid(-30) = 9.4e-14 and n = tanh(30) = 1 exactly, so h becomes 1
(to float32). From h = 0 the state is 0 until the first 0 and 1 from then on, at every length.
"""

from __future__ import annotations

import torch

from statetrack.constructions.base import (
    Construction,
    blank_model,
    layer_input,
    register,
    token_embedding,
)
from statetrack.layers.rnn import GRU, cell_weights

#: the gate and candidate pre-activations: sigmoid(GATE) = 1 and tanh(GATE) = 1 in float32
GATE = 30.0


@register(
    "tomita1-gru",
    "NL",
    "Tomita 1 (1*: accept iff no 0 yet) with ONE GRU unit: the update gate is 1 on a 1 (keep) and 0 on a 0 "
    "(set h to tanh(30) = 1), so h is 1 exactly from the first 0 on",
    mixers=("gru",),
)
def tomita1_gru() -> Construction:
    # residual coordinates: 0, 1 the token's one-hot code, 2 a constant 1, 3 the latch (2 h)
    model, cfg = blank_model("tomita:1", layers="gru", d_model=4, d_state=1)
    mx = model.mixer(0, GRU)
    w_ih, b_ih, _, _ = cell_weights(mx.rnn)
    with torch.no_grad():
        token_embedding(model, 2, const=2)
        xin = layer_input(model, 0, model.embed.weight[:2])  # (2, 4): what the cell sees per token
        a0, a1 = float(xin[0, 0]), float(xin[1, 1])  # token 0 and token 1 each on their own coordinate
        # rows (r, z, n) of W_ih for the one unit; W_hh and every bias stay 0, so r is unused
        w_ih[1, 0] = -GATE / a0  # z(0) = sigmoid(-30): h <- n
        w_ih[1, 1] = GATE / a1  # z(1) = sigmoid(30) = 1: h kept exactly
        w_ih[2, 0] = GATE / a0  # n(0) = tanh(30) = 1
        b_ih.zero_()
        mx.out.weight[3, 0] = 2.0  # the residual's coordinate 3 = 2 h
        mx.out.bias.zero_()
        # accept (label 1) scores x2 - x3, reject x3 - x2: h = 0 -> accept by 1, h = 1 -> reject by 1
        model.head.weight.copy_(torch.tensor([[0.0, 0.0, -1.0, 1.0], [0.0, 0.0, 1.0, -1.0]]))
        model.head.bias.zero_()
    return Construction("tomita1-gru", model, cfg, "", "", {"z(1)": "1 (float32)", "z(0)": 9.357e-14})
