"""The task suite: shapes, determinism, chance, labels checked against independent computations."""

from __future__ import annotations

import itertools
import json
import re
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.combinatorics import Permutation

from statetrack.errors import UserError
from statetrack.tasks import FAMILIES, get_task, list_tasks, sample_json
from statetrack.tasks.dfa import DFA, tomita_dfa
from statetrack.tasks.streaming import StreamingTask

HYP = settings(max_examples=50, deadline=None)

TASKS = [
    "group:S3",
    "group:A4xC5",
    "group:S5/transpositions",
    "group:S5/transpositions+3cycles",
    "group:C6/generators+identity",
    "group:Q8",
    "group:D4/involutions",
    "modcount:3",
    "modcount:2",
    "modarith:5",
    "modarith:7",
    "modarith-brackets:5",
    "modarith-brackets:5/mult",
    "cycle:5",
    "cycle:5/every",
    "evenpairs",
    "evenpairs:every",
    "tomita:1",
    "tomita:3",
    "tomita:7",
    "offset",
    "offset:two-isis",
    "offset:double-isi",
    "witness:ones",
    "witness:alt",
    "witness:block:3:5",
    "witness:pulse:4",
]
FIXED = {
    "modcount:3",
    "modcount:2",
    "offset:two-isis",
    "offset:double-isi",
    "witness:ones",
    "witness:alt",
    "witness:block:3:5",
    "witness:pulse:4",
}


def batch(name, length, n=16, seed=0):
    return get_task(name).sample_batch(np.random.default_rng(seed), n, length)


def one_line_user_error(fn, *args):
    with pytest.raises(UserError) as e:
        fn(*args)
    assert "\n" not in str(e.value) and str(e.value)
    return str(e.value)


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("length", [1, 2, 7, 40])
def test_shapes_and_ranges(name, length):
    t = get_task(name)
    b = batch(name, length)
    for a in (b.inputs, b.targets, b.mask):
        assert a.shape == (16, length)
    assert b.inputs.dtype == np.int64 and b.targets.dtype == np.int64 and b.mask.dtype == bool
    assert b.inputs.min() >= 0 and b.inputs.max() < t.vocab_size
    assert b.targets.min() >= 0 and b.targets.max() < t.num_classes
    assert b.mask.any(axis=1).all() or name.startswith("offset")
    if t.scoring == "final":
        assert (b.mask[:, -1]).all() and b.mask.sum() == 16


@pytest.mark.parametrize("name", TASKS)
def test_deterministic_from_seed(name):
    a, b, c = batch(name, 50, seed=3), batch(name, 50, seed=3), batch(name, 50, seed=4)
    assert (a.inputs == b.inputs).all() and (a.targets == b.targets).all() and (a.mask == b.mask).all()
    if name not in FIXED:
        assert (a.inputs != c.inputs).any()
    else:
        assert (a.inputs == a.inputs[0]).all()  # fixed input: every row the same


@pytest.mark.parametrize("name", TASKS)
def test_chance_level(name):
    t = get_task(name)
    c = t.chance_level()
    assert 1.0 / t.num_classes - 1e-9 <= c < 1.0
    d = t.label_distribution()
    if d is not None:
        assert d.shape == (t.num_classes,) and abs(d.sum() - 1) < 1e-9


def test_chance_values():
    assert get_task("group:S5").chance_level() == pytest.approx(1 / 120)
    assert get_task("group:A4xC5").chance_level() == pytest.approx(1 / 60)
    assert get_task("group:S5/transpositions").chance_level() == pytest.approx(1 / 120)
    assert get_task("group:S5/3cycles").chance_level() == pytest.approx(1 / 60)  # <3-cycles> = A5
    assert get_task("modcount:7").chance_level() == pytest.approx(1 / 7)
    assert get_task("evenpairs").chance_level() == 0.5
    assert get_task("witness:pulse:5").chance_level() == 0.5
    assert get_task("offset").chance_level() == pytest.approx(30 / 39)


@pytest.mark.parametrize("name", [n for n in TASKS if isinstance(get_task(n), StreamingTask)])
@pytest.mark.parametrize("chunk", [1, 7, 64])
@pytest.mark.parametrize("split", ["train", "test"])
def test_stream_equals_sample(name, chunk, split):
    t = get_task(name)
    whole, stream = (
        (t.sample_batch, t.stream_batch) if split == "train" else (t.test_batch, t.stream_test_batch)
    )
    full = whole(np.random.default_rng(11), 8, 46)
    parts = list(stream(np.random.default_rng(11), 8, 46, chunk))
    assert all(p.inputs.shape[1] <= chunk for p in parts)
    for field in ("inputs", "targets", "mask"):
        assert (np.concatenate([getattr(p, field) for p in parts], axis=1) == getattr(full, field)).all()


