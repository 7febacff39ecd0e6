"""Every registered mixer: declared properties checked against the actual transitions, and the step
path, the training path and a chunked forward (state carried) agreeing in float64."""

from __future__ import annotations

import math

import pytest
import torch

from statetrack.errors import UserError
from statetrack.layers import MIXERS, build_mixer, models_table
from statetrack.layers.base import DOMAINS, STRUCTURES
from statetrack.spec import parse_layers

D_MODEL, D_STATE = 8, 4

# every registered mixer with its defaults, plus the option variants that change the maths
VARIANTS = list(MIXERS) + [
    "mamba(neg=true)",
    "mamba(conv=0)",
    "s4d(init=inv)",
    "s4d(init=real)",
    "s4d(disc=bilinear)",
    "deltanet(neg=true)",
    "deltanet(heads=2,chunk=0)",
    "deltanet(chunk=3)",
    "deltaproduct(neg=true)",
    "deltaproduct(nh=3)",
    "deltaproduct(nh=3,neg=true,heads=2,chunk=2)",
    "aussm(conv=0)",
    "aussm(theta_rank=1000)",
    "aussm(theta_rank=1000,theta_silu=false)",
    "aussm(const_bc=true)",
    "aussm(const_bc=true,theta_rank=1000,theta_silu=false,conv=0)",
    "aussm(theta_silu=false,theta_scale=true,const_bc=true,dt_silu=false,expand=1)",
    "aussm(theta_scale=true)",
    "dcd(conv=0)",
    "dcd(theta_rank=3)",
    "dcd(theta_silu=false)",
    "saussm(expand=1)",
    "saussm(dt_rank=1000)",
    "dcd(dt_rank=5,theta_rank=3)",
    "transformer(pos=sinusoidal)",
    "transformer(pos=none,heads=2)",
    "transformer(pos=rope,heads=2)",
    "mamba2(neg=true)",
    "mamba2(conv=0,headdim=4)",
    "mamba3(trap=false)",
    "mamba3(rope=false)",
    "mamba3(headdim=16)",
    "mamba3(a_floor=0.0001)",
    "mamba3(data_angles=false)",
    "gateddeltanet(neg=true)",
    "gateddeltanet(heads=2,chunk=0)",
    "gateddeltanet(chunk=3,conv=0)",
    "rwkv7(heads=2)",
    "rwkv7(chunk=0)",
    "rwkv7(chunk=5)",
    "mlstm(heads=2)",
    "mlstm(chunk=0,conv=0)",
    "mlstm(chunk=5)",
    "slstm(heads=2)",
    "slstm(conv=0)",
    "lru(r_min=0.1,max_phase=0.5)",
    "gla(heads=2)",
    "gla(chunk=0)",
    "gla(chunk=7)",
    "gateddeltaproduct(neg=true)",
    "gateddeltaproduct(nh=3,neg=true,heads=2,chunk=2)",
    "gateddeltaproduct(nh=1,chunk=0)",
    "kda(neg=true)",
    "kda(heads=2,chunk=0)",
    "kda(chunk=3,conv=0)",
    "pdssm(rows=true)",
    "pdssm(chunk=0)",
    "pdssm(chunk=3,dict_size=2)",
]


def make(spec: str, seed: int = 0, dtype=torch.float64):
    torch.manual_seed(seed)
    (layer,) = parse_layers(spec)
    return build_mixer(layer, D_MODEL, D_STATE).to(dtype)


def _perturb(m, scale=0.3):
    """Move every parameter a little off its init, so that no structure of the init hides a bug."""
    with torch.no_grad():
        for p in m.parameters():
            p.add_(scale * torch.randn_like(p) * (p.abs().mean() + 0.1))


