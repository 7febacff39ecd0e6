"""Layer specs: the string that names a stack of mixers.

Grammar (whitespace ignored)::

    spec   := item ("," item)*
    item   := name ["(" key "=" value ("," key "=" value)* ")"] ["*" count]

Examples: ``mamba,s4d``, ``negmamba*2``, ``mamba(conv=0),s4d(init=lin)``.
Values are parsed as int, float, bool (true/false) or left as strings. ``parse_layers`` reads the text
once, at the edges (the command line, study and config files, stored configs), into ``Layers``, a
read-only sequence of ``LayerSpec`` that every other reader takes; its ``str`` is the canonical text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import overload

from statetrack.errors import UserError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*$")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
MAX_LAYERS = 64


#: an option's value, as the spec's text gives it: true/false, an int, a float, else the text
OptionValue = bool | int | float | str


@dataclass(frozen=True, eq=False)
class LayerSpec:
    """One layer of a spec: the mixer's name and its options (read-only). Two specs are equal when they
    are written the same (``str``), so ``conv=1`` and ``conv=true`` differ as their texts do."""

    name: str
    options: Mapping[str, OptionValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __str__(self) -> str:
        if not self.options:
            return self.name
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.options.items()))
        return f"{self.name}({inner})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerSpec) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> tuple[type[LayerSpec], tuple[str, dict[str, OptionValue]]]:
        return LayerSpec, (self.name, dict(self.options))  # a mapping proxy does not pickle


class Layers(Sequence[LayerSpec]):
    """A parsed layer spec: the stack's layers in order, repeats expanded, read-only. ``str`` writes the
    canonical spec (each layer's options sorted, repeats written out), the text configs store; it is not a
    ``list`` or a ``str``, so JSON and comparisons with text say where the text is wanted."""

    __slots__ = ("_specs",)

    def __init__(self, specs: Iterable[LayerSpec] = ()) -> None:
        self._specs = tuple(specs)
        for s in self._specs:
            if not isinstance(s, LayerSpec):
                raise TypeError(f"Layers holds LayerSpec, got {type(s).__name__} {s!r}")

    @overload
    def __getitem__(self, index: int) -> LayerSpec: ...
    @overload
    def __getitem__(self, index: slice) -> Layers: ...
    def __getitem__(self, index: int | slice) -> LayerSpec | Layers:
        if isinstance(index, slice):
            return Layers(self._specs[index])
        return self._specs[index]

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[LayerSpec]:
        return iter(self._specs)

    def __str__(self) -> str:
        return ",".join(str(layer) for layer in self._specs)

    def __repr__(self) -> str:
        return f"Layers({str(self)!r})"

    def __format__(self, spec: str) -> str:  # f"{layers:20s}": the text, padded
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layers) and self._specs == other._specs

    def __hash__(self) -> int:
        return hash(self._specs)

    def __reduce__(self) -> tuple[type[Layers], tuple[tuple[LayerSpec, ...]]]:
        return Layers, (self._specs,)

    @property
    def names(self) -> list[str]:
        """Each layer's mixer name, in order."""
        return [layer.name for layer in self._specs]


def _fmt(v: OptionValue) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _value(text: str) -> OptionValue:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > 1:
                raise UserError(f"malformed layer spec {text!r}: nested parentheses")
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise UserError(f"malformed layer spec {text!r}: unbalanced ')'")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise UserError(f"malformed layer spec {text!r}: unbalanced '('")
    parts.append("".join(cur))
    return parts


def parse_layers(text: str) -> Layers:
    """Parse a layer spec into its Layers (one LayerSpec per layer, repeats expanded)."""
    if not isinstance(text, str) or not text.strip():
        raise UserError("empty layer spec; give mixer names separated by commas, e.g. 'mamba,s4d'")
    text = "".join(text.split())
    layers: list[LayerSpec] = []
    for item in _split_top(text):
        if not item:
            raise UserError(f"malformed layer spec {text!r}: empty item between commas")
        count = 1
        m = re.fullmatch(r"(.*?)\*(\d+)", item)
        if m:
            item, count = m.group(1), int(m.group(2))
            if not 1 <= count <= MAX_LAYERS:
                raise UserError(f"malformed layer spec {text!r}: repeat count {count} not in 1..{MAX_LAYERS}")
        options: dict[str, OptionValue] = {}
        m = re.fullmatch(r"([^()]*)\((.*)\)", item)
        if m:
            item, inner = m.group(1), m.group(2)
            for kv in filter(None, inner.split(",")):
                if kv.count("=") != 1:
                    raise UserError(f"malformed layer spec {text!r}: option {kv!r} is not key=value")
                k, v = kv.split("=")
                if not _KEY.match(k) or not v:
                    raise UserError(f"malformed layer spec {text!r}: option {kv!r} is not key=value")
                options[k] = _value(v)
        if not _NAME.match(item):
            raise UserError(f"malformed layer spec {text!r}: {item!r} is not a mixer name")
        layers.extend([LayerSpec(item.lower(), options)] * count)
    if len(layers) > MAX_LAYERS:
        raise UserError(f"layer spec {text!r} has {len(layers)} layers; at most {MAX_LAYERS}")
    return Layers(layers)


def as_layers(layers: str | Iterable[LayerSpec]) -> Layers:
    """``layers`` as Layers: text (a spec given to a function of the API) parsed, parsed layers as they are."""
    if isinstance(layers, str):
        return parse_layers(layers)
    return layers if isinstance(layers, Layers) else Layers(layers)


def format_layers(layers: Iterable[LayerSpec]) -> str:
    """The canonical spec of ``layers``: ``str(Layers(layers))``."""
    return str(Layers(layers))
