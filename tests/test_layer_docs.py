"""The mixers' constructors are typed and documented: each option annotated with the type of its default
and named, with that type, in the class docstring's ``Args:``; the delta rules share one q/k/v block whose
parameters keep their names and order (stored checkpoints load, a seed gives the same weights)."""

from __future__ import annotations

import inspect

import pytest
import torch

from statetrack.layers import mixers

#: every built-in mixer's constructor is documented fla-style (Args: name (type): ...)
DOCUMENTED = sorted(mixers())


def _annotation(cls: type, option: str) -> str:
    """The annotation of ``option`` in the first ``__init__`` along the MRO that names it."""
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None and option in inspect.signature(init).parameters:
            return str(inspect.signature(init).parameters[option].annotation)
    raise AssertionError(f"{cls.__name__}: no __init__ names {option}")


@pytest.mark.parametrize("name", DOCUMENTED)
def test_constructor_typed_and_documented(name):
    cls = mixers()[name]
    doc = inspect.getdoc(cls) or ""
    assert "Args:" in doc and "d_model (int)" in doc and "d_state (int)" in doc, doc
    for option, default in cls.options.items():
        kind, annotation = type(default).__name__, _annotation(cls, option)
        # a choice among strings is a Literal of them, the default among them
        choice = annotation.startswith("Literal[") and repr(default) in annotation
        assert annotation == kind or choice, (option, annotation)
        # named with its type, or (a subclass passing its parent's options on) as one of the parent's
        assert f"{option} ({kind})" in doc or f"{option} (Literal[" in doc or f"``{option}``" in doc, (
            f"{name}: {option} ({kind}) not in its Args"
        )
    for method in ("forward", "step"):
        assert "[B, " in (inspect.getdoc(getattr(cls, method)) or ""), f"{name}.{method}: no shapes"


def test_delta_rules_share_the_qkv_block():
    torch.manual_seed(0)
    delta = mixers()["deltanet"](16, 8, heads=2)
    torch.manual_seed(0)
    gated = mixers()["gateddeltanet"](16, 8, heads=2)
    assert torch.equal(delta.qkv.weight, gated.qkv.weight)  # the same first draw, the same shape
    # the parameters of DeltaProduct in the order of its first checkpoints: beta's projection before the conv
    names = [n for n, _ in mixers()["deltaproduct"](16, 8, nh=3).named_parameters()]
    assert names == [
        "qkv.weight",
        "b_proj.weight",
        "conv.weight",
        "conv.bias",
        "o_norm.weight",
        "o_proj.weight",
    ]
    for name in ("gateddeltanet", "kda"):
        assert [n for n, _ in mixers()[name](16, 8).named_children()][:2] == ["qkv", "conv"]