def in_domain(ev: torch.Tensor, domain: str, tol: float = 1e-9) -> bool:
    re, im, mod = ev.real, ev.imag, ev.abs()
    if domain == "[0,1]":
        return bool((im.abs() <= tol).all() and (re >= -tol).all() and (re <= 1 + tol).all())
    if domain == "(-1/2,1]":
        return bool((im.abs() <= tol).all() and (re > -0.5).all() and (re <= 1 + tol).all())
    if domain == "[-1,1]":
        return bool((im.abs() <= tol).all() and (re >= -1 - tol).all() and (re <= 1 + tol).all())
    if domain == "unit circle":
        return bool(((mod - 1).abs() <= tol).all())
    if domain in ("complex disc", "complex", "damped rotations"):
        return bool((mod <= 1 + tol).all())
    if domain == "fixed-phase rotations":  # the phase of each slot is the same at every position and input
        phase = ev / mod.clamp_min(1e-300)
        same = phase.dim() < 3 or bool(((phase - phase[:1, :1]).abs() <= 1e-6).all())  # (B, T, slots)
        return bool((mod <= 1 + tol).all()) and same
    raise AssertionError(domain)


def _flat_state(state):
    return state[0] if isinstance(state, tuple) else state


def _with_state(state, h):
    return (h,) + tuple(state[1:]) if isinstance(state, tuple) else h


def probed_transition(m, x_t, state) -> torch.Tensor:
    """The actual matrix A of the step path: h -> step(x_t, h) is affine in the recurrent state h, so
    A e_j = h_new(e_j) - h_new(0). Returns (n, n) for batch element 0 (the conv buffer stays as given)."""
    h = _flat_state(state)
    zero = torch.zeros_like(h[:1])
    base = _flat_state(
        m.step(
            x_t[:1], _with_state(tuple(s[:1] for s in state) if isinstance(state, tuple) else state[:1], zero)
        )[1]
    )
    n = zero.numel()
    cols = []
    for j in range(n):
        e = torch.zeros(n, dtype=h.dtype)
        e[j] = 1
        e = e.reshape(zero.shape)
        st = _with_state(tuple(s[:1] for s in state) if isinstance(state, tuple) else state[:1], e)
        cols.append((_flat_state(m.step(x_t[:1], st)[1]) - base).reshape(-1))
    return torch.stack(cols, 1)


def _match(a: torch.Tensor, b: torch.Tensor, tol=1e-7) -> bool:
    """Every value of a is close to some value of b."""
    return bool(((a[:, None] - b[None, :]).abs().min(1).values <= tol).all())


def test_theta_silu_false_makes_the_angle_affine_in_the_inputs():
    """Without the silu before W_A (the AUSSM authors' kernel), the angle is affine in the inputs the conv sees:
    A_bar(x1 + x2) A_bar(0) = A_bar(x1) A_bar(x2), so a sequence's phase adds up token by token; with the silu
    (the default) it does not."""
    g = torch.Generator().manual_seed(3)
    x1, x2 = (torch.randn(2, 9, D_MODEL, generator=g, dtype=torch.float64) for _ in range(2))
    for spec, affine in (
        ("aussm(theta_silu=false)", True),
        ("dcd(theta_silu=false)", True),
        ("aussm", False),
    ):
        m = make(spec)
        ev = m.eigenvalues
        if "dcd" in spec:  # the modulus reads Delta after the silu: the angle alone is affine
            ev = lambda x, m=m: torch.exp(1j * m.eigenvalues(x).angle())  # noqa: E731
        lhs, rhs = ev(x1 + x2) * ev(torch.zeros_like(x1)), ev(x1) * ev(x2)
        assert torch.allclose(lhs, rhs, atol=1e-9) == affine, spec


