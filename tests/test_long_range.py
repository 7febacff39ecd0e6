"""The long-range test draw, checked against an independent brute-force count: every string's last k
symbols leave both labels possible, the label is balanced and independent of the suffix, and each string
is as likely as the definition says. Also: the automata behind the regular tasks agree with the tasks'
own draws, window languages are named (one line, exit 2), and multi-class tasks get a draw whose suffix
leaves every label possible."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest

from statetrack.errors import UserError
from statetrack.tasks import draws, get_task, label_shares, sample_json
from statetrack.tasks.long_range import default_suffix

# languages of our own: star-free and not, 2-3 letters, up to 10 states
LANGS = {
    # contains aba (star-free)
    "aba": (
        ["n", "a", "ab", "aba"],
        ["a", "b"],
        "n",
        ["aba"],
        [["a", "n"], ["a", "ab"], ["aba", "n"], ["aba", "aba"]],
    ),
    # at most two c (star-free, 3 letters)
    "c2": (
        ["0", "1", "2", "x"],
        ["a", "b", "c"],
        "0",
        ["0", "1", "2"],
        [["0", "0", "1"], ["1", "1", "2"], ["2", "2", "x"], ["x", "x", "x"]],
    ),
    # no bb and starts with a (star-free)
    "nobb": (
        ["s", "la", "lb", "x"],
        ["a", "b"],
        "s",
        ["la", "lb"],
        [["la", "x"], ["la", "lb"], ["la", "x"], ["x", "x"]],
    ),
    # number of a's mod 3 equals number of c's mod 2 (not star-free: groups C3 and C2), 6 states
    "mod": (
        [f"{i}{j}" for i in range(3) for j in range(2)],
        ["a", "b", "c"],
        "00",
        ["00", "11"],
        [[f"{(i + 1) % 3}{j}", f"{i}{j}", f"{i}{1 - j}"] for i in range(3) for j in range(2)],
    ),
    # a 10-state DFA drawn at random (3 letters)
    "rand10": None,
    # every c is eventually followed by an a: at every length only one suffix (b^k) leaves both labels possible
    "evc": (["ok", "pend"], ["a", "b", "c"], "ok", ["ok"], [["ok", "ok", "pend"], ["ok", "pend", "pend"]]),
    # the number of a's is 0 mod 4 (a group language: no window)
    "mod4": (["0", "1", "2", "3"], ["a", "b"], "0", ["0"], [["1", "0"], ["2", "1"], ["3", "2"], ["0", "3"]]),
    # ends in ab: a window language (its label is decided by its last 2 symbols)
    "endsab": (["x", "a", "ab"], ["a", "b"], "x", ["ab"], [["a", "x"], ["a", "ab"], ["a", "x"]]),
}


def _rand10():
    rng = np.random.default_rng(7)
    states = [f"q{i}" for i in range(10)]
    rows = [[states[j] for j in rng.integers(0, 10, 3)] for _ in states]
    return states, ["a", "b", "c"], "q0", [s for s in states if rng.random() < 0.4], rows


LANGS["rand10"] = _rand10()


@pytest.fixture
def lang(tmp_path):
    def make(name):
        states, alphabet, start, accept, rows = LANGS[name]
        spec = {
            "states": states,
            "alphabet": alphabet,
            "start": start,
            "accept": accept,
            "transitions": {
                s: dict(zip(alphabet, r, strict=True)) for s, r in zip(states, rows, strict=True)
            },
        }
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(spec))
        return f"dfa:{p}", spec

    return make


def accepts(spec, word: str) -> bool:
    q = spec["start"]
    for a in word:
        q = spec["transitions"][q][a]
    return q in spec["accept"]


def brute(spec, length, k):
    """Independently: the qualifying suffixes, and the probability of every string of the draw."""
    sigma = spec["alphabet"]
    prefixes = ["".join(p) for p in itertools.product(sigma, repeat=length - k)]
    label = {}
    qualifying = []
    for s in itertools.product(sigma, repeat=k):
        s = "".join(s)
        labs = {p: accepts(spec, p + s) for p in prefixes}
        label.update({p + s: v for p, v in labs.items()})
        if len(set(labs.values())) == 2:
            qualifying.append((s, sum(labs.values())))
    prob = {}
    for s, n_acc in qualifying:
        for p in prefixes:
            w = p + s
            pool = n_acc if label[w] else len(prefixes) - n_acc
            prob[w] = 0.5 / len(qualifying) / pool
    return prob, label, {s for s, _ in qualifying}


@pytest.mark.parametrize("name,length", [("aba", 9), ("c2", 6), ("nobb", 9), ("mod", 7), ("rand10", 7)])
def test_draw_matches_a_brute_force_count(lang, name, length):
    """Every string appears as often as the definition says (each count within 5 sd), its suffix leaves both
    labels possible, its label is right, and half the strings are accepted."""
    task_name, spec = lang(name)
    task = get_task(task_name)
    k = default_suffix(length)
    prob, label, qualifying = brute(spec, length, k)
    assert prob, "the language has a long-range draw at this length"
    n = 60_000
    b = draws.batch(task, "long", np.random.default_rng(3), n, length)
    words = ["".join(spec["alphabet"][a] for a in row) for row in b.inputs]
    drawn = Counter(words)
    assert set(drawn) <= set(prob)  # nothing outside the draw's support
    for w, p in prob.items():
        expected = n * p
        assert abs(drawn.get(w, 0) - expected) < 5 * np.sqrt(expected) + 2, (w, drawn.get(w, 0), expected)
    assert all(w[length - k :] in qualifying for w in drawn)
    assert all(bool(y) == label[w] for w, y in zip(words, b.targets[:, -1], strict=True))
    assert abs(b.targets[:, -1].mean() - 0.5) <= 1 / n


@pytest.mark.parametrize("name", ["aba", "c2", "nobb", "mod", "rand10"])
def test_length_200_properties(lang, name):
    """statetrack sample dfa:X --split long --length 200 --n 1000: labels right, half accepted, the last 100
    symbols leave both labels possible (checked by running every reachable state through them), and the
    suffix tells nothing about the label (a predictor fitted on half the strings' last 8 symbols scores
    about 50% on the other half)."""
    task_name, spec = lang(name)
    rows = sample_json(task_name, 200, 1000, seed=1, split="long")
    assert len(rows) == 1000
    labels = np.array([r["targets"][-1] for r in rows])
    assert labels.sum() == 500
    for r in rows[:100]:
        assert bool(r["targets"][-1]) == accepts(spec, "".join(r["input_symbols"]))
        assert r["suffix_start"] == 100
    # the states some prefix of 100 symbols reaches, by brute-force breadth (sets of states)
    reach = {spec["start"]}
    for _ in range(100):
        reach = {spec["transitions"][q][a] for q in reach for a in spec["alphabet"]}
    for r in rows[:200]:
        ends = set()
        for q in reach:
            for a in r["input_symbols"][100:]:
                q = spec["transitions"][q][a]
            ends.add(q in spec["accept"])
        assert ends == {True, False}
    keys = ["".join(r["input_symbols"][-8:]) for r in rows]
    fit: dict = {}
    for key, y in zip(keys[:500], labels[:500], strict=True):
        fit.setdefault(key, []).append(y)
    guess = [round(np.mean(fit[key])) if key in fit else 0 for key in keys[500:]]
    acc = np.mean(np.array(guess) == labels[500:])
    assert 0.42 <= acc <= 0.58


def test_window_language_is_named(lang, cli):
    task_name, _ = lang("endsab")
    task = get_task(task_name)
    reason = draws.unavailable(task, "long", 200)
    assert "window language" in reason and "last 2 symbols" in reason
    with pytest.raises(UserError, match="window language"):
        sample_json(task_name, 200, 10, split="long")
    p = cli.start("sample", task_name, "--split", "long", "--length", "200", "--n", "1000", "--json")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "window language" in err and "Traceback" not in err


def test_sample_command_long(lang, cli):
    task_name, _ = lang("aba")
    p = cli.start("sample", task_name, "--split", "long", "--length", "200", "--n", "1000", "--json")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(lines) == 1001 and lines[-1]["label_shares"]["shares"] == {"rejected": 0.5, "accepted": 0.5}
    assert lines[-1]["label_shares"]["exact"] == 0.5 and all(x["split"] == "long" for x in lines[:-1])


def test_suffix_option(lang):
    task_name, spec = lang("aba")
    rows = sample_json(task_name, 40, 50, split="long", suffix=30)
    assert all(r["suffix_start"] == 10 for r in rows)
    assert all("aba" not in "".join(r["input_symbols"][10:]) for r in rows)  # an aba there would decide
    with pytest.raises(UserError, match="bad suffix length"):
        sample_json(task_name, 40, 5, split="long", suffix=41)
    with pytest.raises(UserError, match="--split long"):
        sample_json(task_name, 40, 5, split="test", suffix=10)


def test_not_regular_and_not_measurable():
    with pytest.raises(UserError, match="not computed by a finite automaton"):
        sample_json("modarith-brackets:5", 20, 2, split="long")
    # every string of a length has the same label: named, no draw
    assert "same label" in draws.unavailable(get_task("modcount:3"), "long", 30)


@pytest.mark.parametrize(
    "name", ["cycle:5", "group:S3", "group:S5/transpositions", "modarith:5", "evenpairs", "parity:final"]
)
def test_multiclass_suffix_leaves_every_label_possible(name):
    task = get_task(name)
    auto = task.automaton()
    length = 40
    b = draws.batch(task, "long", np.random.default_rng(0), 300, length)
    p = draws.long_plan(task, length)
    counts = np.bincount(b.targets[:, -1], minlength=task.num_classes)
    assert counts[p.labels].max() - counts[p.labels].min() <= 1  # balanced over the labels of this length
    reach = np.flatnonzero(auto.reachable(length - p.suffix))
    for row in b.inputs[:50]:
        ends = auto.apply(auto.symbol_index(row[length - p.suffix :]), reach)
        assert set(p.labels) <= set(auto.labels[ends])
    # the targets are the task's own: its label at every position, from the automaton of its draw
    states = auto.run(b.inputs)
    assert (auto.labels[states[:, -1]] == b.targets[:, -1]).all()


REGULAR = [
    "tomita:3",
    "parity",
    "parity:final",
    "evenpairs",
    "evenpairs:every",
    "cycle:5",
    "cycle:5/every",
    "modcount:3",
    "group:S3",
    "group:S5/transpositions",
    "group:C6/generators+identity",
    "modarith:5",
]


@pytest.mark.parametrize("name", REGULAR)
def test_automaton_is_the_tasks_own(name):
    """The automaton gives every target of the training draw, and its exact label distribution is the draw's."""
    t = get_task(name)
    a = t.automaton()
    for length in (1, 2, 7, 40):
        b = t.sample_batch(np.random.default_rng(length), 300, length)
        st = a.run(b.inputs)
        assert (a.outputs[st] == b.targets).all()
        assert (a.labels[st[:, -1]] == b.targets[:, -1]).all()
    dist = a.label_distribution(30)
    emp = (
        np.bincount(
            t.sample_batch(np.random.default_rng(9), 20_000, 30).targets[:, -1], minlength=t.num_classes
        )
        / 20_000
    )
    assert np.abs(dist - emp).max() < 0.015


