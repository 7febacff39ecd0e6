"""The theory commands: oracle, construct, counterexample, spectrum, and train --init construction:NAME."""

import json

from statetrack.cli import main


def _json_lines(capsys):
    return [json.loads(l) for l in capsys.readouterr().out.splitlines() if l.strip()]


def test_oracle_one_and_table(capsys):
    assert main(["oracle", "--layers", "mamba,s4d", "--task", "parity", "--json"]) == 0
    r = _json_lines(capsys)[0]
    assert r["verdict"] == "impossible" and r["basis"] == "T4" and r["reason"]
    assert main(["oracle", "--layers", "negmamba", "--task", "parity"]) == 0
    assert capsys.readouterr().out.startswith("possible (T5 [rounding])")
    assert (
        main(
            [
                "oracle",
                "--table",
                "--layers",
                "mamba;negmamba*2;s4d",
                "--tasks",
                "parity,group:C2xC4",
                "--json",
            ]
        )
        == 0
    )
    rows = _json_lines(capsys)
    assert len(rows) == 6
    assert {(r["layers"], r["task"]): r["verdict"] for r in rows}[("negmamba*2", "group:C2xC4")] == "possible"
    assert main(["oracle", "--table"]) == 0
    assert "oracle" in capsys.readouterr().out


def test_oracle_bad_input_is_one_line_exit_2(capsys):
    assert main(["oracle", "--layers", "nosuch", "--task", "parity"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert main(["oracle", "--layers", "mamba"]) == 2


def test_construct_list_and_counterexample_and_spectrum(tmp_path, capsys):
    assert main(["construct", "--list", "--json"]) == 0
    names = [r["name"] for r in _json_lines(capsys)]
    assert "parity-negmamba" in names
    ck = tmp_path / "p.safetensors"
    assert main(["construct", "parity-negmamba", "--out", str(ck)]) == 0
    capsys.readouterr()
    assert main(["counterexample", str(ck), "--max-len", "500", "--json"]) == 0
    r = _json_lines(capsys)[0]
    assert r["theorem"] is None and r["found"] is False
    png = tmp_path / "s.png"
    assert main(["spectrum", str(ck), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 1000
    assert "smallest real part -1" in out  # bit 1 gives A = -1
    assert main(["spectrum", str(ck), "--json"]) == 0
    s = _json_lines(capsys)[0]
    assert s["layers"][0]["per_token_min_real"] == {"0": 1.0, "1": -1.0}
    # the construction's -1 for a 1 is the root parity needs: exact, nothing decays
    cyc = s["layers"][0]["per_token_cycle"]["1"]
    assert cyc["order"] == 2 and cyc["horizon"] is None and cyc["half_life"] is None
    ch = s["layers"][0]["per_channel_cycle"]["2"]  # one channel, both symbols exact, along sequences too
    assert ch["horizon_run"] is None and ch["error"] < 1e-4  # float32 angles, summed over 64 inputs


def test_cycle_fit_reads_each_symbols_order_angle_error_and_decay():
    import cmath
    import math

    import pytest

    from statetrack.analysis.spectra import cycle_fit, cycle_text
    from statetrack.tasks import get_task

    eps = 0.01
    fit = cycle_fit(
        get_task("parity").automaton(), {0: [1.0], 1: [0.3, 0.5 * cmath.exp(1j * (math.pi - eps))]}
    )
    assert set(fit) == {"1"}  # 0 leaves parity's states as they are: order 1, no cycle to follow
    one = fit["1"]
    assert one["order"] == 2 and one["angle_error"] == pytest.approx(eps)
    assert one["horizon"] == pytest.approx(math.pi / (2 * eps)) and one["half_life"] == pytest.approx(1.0)
    assert "the count lost after about 157 such inputs, the amplitude halved every 1" in cycle_text(fit)
    # S3: a transposition needs -1, a 3-cycle a cube root of unity; the nearest eigenvalue is chosen
    s3 = get_task("group:S3").automaton()
    roots = {t: [1.0, -1.0, cmath.exp(2j * math.pi / 3)] for t in range(6)}
    orders = {t: c["order"] for t, c in cycle_fit(s3, roots).items()}
    assert sorted(orders.values()) == [2, 2, 2, 3, 3] and "0" not in orders
    assert all(c["horizon"] is None for c in cycle_fit(s3, roots).values())
    # many symbols: the line shows those lost soonest
    a5 = cycle_fit(
        get_task("group:A5").automaton(), {t: [cmath.exp(1j * (math.pi - t / 1000))] for t in range(60)}
    )
    line = cycle_text(a5, limit=2)
    assert line.count(": order") == 2 and "(the 2 of 59 symbols whose count is lost soonest)" in line
    dead = {
        "order": 2,
        "angle_deg": 0.0,
        "root_deg": 180.0,
        "modulus": 0.001,
        "horizon": 0.5,
        "half_life": 0.1,
    }
    assert cycle_text({"1": dead}).endswith("the count lost at once, the amplitude gone at once")
    # a reset (Tomita 1's 0 sends every state to the sink) is no permutation: nothing to read
    assert cycle_fit(get_task("tomita:1").automaton(), {0: [0.5], 1: [1.0]}) == {}
    # in context (a conv makes the angle depend on the tokens before): the best channel's bias and spread
    par = get_task("parity").automaton()
    seen = {1: [[1.0, cmath.exp(1j * (math.pi + 0.02))], [0.9, cmath.exp(1j * (math.pi - 0.01))]]}
    ctx = cycle_fit(par, {1: [-1.0]}, seen)["1"]["context"]
    assert ctx["n"] == 2 and ctx["bias"] == pytest.approx(0.005) and ctx["spread"] == pytest.approx(0.015)
    assert ctx["horizon_drift"] == pytest.approx(math.pi / 2 / 0.005)
    assert ctx["horizon_spread"] == pytest.approx((math.pi / 2 / 0.015) ** 2)
    assert ctx["min_deg"] == pytest.approx(180 - math.degrees(0.01))
    line = cycle_text(cycle_fit(par, {1: [-1.0]}, seen))
    assert "the best channel (root 180): 179.4 to 181.1 deg, bias +0.29, spread 0.86 deg" in line
    assert "the count lost after about 314 such inputs by the bias, after about 10,966 such inputs" in line
    wide = {1: [[cmath.exp(1j * (math.pi + 1.5))], [cmath.exp(1j * (math.pi - 1.7))]]}
    assert "by the bias, at once by the spread" in cycle_text(cycle_fit(par, {1: [-1.0]}, wide))
    # the same angle at every place: nothing more to say than the one-step reading
    assert "context" not in cycle_fit(par, {1: [-1.0]}, {1: [[-1.0], [-1.0]]})["1"]


def test_channel_fit_reads_one_channel_along_whole_sequences():
    """A channel counts when every symbol turns it right; its phase summed along prefixes (after a common
    offset, which a fixed suffix sets) drifts by the symbols' mean error and spreads as a random walk."""
    import cmath
    import math

    import numpy as np
    import pytest

    from statetrack.analysis.spectra import channel_fit, channel_text
    from statetrack.tasks import get_task

    c2 = get_task("group:C2").automaton()
    errs = np.array([0.02, -0.01])  # symbol 0 (the identity) and symbol 1, off their turns 0 and pi
    steady = {0: [cmath.exp(0.02j), 1.0], 1: [cmath.exp(1j * (math.pi - 0.01)), -1.0]}  # channel 1 exact

    def sums(spread, channels=2):  # B = 4 prefixes of 32 and 64 inputs, symbol 1 at L / 2 -+ spread(L)
        out = {}
        for L in (32, 64):
            n1 = np.array([L // 2 - spread(L), L // 2 + spread(L)] * 2)
            counts = np.stack([L - n1, n1], 1)
            phase = np.stack([n1 * math.pi + counts @ errs, n1 * math.pi], 1) + 0.7  # a common offset 0.7
            out[L] = (counts, phase[:, :channels])
        return out

    fit = channel_fit(c2, steady, sums(lambda L: L // 16))["2"]
    assert fit["channel"] == 1 and fit["turns"] == {"0": 0, "1": 1} and fit["error"] < 1e-9
    assert fit["horizon_drift"] is None and fit["horizon_spread"] is None and fit["horizon_run"] is None
    alone = {t: v[:1] for t, v in steady.items()}
    fit = channel_fit(c2, alone, sums(lambda L: 0, 1))["2"]  # every prefix half and half: a pure drift
    assert fit["drift"] == pytest.approx(0.005) and fit["horizon_drift"] == pytest.approx(math.pi / 2 / 0.005)
    assert fit["horizon_spread"] is None and fit["worst_token"] == "0"
    assert fit["horizon_run"] == pytest.approx(math.pi / 2 / 0.02)
    fit = channel_fit(c2, alone, sums(lambda L: L // 16, 1))["2"]  # +-2 at 32, +-4 at 64: var (0.03 d)^2
    assert fit["drift"] == pytest.approx(0.005)
    assert fit["spread"] ** 2 == pytest.approx((0.12**2 - 0.06**2) / 32)
    assert fit["horizon_spread"] == pytest.approx((math.pi / 2) ** 2 / ((0.12**2 - 0.06**2) / 32))
    line = channel_text({"2": fit})
    assert line.startswith("mod 2: channel 0, ") and "lost after about 314 inputs by the drift" in line
    assert "a run of symbol 0 (its turn 1.15 deg off) loses it after about 79" in line
    assert channel_fit(get_task("tomita:1").automaton(), {0: [0.5], 1: [1.0]}, sums(lambda L: 0)) == {}


def test_train_from_a_construction_with_noise(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert (
        main(
            [
                "train",
                "--init",
                "construction:parity-negmamba",
                "--init-noise",
                "0.0",
                "--steps",
                "2",
                "--eval-every",
                "1",
                "--train-lengths",
                "4",
                "--test-lengths",
                "1000",
                "--eval-batch",
                "16",
                "--lr",
                "1e-6",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    rows = _json_lines(capsys)
    assert rows[0]["accuracy"] == 1.0  # still the construction after two tiny steps
    assert (
        main(
            [
                "train",
                "--init",
                "construction:parity-negmamba",
                "--init-noise",
                "0.05",
                "--steps",
                "2",
                "--eval-every",
                "1",
                "--train-lengths",
                "4",
                "--test-lengths",
                "16",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["train", "--init", "bogus", "--db", db]) == 2
    assert main(["train", "--init", "construction:parity-negmamba", "--task", "group:S3", "--db", db]) == 2


def test_init_noise_is_seeded():
    import torch

    from statetrack.config import TrainConfig
    from statetrack.constructions import build, init_model

    c = build("parity-negmamba")
    cfg = TrainConfig(
        task="parity", model=c.config.model, init="construction:parity-negmamba", init_noise=0.1, seed=3
    )
    a, b = init_model(cfg), init_model(cfg)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    d = [
        float((p - q).detach().std())
        for p, q in zip(a.parameters(), c.model.parameters(), strict=True)
        if p.numel() > 4
    ]
    assert all(0.02 < x < 0.3 for x in d)
