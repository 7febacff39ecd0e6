"""``modarith:m/equals``: Grazzi2024's layout of modular arithmetic, the answer read at a final '='."""

import numpy as np
import pytest

from statetrack.errors import UserError
from statetrack.tasks import get_task


def value_of(tokens, task) -> int:
    """The expression's value mod m, by Python's own precedence: '_' stands for '+ 0', '=' ends it."""
    text = ""
    for t in tokens:
        s = task.symbols[t]
        text += {"_": "+0", "=": ""}.get(s, s)
    return eval(text or "0") % task.modulus  # digits and + - * only


@pytest.mark.parametrize("m", [2, 5, 7])
def test_every_string_ends_at_equals_and_is_scored_there_alone(m):
    task = get_task(f"modarith:{m}/equals")
    aut = task.automaton()
    rng = np.random.default_rng(0)
    for length in range(1, 16):
        b = task.sample_batch(rng, 64, length)
        assert (b.inputs[:, -1] == task.EQUALS).all()
        assert (b.inputs[:, :-1] != task.EQUALS).all()
        assert b.mask[:, -1].all() and not b.mask[:, :-1].any()
        for x, y in zip(b.inputs, b.targets, strict=True):
            assert y[-1] == value_of(x, task)
        # the automaton reads the same answer, and no state before the '=' is a string's end
        states = aut.run(b.inputs)
        assert (aut.labels[states[:, -1]] == b.targets[:, -1]).all()
        assert (aut.labels[states[:, :-1]] == -1).all()


def test_the_layout_without_equals_is_unchanged():
    plain, eq = get_task("modarith:5"), get_task("modarith:5/equals")
    assert (plain.vocab_size, eq.vocab_size) == (9, 10)
    assert eq.name == "modarith:5/equals" and eq.symbols[-1] == "="
    b = plain.sample_batch(np.random.default_rng(1), 32, 9)
    assert (b.inputs != plain.EQUALS).all()


def test_a_bad_option_names_the_allowed_one():
    with pytest.raises(UserError, match="allowed: equals"):
        get_task("modarith:5/eq")
