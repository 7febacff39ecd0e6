import pytest

from statetrack.errors import UserError
from statetrack.spec import format_layers, parse_layers


def test_parse_simple_and_repeat():
    assert [l.name for l in parse_layers("mamba,s4d")] == ["mamba", "s4d"]
    assert [l.name for l in parse_layers("negmamba*2")] == ["negmamba", "negmamba"]
    layers = parse_layers("mamba(conv=0,neg=true), s4d(init=inv)*2")
    assert layers[0].options == {"conv": 0, "neg": True}
    assert [l.options for l in layers[1:]] == [{"init": "inv"}] * 2
    assert format_layers(layers) == "mamba(conv=0,neg=true),s4d(init=inv),s4d(init=inv)"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        ",",
        "mamba,",
        "mamba((",
        "mamba(conv)",
        "mamba(=1)",
        "1abc",
        "mamba*0",
        "mamba*65",
        "mamba)",
        "ma mba(x=1",
        "mamba(a=(1))",
    ],
)
def test_malformed(bad):
    with pytest.raises(UserError) as e:
        parse_layers(bad)
    assert "\n" not in str(e.value)