def test_default_stream_for_brackets_slices():
    t = get_task("modarith-brackets:5")
    parts = list(t.stream_batch(np.random.default_rng(0), 4, 23, 5))
    assert [p.inputs.shape[1] for p in parts] == [5, 5, 5, 5, 3]
    assert parts[-1].mask[:, -1].all() and not any(p.mask.any() for p in parts[:-1])


# -- group word problems ------------------------------------------------------------------------
@HYP
@given(
    name=st.sampled_from(["S3", "A4", "Q8", "D4", "C2xC4", "S4", "C6", "V4", "A5", "C2xS3"]),
    length=st.integers(1, 25),
    seed=st.integers(0, 2**32 - 1),
)
def test_group_labels_are_sympy_prefix_products(name, length, seed):
    t = get_task(f"group:{name}")
    g = t.group
    b = t.sample_batch(np.random.default_rng(seed), 3, length)
    for row_x, row_y in zip(b.inputs, b.targets, strict=True):
        acc = Permutation(list(range(g.degree)))
        for x, y in zip(row_x, row_y, strict=True):
            acc = acc * Permutation(g.perm(int(x)))
            assert acc.array_form == g.perm(int(y))


@HYP
@given(chunk=st.integers(1, 20), seed=st.integers(0, 2**32 - 1))
def test_group_stream_continues_running_state(chunk, seed):
    t = get_task("group:S4")
    parts = list(t.stream_batch(np.random.default_rng(seed), 5, 33, chunk))
    prev = np.zeros(5, dtype=np.int64)
    for p in parts:
        for k in range(p.inputs.shape[1]):
            prev = t.group.table[prev, p.inputs[:, k]].astype(np.int64)
            assert (p.targets[:, k] == prev).all()


def test_group_subsets():
    t = get_task("group:S5/transpositions+3cycles")
    g = t.group
    assert len(t.support) == 10 + 20
    b = batch("group:S5/transpositions+3cycles", 30, n=64)
    for x in np.unique(b.inputs):
        moved = [i for i, v in enumerate(g.perm(int(x))) if i != v]
        assert len(moved) in (2, 3)
    tr = get_task("group:S5/transpositions")
    assert len(tr.support) == 10
    assert set(np.unique(tr.sample_batch(np.random.default_rng(0), 64, 4).inputs)) == set(tr.support)
    assert list(get_task("group:C6/generators+identity").support) == [0, 1]
    inv = get_task("group:S4/involutions").support
    assert len(inv) == 9  # 6 transpositions + 3 double transpositions
    assert len(get_task("group:S4/even").support) == 12 and len(get_task("group:S4/odd").support) == 12


def test_group_subset_exact_distribution_matches_sample():
    t = get_task("group:S3/transpositions")
    length = 6
    exact = t.label_distribution_at(length)
    b = t.sample_batch(np.random.default_rng(5), 20000, length)
    emp = np.bincount(b.targets.ravel(), minlength=6) / b.targets.size
    assert np.abs(exact - emp).max() < 0.01
    # odd positions: odd permutations only; the long-run average is uniform on S3
    assert np.abs(t.label_distribution_at(3000) - 1 / 6).max() < 1e-3


def test_whole_group_labels_uniform():
    b = batch("group:S3", 200, n=400)
    freq = np.bincount(b.targets.ravel(), minlength=6) / b.targets.size
    assert np.abs(freq - 1 / 6).max() < 0.01


# -- counting and Chomsky tasks ----------------------------------------------------------------
def test_modcount_and_witnesses():
    b = batch("modcount:3", 10, n=2)
    assert (b.inputs == 1).all() and b.targets[0].tolist() == [1, 2, 0, 1, 2, 0, 1, 2, 0, 1]
    patterns = {
        "witness:ones": "1",
        "witness:alt": "01",
        "witness:block:2:3": "00111",
        "witness:pulse:4": "1000",
    }
    for name, period in patterns.items():
        b = batch(name, 23, n=2)
        expect = [int(c) for c in (period * 23)[:23]]
        assert b.inputs[0].tolist() == expect
        assert b.targets[0].tolist() == (np.cumsum(expect) % 2).tolist()
        assert b.mask.all()
    assert (batch("modcount:2", 30).targets == batch("witness:ones", 30).targets).all()


def _text(task, row):
    return "".join(task.symbols[v] for v in row)


