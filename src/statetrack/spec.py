"""Layer specs: the string that names a stack of mixers.

Grammar (whitespace ignored)::

    spec   := item ("," item)*
    item   := name ["(" key "=" value ("," key "=" value)* ")"] ["*" count]

Examples: ``mamba,s4d``, ``negmamba*2``, ``mamba(conv=0),s4d(init=lin)``.
Values are parsed as int, float, bool (true/false) or left as strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from statetrack.errors import UserError

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*$")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
MAX_LAYERS = 64


@dataclass(frozen=True)
class LayerSpec:
    name: str
    options: dict = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.options.items()))
        return f"{self.name}({inner})"


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _value(text: str):
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


def parse_layers(text: str) -> list[LayerSpec]:
    """Parse a layer spec into a list of LayerSpec (one per layer, repeats expanded)."""
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
        options: dict = {}
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
        layers.extend(LayerSpec(item.lower(), dict(options)) for _ in range(count))
    if len(layers) > MAX_LAYERS:
        raise UserError(f"layer spec {text!r} has {len(layers)} layers; at most {MAX_LAYERS}")
    return layers


def format_layers(layers: list[LayerSpec]) -> str:
    return ",".join(str(layer) for layer in layers)