def test_const_bc_writes_delta_u_b_and_reads_with_one_c():
    """aussm(const_bc=true), the AUSSM authors' B and C: from a zero state one step writes h = Delta u B with
    B the same positive vector for every input, and the read-out Re(sum_n C_n h_n) uses one C for all;
    by default B and C follow the input."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, D_MODEL, generator=g, dtype=torch.float64)
    m = make("aussm(const_bc=true)")
    _perturb(m)
    h, _ = m.step(x, m.init_state(3, dtype=torch.float64))[1]
    u, _, _, low, Bm, Cm = m._read(x, m.init_state(3, dtype=torch.float64)[1], chunk=False)
    dt = torch.nn.functional.softplus(m.dt_proj(low[..., : m.d_state]))
    B = torch.nn.functional.softplus(m.B)
    assert torch.allclose(h, ((dt * u)[..., None] * B).to(h.dtype), atol=1e-12)
    assert bool((B > 0).all()) and torch.equal(Bm[0], Bm[2]) and torch.equal(Cm[0], Cm[2])
    d = make("aussm")
    Bd = d._read(x, d.init_state(3, dtype=torch.float64)[1], chunk=False)[4]
    assert not torch.allclose(Bd[0], Bd[2])


@pytest.mark.parametrize("spec", VARIANTS)
def test_declared_properties(spec):
    m = make(spec)
    p = m.properties
    assert p.eigenvalues in DOMAINS and p.structure in STRUCTURES
    assert m.name in MIXERS
    torch.manual_seed(1)
    x1, x2 = (
        torch.randn(3, 9, D_MODEL, dtype=torch.float64),
        3 * torch.randn(3, 9, D_MODEL, dtype=torch.float64),
    )
    ev = m.eigenvalues(x1)
    if not p.linear:
        assert ev is None and p.eigenvalues == "n/a"
        return
    assert ev.shape[:2] == (3, 9) and ev.is_complex()
    for perturbed in (False, True):  # at the init, and with every weight moved off it
        if perturbed:
            _perturb(m)
        for x in (x1, x2, 30 * x1):
            assert in_domain(m.eigenvalues(x), p.eigenvalues), (spec, m.eigenvalues(x))
        e1, e2, e3 = m.eigenvalues(x1), m.eigenvalues(x2), m.eigenvalues(30 * x1)
        if p.input_dependent:
            # some pair of inputs must move A(x); a stabilised cell (mlstm) can keep a factor at exactly 1
            # over a whole sequence of moderate inputs, since its scale state absorbs the forget gate
            assert not (torch.allclose(e1, e2) and torch.allclose(e1, e3)), (
                "declared input-dependent but A(x) does not change with x"
            )
        else:
            assert torch.allclose(e1, e2) and torch.allclose(e1, e1[:1, :1].expand_as(e1))


@pytest.mark.parametrize("spec", [v for v in VARIANTS if make(v).properties.linear])
def test_eigenvalues_are_those_of_the_step_transition(spec):
    """eigenvalues(x) must be the eigenvalues of the map the step path actually applies to the state."""
    m = make(spec)
    _perturb(m)
    torch.manual_seed(2)
    x = torch.randn(2, 4, D_MODEL, dtype=torch.float64)
    ev = m.eigenvalues(x)
    state = m.init_state(2, dtype=torch.float64)
    for t in range(x.shape[1]):
        A = probed_transition(m, x[:, t], state)
        actual = torch.linalg.eigvals(A)
        assert in_domain(actual, m.properties.eigenvalues), spec
        assert _match(ev[0, t], actual) and _match(actual, ev[0, t]), (spec, t, ev[0, t], actual)
        _, state = m.step(x[:, t], state)


@pytest.mark.parametrize("spec", VARIANTS)
def test_step_forward_chunked_agree(spec):
    m = make(spec)
    _perturb(m, 0.1)
    torch.manual_seed(3)
    B, T = 3, 23
    x = torch.randn(B, T, D_MODEL, dtype=torch.float64)
    y_full, s_full = m(x)
    state = m.init_state(B, dtype=torch.float64)
    ys = []
    for t in range(T):
        y, state = m.step(x[:, t], state)
        ys.append(y)
    y_step = torch.stack(ys, 1)
    state_c, yc = None, []
    for lo, hi in [(0, 5), (5, 6), (6, 17), (17, 23)]:
        y, state_c = m(x[:, lo:hi], state_c)
        yc.append(y)
    y_chunk = torch.cat(yc, 1)
    assert y_full.shape == (B, T, D_MODEL)
    torch.testing.assert_close(y_step, y_full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y_chunk, y_full, rtol=1e-5, atol=1e-5)
    for a, b in zip(*(s if isinstance(s, tuple) else (s,) for s in (s_full, state)), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(MIXERS))
def test_trains_float32(name):
    """A forward and backward in float32 give finite gradients for every parameter that is used."""
    m = make(name, dtype=torch.float32)
    x = torch.randn(2, 70, D_MODEL)
    y, _ = m(x)
    y.square().mean().backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n


def test_aussm_stays_on_circle_long():
    m = make("aussm", dtype=torch.float32)
    ev = m.eigenvalues(100 * torch.randn(1, 50, D_MODEL))
    assert ((ev.abs() - 1).abs() < 1e-6).all()


def test_theta_rank_sets_the_rank_of_the_angle_map():
    """W_A = theta_proj(low part of x_proj): rank ceil(d_model / 16) by default, capped at E (full rank)."""
    low, full, three = make("aussm"), make("aussm(theta_rank=1000)"), make("dcd(theta_rank=3)")
    assert low.R_theta == math.ceil(D_MODEL / 16) and low.theta_proj.in_features == low.R_theta
    E, N = full.d_inner, full.d_state
    assert full.R_theta == E and full.theta_proj.weight.shape == (E * N, E)
    W_A = full.theta_proj.weight.double() @ full.x_proj.weight[:E].double()  # u -> the E*N angles
    assert torch.linalg.matrix_rank(W_A) == E
    assert three.R_theta == 3 and three.x_proj.in_features == three.d_inner
    assert three.x_proj.out_features == three.R + 3 + 3 * three.d_state  # [Delta | theta | B | C_re | C_im]


@pytest.mark.parametrize("spec", VARIANTS)
def test_declared_properties_are_the_built_mixers(spec):
    """The light declaration the oracle and 'statetrack models' read (no torch) says what the built mixer
    says, for the defaults and every option variant that changes the maths."""
    from statetrack.layers import declared_properties

    (layer,) = parse_layers(spec)
    assert declared_properties(layer) == make(spec).properties, spec


def test_a_class_must_keep_its_declared_options():
    """A built-in mixer whose __init__ drifts from its declaration fails when its class is defined."""
    from statetrack.layers.base import Mixer

    with pytest.raises(TypeError, match="declaration"):
        type(
            "Drifted",
            (Mixer,),
            {
                "name": "gla",
                "__module__": "statetrack.layers.gla",
                "__init__": lambda self, d_model, d_state, heads=2, chunk=8: None,
            },
        )


def test_models_table():
    rows = models_table()
    assert [r["name"] for r in rows] == list(MIXERS)
    need = {"aussm", "saussm", "dcd", "deltanet", "deltaproduct", "transformer", "mamba", "negmamba", "s4d"}
    assert need <= {r["name"] for r in rows}
    for r in rows:
        assert set(r) >= {
            "name",
            "description",
            "input_dependent",
            "eigenvalues",
            "structure",
            "n_h",
            "options",
        }
        assert r["eigenvalues"] in DOMAINS and r["description"]
    by = {r["name"]: r for r in rows}
    assert by["deltaproduct"]["n_h"] == 2 and by["deltanet"]["n_h"] == 1
    assert by["transformer"]["structure"] == "attention" and by["transformer"]["eigenvalues"] == "n/a"
    assert by["s4d"]["input_dependent"] is False
    # the mixers of 2025-26, with the properties the oracle reads
    assert (by["pdssm"]["structure"], by["pdssm"]["eigenvalues"]) == ("pd", "complex disc")
    assert (by["gateddeltaproduct"]["structure"], by["gateddeltaproduct"]["n_h"]) == ("householder", 2)
    assert (by["kda"]["structure"], by["kda"]["eigenvalues"], by["kda"]["n_h"]) == ("householder", "[0,1]", 1)
    assert all(by[n]["rounding"] for n in ("pdssm", "gateddeltaproduct", "kda", "negmamba", "lru"))
    assert by["aussm"]["rounding"] == "" and by["deltanet"]["rounding"] == ""


def test_neg_switch_domains():
    assert make("deltanet").properties.eigenvalues == "[0,1]"
    assert make("deltanet(neg=true)").properties.eigenvalues == "[-1,1]"
    assert make("mamba(neg=true)").properties.eigenvalues == "[-1,1]"
    # one notation for the [-1,1] forms: each reaches -1 only through float32 rounding, and says so
    for spec in (
        "mamba(neg=true)",
        "mamba2(neg=true)",
        "deltanet(neg=true)",
        "gateddeltanet(neg=true)",
        "kda(neg=true)",
        "gateddeltaproduct(neg=true,nh=1)",
    ):
        p = make(spec).properties
        assert p.eigenvalues == "[-1,1]" and "rounding" in p.rounding and "-1" in p.rounding, spec
    # neg=true reaches below zero (beta > 1 happens for inputs with w^T x > 0)
    m = make("deltanet(neg=true)")
    ev = m.eigenvalues(5 * torch.randn(4, 50, D_MODEL, dtype=torch.float64))
    assert ev.real.min() < -0.5


def test_negmamba_reaches_minus_one():
    """Finite precision closes the interval: for large Delta, exp(Delta A) underflows and A_bar = -1 exactly."""
    m = make("negmamba", dtype=torch.float32)
    ev = m.eigenvalues(300 * torch.randn(2, 40, D_MODEL))
    assert (ev.real == -1).any() and (ev.real >= -1).all()


@pytest.mark.parametrize(
    "spec", [v for v in VARIANTS if make(v).properties.linear and not make(v).properties.rounding]
)
def test_declared_exact_modulus_one_is_reached_in_float64(spec):
    """A linear mixer that declares no rounding reaches modulus 1 in exact arithmetic: in float64, with every
    weight moved off its init and moderate inputs, some eigenvalue has modulus 1 to 1e-12 (AUSSM's exp(i
    theta); DeltaNet's and DeltaProduct's eigenvalue 1 off the keys)."""
    m = make(spec)
    _perturb(m)
    torch.manual_seed(4)
    ev = m.eigenvalues(torch.randn(2, 6, D_MODEL, dtype=torch.float64))
    assert ((ev.abs() - 1).abs() < 1e-12).any(-1).all(), spec


@pytest.mark.parametrize("spec", ["pdssm", "lru"])
def test_modulus_one_only_through_float32_rounding(spec):
    """PD-SSM's |d| = sigmoid(f) and LRU's |lambda| = exp(-exp(nu)) stay below 1 at every finite weight in
    float64, and reach 1 in float32 once the map saturates: what their Properties.rounding declares."""
    m = make(spec)
    assert "rounding" in m.properties.rounding
    with torch.no_grad():
        if spec == "pdssm":
            m.magnitude[2].bias.fill_(20.0)  # f = 20 at every input of moderate size
            m.magnitude[2].weight.mul_(0.01)
        else:
            m.nu_log.fill_(-20.0)
    x = torch.randn(2, 5, D_MODEL, dtype=torch.float64)
    assert m.eigenvalues(x).abs().max() < 1
    m32 = m.float()
    assert (m32.eigenvalues(x.float()).abs().max() - 1).abs() < 1e-6
    if spec == "pdssm":
        assert (m32.magnitude(x.float()) == 1).all()


def test_deltaproduct_neg_has_rotations():
    """Two reflections make a rotation: DeltaProduct n_h=2 with beta in [0,2] has complex eigenvalues."""
    m = make("deltaproduct(neg=true)")
    ev = m.eigenvalues(5 * torch.randn(4, 50, D_MODEL, dtype=torch.float64))
    assert ev.imag.abs().max() > 0.1
    assert make("deltaproduct(neg=true)").properties.eigenvalues == "complex disc"


@pytest.mark.parametrize(
    "bad",
    [
        "deltanet(heads=3)",
        "transformer(pos=alibi)",
        "deltaproduct(nh=0)",
        "aussm(neg=true)",
        "transformer(pos=rope,heads=8)",
        "saussm(conv=-1)",
        "aussm(theta_rank=-1)",
        "saussm(dt_rank=-2)",
        "aussm(dt_rank=4)",
    ],
)
def test_bad_options(bad):
    with pytest.raises(UserError):
        make(bad)


def test_transformer_cache_grows():
    m = make("transformer(pos=rope,heads=2)")
    s = m.init_state(2, dtype=torch.float64)
    for _ in range(5):
        _, s = m.step(torch.randn(2, D_MODEL, dtype=torch.float64), s)
    assert s[0].shape[2] == 5


def test_model_with_zoo_layers():
    from statetrack.config import ModelConfig
    from statetrack.model import Model

    cfg = ModelConfig(
        layers="aussm,deltanet(neg=true),transformer(pos=rope,heads=2),dcd,saussm,deltaproduct",
        d_model=8,
        d_state=4,
    )
    model = Model(cfg, vocab_size=3, num_classes=2).double()
    tok = torch.randint(0, 3, (2, 11))
    logits, states = model(tok)
    s = model.init_state(2)
    outs = []
    for t in range(11):
        lo, s = model.step(tok[:, t], s)
        outs.append(lo)
    torch.testing.assert_close(torch.stack(outs, 1), logits, rtol=1e-6, atol=1e-6)
    assert math.isfinite(float(logits.detach().sum()))


def test_options_are_the_keyword_arguments_of_init():
    import inspect

    from statetrack.layers.base import Mixer

    for name, cls in MIXERS.items():
        accepted = inspect.signature(cls.__init__).parameters
        takes_more = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
        for key, default in cls.options.items():
            assert key in accepted or takes_more, (name, key)
            if key in accepted:
                assert accepted[key].default == default, (name, key)
    assert "neg" not in MIXERS["negmamba"].options and MIXERS["negmamba"](4, 2).neg
    assert "nh" not in MIXERS["deltanet"].options and "dt_min" not in MIXERS["aussm"].options

    class Declared(Mixer):  # options written by hand must be those of __init__
        name = "declared"

        def __init__(self, d_model, d_state, k=3):  # noqa: ARG002 - k is read from the signature
            super().__init__(d_model, d_state)

    assert Declared.options == {"k": 3}
    with pytest.raises(TypeError, match="not the keyword arguments"):

        class Wrong(Mixer):
            name = "wrong"
            options = {"k": 4}

            def __init__(self, d_model, d_state, k=3):  # noqa: ARG002 - k is read from the signature
                super().__init__(d_model, d_state)


FRONTIER = (
    "mamba2",
    "mamba3",
    "gateddeltanet",
    "rwkv7",
    "mlstm",
    "slstm",
    "lru",
    "gla",
    "pdssm",
    "gateddeltaproduct",
    "kda",
)


@pytest.mark.parametrize("name", FRONTIER)
def test_frontier_mixer_trains_on_parity_and_evaluates_to_10000(name):
    """The whole path on CPU: a few training steps on parity (the loss falls), then evaluation at
    length 10,000 in fixed-memory chunks, the state carried."""
    from statetrack.config import EvalConfig, ModelConfig, TrainConfig
    from statetrack.tasks import get_task
    from statetrack.training.evaluation import evaluate
    from statetrack.training.loop import train

    cfg = TrainConfig(
        task="parity",
        model=ModelConfig(layers=name, d_model=8, d_state=4),
        train_min_len=1,
        train_max_len=12,
        steps=60,
        batch_size=16,
        lr=0.01,
        eval_every=30,
        patience=10,
        val_sequences=32,
        seed=0,
        device="cpu",
    )
    result = train(cfg)
    curve = result.curve
    assert curve[-1].val_loss < curve[0].val_loss, (name, curve)
    (m,) = evaluate(result.model, get_task("parity"), EvalConfig(lengths=[10_000], batch_size=2, chunk=1000))
    # the state is carried from chunk to chunk: ten chunks score as one whole pass over the same sequences
    (whole,) = evaluate(
        result.model, get_task("parity"), EvalConfig(lengths=[10_000], batch_size=2, chunk=10_000)
    )
    assert (m.length, m.n_sequences, m.accuracy) == (10_000, whole.n_sequences, whole.accuracy), name
    assert m.token_accuracy == pytest.approx(whole.token_accuracy, abs=1e-3), name


@pytest.mark.parametrize("rows", [False, True])
def test_pdssm_hard_map_from_distinct_rows_equals_the_map_per_token(rows):
    """Without gradients PD-SSM forms its [N, N] mix once per distinct input row (a layer reading token
    embeddings sees one per symbol): the one-hot map is the argmax of the per-token mix either way."""
    from statetrack.layers.pdssm import PDSSM

    torch.manual_seed(0)
    layer = PDSSM(8, 6, dict_size=4, rows=rows)
    axis = -1 if rows else -2
    symbols = torch.randn(3, 8)
    repeated = symbols[torch.randint(0, 3, (2, 50))]  # 3 distinct rows among 100
    distinct = torch.randn(2, 50, 8)
    for x in (repeated, distinct):
        with torch.no_grad():
            idx, _, _, soft = layer._terms(x, relax=False)
            assert soft is None and torch.equal(idx, layer._mix(x).argmax(axis))