def test_modarith_matches_python_eval():
    for m in (5, 7):
        t = get_task(f"modarith:{m}")
        for length in (1, 2, 3, 4, 9, 10, 31):
            b = t.sample_batch(np.random.default_rng(length), 50, length)
            for x, y in zip(b.inputs, b.targets, strict=True):
                s = _text(t, x)
                assert re.fullmatch(r"\d([+*-]\d)*_?", s) and len(s) == length
                assert s.endswith("_") == (length % 2 == 0)
                assert y[-1] == eval(s.rstrip("_")) % m


def test_modarith_brackets_matches_python_eval():
    for name in ("modarith-brackets:5", "modarith-brackets:5/mult"):
        t = get_task(name)
        for length in (1, 2, 3, 4, 5, 6, 12, 37):
            b = t.sample_batch(np.random.default_rng(length), 30, length)
            for x, y in zip(b.inputs, b.targets, strict=True):
                s = _text(t, x)
                assert len(s) == length and s.count("(") == s.count(")")
                assert ("*" in s) <= name.endswith("mult")
                assert y[-1] == eval(s) % 5
    deep = get_task("modarith-brackets:3").sample_batch(np.random.default_rng(0), 2, 3000)
    assert deep.inputs.shape == (2, 3000)  # no recursion limit


def test_cycle_and_evenpairs_definitions():
    b = batch("cycle:5/every", 30, n=20)
    assert (b.targets == np.cumsum(b.inputs - 1, axis=1) % 5).all()
    f = batch("cycle:5", 30, n=20)
    assert (f.targets[:, -1] == (f.inputs - 1).sum(1) % 5).all()
    e = batch("evenpairs:every", 30, n=20)
    unequal = np.concatenate([np.zeros((20, 1), int), np.cumsum(e.inputs[:, 1:] != e.inputs[:, :-1], 1)], 1)
    assert (e.targets == unequal % 2).all()


# -- DFAs ----------------------------------------------------------------------------------------
def _runs(s):
    return [(k, len(list(g))) for k, g in itertools.groupby(s)]


TOMITA: dict = {
    1: lambda s: set(s) <= {"1"},
    2: lambda s: re.fullmatch("(10)*", s) is not None,
    4: lambda s: "000" not in s,
    5: lambda s: s.count("0") % 2 == 0 and s.count("1") % 2 == 0,
    6: lambda s: (s.count("0") - s.count("1")) % 3 == 0,
    7: lambda s: re.fullmatch("0*1*0*1*", s) is not None,
}


def _tomita3(s):  # no maximal odd block of 1s immediately followed by a maximal odd block of 0s
    runs = _runs(s)
    return all(not (k1 == "1" and n1 % 2 and k2 == "0" and n2 % 2) for (k1, n1), (k2, n2) in pairwise(runs))


TOMITA[3] = _tomita3


@pytest.mark.parametrize("k", range(1, 8))
def test_tomita_dfas(k):
    dfa = tomita_dfa(k)
    pred = TOMITA[k]
    for n in range(11):
        for bits in itertools.product("01", repeat=n):
            s = "".join(bits)
            assert dfa.accepts(s) == pred(s), (k, s)
    b = batch(f"tomita:{k}", 12, n=10)
    for x, y in zip(b.inputs, b.targets, strict=True):
        s = "".join(map(str, x))
        assert y.tolist() == [int(pred(s[: i + 1])) for i in range(12)]


PARITY_DFA = {
    "states": ["even", "odd"],
    "alphabet": ["0", "1"],
    "start": "even",
    "accept": ["odd"],
    "transitions": {"even": {"0": "even", "1": "odd"}, "odd": {"0": "odd", "1": "even"}},
}


def test_dfa_file(tmp_path):
    p = tmp_path / "parity.json"
    p.write_text(json.dumps(PARITY_DFA))
    t = get_task(f"dfa:{p}")
    b = t.sample_batch(np.random.default_rng(0), 8, 30)
    assert (b.targets == np.cumsum(b.inputs, 1) % 2).all() and b.mask.all()


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d["transitions"]["odd"].pop("1"), "undefined transition from state 'odd' on symbol '1'"),
        (lambda d: d["transitions"]["odd"].update({"2": "odd"}), "'2'"),
        (lambda d: d["transitions"]["odd"].update({"1": "nowhere"}), "'nowhere'"),
        (lambda d: d.update({"start": "s9"}), "'s9'"),
        (lambda d: d.update({"accept": ["zz"]}), "'zz'"),
        (lambda d: d.pop("alphabet"), "'alphabet'"),
        (lambda d: d.update({"extra": 1}), "'extra'"),
        (lambda d: d.update({"states": ["even", "odd", "odd"]}), "'odd'"),
    ],
)
def test_dfa_validation(tmp_path, mutate, needle):
    spec = json.loads(json.dumps(PARITY_DFA))
    mutate(spec)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(spec))
    msg = one_line_user_error(get_task, f"dfa:{p}")
    assert needle in msg
    one_line_user_error(DFA, spec)