def test_label_shares_names_the_exact_majority():
    s = label_shares("modarith:5", 40, "test", n=2000)
    exact = get_task("modarith:5").automaton().label_distribution(40)
    assert s["exact"] == pytest.approx(exact.max()) and abs(s["majority"] - s["exact"]) < 0.04
    assert label_shares("tomita:3", 20, "long", n=500)["exact"] == 0.5


def test_rejection_path_matches_the_brute_force_count(lang):
    """Above the subset-automaton cap the suffix is drawn by rejection: the same distribution."""
    from statetrack.tasks.long_range import draw, plan

    task_name, spec = lang("aba")
    auto = get_task(task_name).automaton()
    length = 8
    p = plan(auto, length, max_sets=1)
    assert p.rejection and p.reason is None
    prob, _, _ = brute(spec, length, default_suffix(length))
    n = 40_000
    drawn = Counter(
        "".join(spec["alphabet"][a] for a in row) for row in draw(auto, p, np.random.default_rng(5), n)
    )
    assert set(drawn) <= set(prob)
    for w, q in prob.items():
        assert abs(drawn.get(w, 0) - n * q) < 5 * np.sqrt(n * q) + 2, w


def test_one_suffix_is_named(lang, cli):
    """Where one suffix qualifies the long-range test is that suffix after different prefixes: sample, the
    plan and evaluation's note say so."""
    from statetrack import EvalConfig, evaluate
    from test_scoring import Constant

    task_name, _ = lang("evc")
    task = get_task(task_name)
    p = draws.long_plan(task, 200)
    assert p.reason is None and p.note.startswith("one suffix: only b^100 leaves both labels possible")
    assert label_shares(task_name, 200, "long", n=100)["note"] == p.note
    assert draws.long_plan(get_task(lang("aba")[0]), 200).note is None  # many suffixes: nothing to say
    p = cli.start("sample", task_name, "--split", "long", "--length", "200", "--n", "1")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "one suffix: only b^100" in " ".join((out + err).split())
    m = evaluate(
        Constant(2, 0), task, EvalConfig(lengths=[200], batch_size=8, test_split="long", device="cpu")
    )[0]
    assert m.accuracy == 0.5 and "one suffix" in m.note


