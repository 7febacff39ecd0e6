"""The built-in mixers' declarations (``statetrack.layers.properties.Declared``): description, options with
their defaults, and properties as a function of the options, read without torch.

Each mixer's class (one module per mixer in this package) takes its description and properties from
here, and its ``__init__``'s keyword arguments must be these options with these defaults (checked when
the class is defined), so each is written once where a reader of the theory looks for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from statetrack.layers.properties import (
    ROUND_EXP,
    ROUND_SIGMOID,
    Declared,
    EigenvalueDomain,
    Properties,
    Structure,
    declare,
    exp_rounding,
)

D, S = EigenvalueDomain, Structure
DT = {"dt_min": 1e-3, "dt_max": 1e-1}  # the log-uniform range of the initial step Delta

#: how float32 rounding gives a reflection (Properties.rounding of the neg=true delta rules)
NEG_ROUNDING = (
    f"beta = 2 sigmoid(z) = 2 (a reflection, eigenvalue -1) only through float32 rounding ({ROUND_SIGMOID})"
)
#: how float32 rounding gives the gate alpha = 1 (the gated delta rules)
GATE_ROUNDING = (
    f"the gate alpha = exp(-exp(A_log) softplus(.)) = 1 only through float32 rounding ({ROUND_EXP})"
)
#: LRU: how float32 rounding gives modulus 1, far outside the initialisation (nu in [-6.9, -2.3] for
#: r_max = 0.999, r_min = 0.9)
LRU_ROUNDING = "|lambda| = exp(-exp(nu)) = 1 only through float32 rounding, at nu < -17.4 (" + ROUND_EXP + ")"
#: PD-SSM: how float32 rounding gives modulus 1
PD_ROUNDING = f"|d| = sigmoid(f) = 1 only through float32 rounding ({ROUND_SIGMOID})"


def _const(**kw: Any) -> Callable[[dict[str, Any]], Properties]:
    """Properties that no option changes."""
    p = Properties(**kw)
    return lambda _options: p


NONLINEAR = _const(input_dependent=True, eigenvalues=D.NOT_LINEAR, structure=S.NONLINEAR, linear=False)


def _s4d(o: dict) -> Properties:
    # real modes: exp(dt a) in (0, 1) under ZOH; (1 + dt a/2)/(1 - dt a/2) in (-1, 1) under bilinear, both
    # ends reached only where float32 rounds them
    dom = D.COMPLEX_FIXED if o["init"] != "real" else D.NONNEG if o["disc"] == "zoh" else D.REAL
    rounding = (
        exp_rounding("|A_bar| = exp(Delta Re a)", False)
        if o["disc"] == "zoh"
        else "|A_bar| = |1 + Delta a/2| / |1 - Delta a/2| = 1 only through float32 rounding (Delta |Re a| "
        "below 6e-8; a real mode is -1 for Delta |a| above 3.4e7)"
    )
    return Properties(input_dependent=False, eigenvalues=dom, structure=S.DIAGONAL, rounding=rounding)


def _mamba(o: dict) -> Properties:
    return Properties(
        input_dependent=True,
        eigenvalues=D.REAL if o["neg"] else D.NONNEG,
        structure=S.DIAGONAL,
        rounding=exp_rounding("A_bar = exp(-Delta |A|)", o["neg"]),
    )


def _delta(o: dict) -> Properties:
    # each factor has eigenvalues 1 and 1 - beta_j; the PRODUCT's eigenvalues are real only for n_h = 1,
    # or n_h = 2 with beta in [0, 1] (two PSD factors: AB ~ A^1/2 B A^1/2). Otherwise they are complex
    # (two reflections make a rotation), with modulus <= 1 since every factor has norm <= 1.
    nh, neg = o["nh"], o["neg"]
    dom = (D.REAL if neg else D.NONNEG) if nh == 1 or (nh == 2 and not neg) else D.COMPLEX_DISC
    # the eigenvalue 1 (off the keys) is exact; -1 and the rotations need beta = 2
    return Properties(
        input_dependent=True,
        eigenvalues=dom,
        structure=S.HOUSEHOLDER,
        n_h=nh,
        rounding=NEG_ROUNDING if neg else "",
        factor_eigenvalues=D.REAL if neg else D.NONNEG,
    )


def _gated_delta_product(o: dict) -> Properties:
    p = _delta(o)  # a scalar gate in (0, 1] keeps the product's domain
    return Properties(
        input_dependent=True,
        eigenvalues=p.eigenvalues,
        structure=p.structure,
        n_h=p.n_h,
        rounding=GATE_ROUNDING + ("; " + p.rounding if p.rounding else ""),
        factor_eigenvalues=p.factor_eigenvalues,
    )


def _gated_delta(o: dict) -> Properties:
    """Gated DeltaNet and KDA: one gated Householder factor per token."""
    dom = D.REAL if o["neg"] else D.NONNEG
    return Properties(
        input_dependent=True,
        eigenvalues=dom,
        structure=S.HOUSEHOLDER,
        n_h=1,
        rounding=GATE_ROUNDING + ("; " + NEG_ROUNDING if o["neg"] else ""),
        factor_eigenvalues=dom,
    )


def _mamba3(o: dict) -> Properties:
    dom = (
        D.NONNEG
        if not o["rope"]
        else D.FIXED_PHASE
        if not o["data_angles"]
        else D.DAMPED_ROTATIONS
        if o["a_floor"] > 0
        else D.COMPLEX_DISC
    )
    return Properties(
        input_dependent=True,
        eigenvalues=dom,
        structure=S.DIAGONAL,
        rounding=exp_rounding("the decay exp(Delta_t A_t)", False),
    )


SELECTIVE = {"conv": 4, "expand": 2}
DELTA = {"heads": 1, "neg": False, "conv": 4, "chunk": 16}

for _d in (
    Declared("rnn", "Elman RNN, h_t = tanh(W h_{t-1} + U x_t + b)", {}, NONLINEAR),
    Declared("lstm", "LSTM cell (PyTorch's equations); state = (h, c)", {}, NONLINEAR),
    Declared("gru", "GRU cell (PyTorch's equations)", {}, NONLINEAR),
    Declared(
        "s4d",
        "time-invariant diagonal SSM (S4D), complex eigenvalues exp(Delta a_n)",
        {"init": "lin", "disc": "zoh", **DT},
        _s4d,
    ),
    Declared(
        "mamba",
        "selective diagonal SSM, eigenvalues exp(Delta(x) A) in (0, 1]",
        {**SELECTIVE, "neg": False, **DT},
        _mamba,
    ),
    Declared(
        "negmamba",
        "Mamba with A_bar = 2 exp(Delta(x) A) - 1 in [-1, 1] (Grazzi2024)",
        {**SELECTIVE, **DT},
        _mamba,
        fixed={"neg": True},
    ),
    Declared(
        "aussm",
        "adaptive unitary SSM: A_bar = exp(i theta(x)), theta = W_A u + b_A, |A_bar| = 1",
        {
            **SELECTIVE,
            "theta_rank": 0,
            "theta_silu": True,
            "const_bc": False,
            "theta_scale": False,
            "dt_silu": True,
        },
        _const(input_dependent=True, eigenvalues=D.UNIT_CIRCLE, structure=S.DIAGONAL),
    ),
    Declared(
        "saussm",
        "simple AUSSM: A_bar = exp(i Delta(x) Lambda), Lambda a learned per-channel constant",
        {**SELECTIVE, **DT, "dt_rank": 0},
        _const(input_dependent=True, eigenvalues=D.UNIT_CIRCLE, structure=S.DIAGONAL),
    ),
    Declared(
        "dcd",
        "input-dependent complex diagonal SSM: A_bar = r(x) exp(i theta(x)), r in (0, 1]",
        {**SELECTIVE, **DT, "dt_rank": 0, "theta_rank": 0, "theta_silu": True},
        _const(
            input_dependent=True,
            eigenvalues=D.COMPLEX_DISC,
            structure=S.DIAGONAL,
            rounding=exp_rounding("the modulus r = exp(-Delta exp(A_log))", False),
        ),
    ),
    Declared(
        "deltanet",
        "DeltaNet: S_t = (I - beta k k^T) S_{t-1} + beta k v^T, beta in [0,1] ([0,2] with neg=true)",
        dict(DELTA),
        _delta,
        fixed={"nh": 1},
    ),
    Declared(
        "deltaproduct",
        "DeltaProduct: n_h generalized Householder steps per token, A(x) = prod_j (I - beta_j k_j k_j^T)",
        {"nh": 2, **DELTA},
        _delta,
    ),
    Declared(
        "transformer",
        "causal softmax self-attention (state = KV cache, grows with length)",
        {"heads": 1, "pos": "rope"},
        _const(input_dependent=True, eigenvalues=D.NOT_LINEAR, structure=S.ATTENTION, linear=False),
    ),
    Declared(
        "mamba2",
        "Mamba-2: a scalar transition per head, A(x) = exp(Delta(x) A) I in (0, 1] ([-1, 1] with neg=true)",
        {**SELECTIVE, "headdim": 8, "neg": False, **DT},
        lambda o: Properties(
            input_dependent=True,
            eigenvalues=D.REAL if o["neg"] else D.NONNEG,
            structure=S.SCALAR,
            rounding=exp_rounding("a_t = exp(Delta_t A)", o["neg"]),
        ),
    ),
    Declared(
        "mamba3",
        "Mamba-3: A(x) = exp(Delta A(x)) exp(i Delta theta(x)) per state pair (complex disc), "
        "exponential-trapezoidal",
        {"expand": 2, "headdim": 8, "trap": True, "rope": True, "data_angles": True, "a_floor": 0.0, **DT},
        _mamba3,
    ),
    Declared(
        "gateddeltanet",
        "Gated DeltaNet: S_t = alpha_t (I - beta_t k k^T) S_{t-1} + beta_t k v^T, alpha in "
        "(0, 1], beta in [0,1] ([0,2] with neg=true)",
        dict(DELTA),
        _gated_delta,
    ),
    Declared(
        "rwkv7",
        "RWKV-7: A(x) = diag(w) - (kappa (.) a) kappa^T, w in (0.545, 1), a in (0, 1): real "
        "eigenvalues in (-1/2, 1]",
        {"heads": 1, "lora": 8, "chunk": 8},
        _const(
            input_dependent=True,
            eigenvalues=D.REAL_HALF_NEG,
            structure=S.DPLR,
            n_h=1,
            rounding=f"the decay w = exp(-e^-1/2 sigmoid(.)) = 1 only through float32 rounding ({ROUND_EXP})",
        ),
    ),
    Declared(
        "mlstm",
        "mLSTM (xLSTM): C_t = f_t C_{t-1} + i_t k v^T, f = sigmoid in [0,1], i = exp, normalised read-out",
        {"heads": 1, "expand": 2, "conv": 4, "chunk": 16},
        _const(
            input_dependent=True,
            eigenvalues=D.NONNEG,
            structure=S.SCALAR,
            rounding=f"the forget gate sigmoid(.) = 1 only through float32 rounding ({ROUND_SIGMOID})",
        ),
    ),
    Declared(
        "slstm",
        "sLSTM (xLSTM): scalar cells, exponential input gate, gates recurrent in h (non-linear)",
        {"heads": 1, "conv": 4},
        _const(input_dependent=True, eigenvalues=D.NOT_LINEAR, structure=S.NONLINEAR, linear=False),
    ),
    Declared(
        "lru",
        "linear recurrent unit: time-invariant complex diagonal, lambda = exp(-exp(nu) + i exp(theta)), "
        "|lambda| < 1",
        {"r_min": 0.9, "r_max": 0.999, "max_phase": 2 * math.pi},
        _const(
            input_dependent=False, eigenvalues=D.COMPLEX_FIXED, structure=S.DIAGONAL, rounding=LRU_ROUNDING
        ),
    ),
    Declared(
        "gla",
        "gated linear attention: S_t = diag(w(x)) S_{t-1} + k v^T, w in (0, 1) per key channel",
        {"heads": 1, "chunk": 16},
        _const(
            input_dependent=True,
            eigenvalues=D.NONNEG,
            structure=S.DIAGONAL,
            rounding=f"w = sigmoid(.)^(1/16) = 1 only through float32 rounding ({ROUND_SIGMOID})",
        ),
    ),
    Declared(
        "gateddeltaproduct",
        "Gated DeltaProduct: A(x) = alpha(x) prod_j (I - beta_j k_j k_j^T), n_h steps "
        "per token, alpha in (0, 1], beta in [0,1] ([0,2] with neg=true)",
        {"nh": 2, **DELTA},
        _gated_delta_product,
    ),
    Declared(
        "kda",
        "Kimi Delta Attention: A(x) = (I - beta k k^T) diag(alpha), a per-channel gate alpha in (0, 1], "
        "beta in [0,1] ([0,2] with neg=true)",
        {"heads": 1, "neg": False, "conv": 4, "chunk": 16},
        _gated_delta,
    ),
    Declared(
        "pdssm",
        "PD-SSM: A(x) = P(x) D(x), P a column one-hot matrix selected from a learned dictionary, D "
        "complex diagonal with modulus in (0, 1) (rows=true: the public code's row one-hot D P)",
        {"dict_size": 8, "expand": 2, "rows": False, "chunk": 32},
        lambda o: Properties(
            input_dependent=True,
            eigenvalues=D.COMPLEX_DISC,
            structure=S.PD_ROWS if o["rows"] else S.PD,
            rounding=PD_ROUNDING,
        ),
    ),
):
    declare(_d)