def test_dfa_file_errors(tmp_path):
    assert "not found" in one_line_user_error(get_task, f"dfa:{tmp_path / 'missing.json'}")
    p = tmp_path / "broken.json"
    p.write_text("{not json")
    assert "not valid JSON" in one_line_user_error(get_task, f"dfa:{p}")


# -- offset prediction --------------------------------------------------------------------------
def test_offset_process():
    t = get_task("offset")
    assert t.default_length == 200
    b = t.sample_batch(np.random.default_rng(0), 64, 400)
    for x, y, m in zip(b.inputs, b.targets, b.mask, strict=True):
        runs = _runs(x.tolist())
        assert runs[0][0] == 0
        for k, n in runs[:-1]:
            assert (k == 1 and n == 10) or (k == 0 and 20 <= n <= 40)
        assert (y[:-1] == x[1:]).all()  # next-token targets
        onset_next = (x[1:] == 1) & (x[:-1] == 0)
        assert (m[:-1] == ~onset_next).all()
    longer = t.sample_batch(np.random.default_rng(0), 64, 401)
    assert (longer.inputs[:, :400] == b.inputs).all()  # the last target is the process's next input
    assert (longer.inputs[:, 400] == b.targets[:, -1]).all()


def test_offset_probes():
    b = batch("offset:two-isis", 200, n=2)
    x = b.inputs[0]
    assert _runs(x.tolist()) == [(0, 30), (1, 10), (0, 80), (1, 10), (0, 70)]
    assert (~b.mask[0]).sum() == 2 and not b.mask[0, 29] and not b.mask[0, 119]
    d = batch("offset:double-isi", 200, n=2)
    x, y, m = d.inputs[0], d.targets[0], d.mask[0]
    assert _runs(x.tolist()) == [(0, 30), (1, 20), (0, 150)]
    assert not m[29] and not m[39] and m.sum() == 198  # the second onset is not scored
    assert y[40:49].tolist() == [1] * 9 and y[49] == 0  # anticipate the second ISI, then its offset
    assert batch("offset:double-isi", 35, n=1).inputs.shape == (1, 35)


# -- bad task strings and the CLI API -----------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [
        "group:S0",
        "group:Q7",
        "group:",
        "group",
        "group:S5/",
        "group:S5/foo",
        "group:C3/transpositions",
        "group:S5/1cycles",
        "group:S8",
        "modcount:-1",
        "modcount:x",
        "modcount",
        "modcount:1",
        "modarith:1",
        "modarith:x",
        "modarith-brackets:5/div",
        "cycle:0",
        "cycle:5/sum",
        "evenpairs:odd",
        "tomita:0",
        "tomita:8",
        "tomita",
        "offset:three",
        "witness",
        "witness:foo",
        "witness:block:2:4",
        "witness:block:0:1",
        "witness:pulse:0",
        "witness:ones:2",
        "dfa",
        "nosuchfamily:3",
    ],
)
def test_bad_task_strings(bad):
    one_line_user_error(get_task, bad)


def test_error_names_the_bad_value():
    assert "'S0'" in one_line_user_error(get_task, "group:S0")
    assert "'Q7'" in one_line_user_error(get_task, "group:Q7")
    assert "'-1'" in one_line_user_error(get_task, "modcount:-1")
    assert "'x'" in one_line_user_error(get_task, "modcount:x")


def test_list_tasks():
    rows = list_tasks()
    assert {r["family"] for r in rows} == set(FAMILIES)
    assert {
        "group",
        "modcount",
        "modarith",
        "modarith-brackets",
        "cycle",
        "evenpairs",
        "dfa",
        "tomita",
        "offset",
        "witness",
        "parity",
    } <= set(FAMILIES)
    for r in rows:
        assert set(r) == {"family", "syntax", "description", "parameters"}
        assert r["syntax"].startswith(r["family"]) and r["description"]
    json.dumps(rows)