def test_nothing_left_to_decide_and_label_names(lang):
    """A suffix as long as the string leaves nothing to decide (not 'a window language'); labels print as
    names (accepted/rejected, a group element)."""
    task_name, _ = lang("mod4")
    task = get_task(task_name)
    reason = draws.unavailable(task, "long", 20, suffix=20)
    assert "nothing is left before it to decide" in reason and "window" not in reason
    assert draws.unavailable(task, "long", 20) is None  # ceil(L/2): a draw
    assert "window" in draws.unavailable(get_task(lang("endsab")[0]), "long", 200)
    even = {
        "states": ["e", "o"],
        "alphabet": ["a"],
        "start": "e",
        "accept": ["e"],
        "transitions": {"e": {"a": "o"}, "o": {"a": "e"}},
    }
    assert get_task("group:S3").automaton().label_name(3) == "(1 2 3)"
    from statetrack.tasks.dfa import DFA, DFATask

    t = DFATask(DFA(even), "even")
    assert t.automaton().label_name(1) == "accepted"
    assert draws.unavailable(t, "long", 6) == "every string of length 6 has the same label (accepted)"


def test_a_suffix_is_written_with_powers():
    """A one-suffix note writes runs and repeated blocks as powers (Tomita 2's suffix at length 500 is
    '(1 0)^125', not 250 symbols); the tokens come back when the powers are expanded."""
    from statetrack.tasks.long_range import power_text

    cases = {
        "1 0 1 0 1 0 1 0 1 0": "(1 0)^5",
        "0 1 0 1 0": "(0 1)^2 0",
        "c a a a b": "c a^3 b",
        "a a b a a b a a b": "(a^2 b)^3",
        "b b b": "b^3",
        "a b": "a b",
    }
    for word, text in cases.items():
        assert power_text(word.split()) == text
    rng = np.random.default_rng(0)
    for _ in range(200):  # expanding the powers gives the word back
        word = [str(x) for x in np.tile(rng.integers(0, 2, rng.integers(1, 4)), rng.integers(1, 5))]
        word += [str(x) for x in rng.integers(0, 2, rng.integers(0, 3))]
        assert _expand(power_text(word)) == word, (word, power_text(word))


def _expand(text: str) -> list[str]:
    """'(1 0)^2 c^3' -> ['1', '0', '1', '0', 'c', 'c', 'c']."""
    out: list[str] = []
    while text:
        text = text.strip()
        if text.startswith("("):
            depths = itertools.accumulate({"(": 1, ")": -1}.get(ch, 0) for ch in text)
            close = next(i for i, depth in enumerate(depths) if depth == 0)
            inner, text = _expand(text[1:close]), text[close + 1 :]
            n, _, text = text[1:].partition(" ")
            out += inner * int(n)
        else:
            token, _, text = text.partition(" ")
            sym, _, n = token.partition("^")
            out += [sym] * int(n or 1)
    return out