def test_sample_json():
    ex = sample_json("group:S3", 10, 3, 7)
    assert len(ex) == 3 and ex == sample_json("group:S3", 10, 3, 7)
    json.dumps(ex)
    g = get_task("group:S3").group
    for e in ex:
        assert len(e["inputs"]) == len(e["targets"]) == len(e["mask"]) == 10
        assert e["input_perms"] == [g.perm(i) for i in e["inputs"]]
        acc = Permutation([0, 1, 2])
        for p, q in zip(e["input_perms"], e["target_perms"], strict=True):
            acc = acc * Permutation(p)
            assert acc.array_form == q
    m = sample_json("modarith:5", 9, 1, 0)[0]
    assert len(m["input_symbols"]) == 9 and m["mask"] == [False] * 8 + [True]
    for bad in [("group:S3", 0, 1, 0), ("group:S3", 5, 0, 0), ("group:S3", 5, 1, -1), ("parity", "x", 1, 0)]:
        one_line_user_error(sample_json, *bad)


def test_groups_given_by_generator_sets():
    """group:G/gens=N: N distinct non-identity elements, a smallest generating set first, nested in N and the
    same every time; group:G/gens=P+P: the listed permutations (cycle notation)."""
    import numpy as np

    from statetrack.algebra import get_group
    from statetrack.algebra.structure import SubgroupCalc
    from statetrack.errors import UserError
    from statetrack.tasks.word_problem import generator_set

    a5 = get_group("A5")
    sets = {n: generator_set(a5, str(n)) for n in (2, 6, 8, 12)}
    for n, s in sets.items():
        assert len(s) == len(set(s.tolist())) == n and 0 not in s
        assert len(SubgroupCalc(a5).closure(s[:2])) == 60  # the first two generate A5
    assert set(sets[2]) <= set(sets[6]) <= set(sets[8]) <= set(sets[12])
    assert (generator_set(a5, "6") == sets[6]).all()  # deterministic
    s5 = generator_set(get_group("S5"), "32")
    assert len(set(s5.tolist())) == 32
    t = get_task("group:S5/gens=32")
    assert t.name == "group:S5/gens=32" and len(t.support) == 32 and np.isclose(t.chance_level(), 1 / 120)
    # an explicit list: the presentation a = (0 1)(2 3), b = (0 2 4) of A5
    t = get_task("group:A5/gens=(0 1)(2 3)+(0 2 4)")
    assert [a5.perm(i) for i in generator_set(a5, "(0 1)(2 3)+(0 2 4)")] == [[1, 0, 3, 2, 4], [2, 1, 4, 3, 0]]
    assert len(t.generated_subgroup()) == 60
    for bad in (
        "group:A5/gens=1",
        "group:A5/gens=60",
        "group:A5/gens=(0 1)",
        "group:A5/gens=(0 9 1)",
        "group:A5/gens=(0 1 2)+(0 1 2)",
        "group:A5/gens=x",
        "group:S5/transpositions+gens=2",
    ):
        with pytest.raises(UserError):
            get_task(bad)


def test_pdssm_task_definitions_match_ours():
    """Terzic2025's code (state_tracking_PyTorch/data_dir/fl_tasks) against our tasks, at lengths where both
    exist: cycle navigation (5 positions, stay/+1/-1, the final position), even pairs (first == last symbol),
    parity (number of b's mod 2, the final label) and modular arithmetic (digits 0-4, + - *, * first, an even
    length ending in '=': ours at even lengths, the blank standing for '='). Each label is recomputed here the
    way their code computes it, from our inputs."""
    import numpy as np

    rng = np.random.default_rng(0)
    for L in (4, 17, 40):
        b = get_task("cycle:5").sample_batch(rng, 64, L)
        moves = b.inputs - 1  # our tokens 0, 1, 2 move by -1, 0, +1
        assert (b.targets[:, -1] == ((moves == 1).sum(1) - (moves == -1).sum(1)) % 5).all()
        b = get_task("evenpairs").sample_batch(rng, 64, L)
        assert (b.targets[:, -1] == (b.inputs[:, 0] != b.inputs[:, -1])).all()
        b = get_task("parity:final").sample_batch(rng, 64, L)
        assert (b.targets[:, -1] == b.inputs.sum(1) % 2).all() and b.mask[:, :-1].sum() == 0
    for L in (4, 10, 40):  # PD-SSM's lengths are even: numbers at even positions, '=' last
        t = get_task("modarith:5")
        b = t.sample_batch(rng, 64, L)
        for x, y in zip(b.inputs, b.targets[:, -1], strict=True):
            assert x[-1] == t.BLANK
            vals, ops = [int(x[0])], []
            for i in range(1, L - 2, 2):  # their two-pass evaluation: * first, then + and -
                op, num = int(x[i]), int(x[i + 1])
                if op == t.TIMES:
                    vals[-1] *= num
                else:
                    vals.append(num)
                    ops.append(op)
            total = vals[0]
            for op, v in zip(ops, vals[1:], strict=True):
                total = total + v if op == t.PLUS else total - v
            assert y == total % 5
