"""What a task string may say after its family's name: the allowed arguments and their parser.

Light (no numpy), so that listing the families (``statetrack tasks``) and checking a task string's
argument need none of the task modules; each task module reads its constants from here.
"""

from __future__ import annotations

from statetrack.errors import UserError

#: element selectors of ``group:G/SEL`` (joined by +; Kcycles for K >= 2)
SELECTORS = (
    "all",
    "generators",
    "gens",
    "identity",
    "e",
    "involutions",
    "transpositions",
    "Kcycles",
    "even",
    "odd",
    "gens=N",
    "gens=P+P (cycle notation)",
)
#: the largest modulus of ``modcount:m``
MAX_MODULUS = 65536
#: ``offset``: the length of each burst of 1s (the inter-stimulus interval)
ISI = 10
#: ``offset:PROBE``: the fixed probe inputs, as runs of (token, count)
PROBES = {
    "two-isis": [(0, 30), (1, ISI), (0, 80), (1, ISI)],
    "double-isi": [(0, 30), (1, ISI), (1, ISI)],
}


def parse_int(
    family: str, what: str, text: str | None, lo: int, hi: int | None = None, default: int | None = None
) -> int:
    """An integer task argument in [lo, hi], else a one-line UserError naming it."""
    if text in (None, "") and default is not None:
        return default
    rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
    try:
        v = int(str(text).strip())
    except (TypeError, ValueError):
        raise UserError(
            f"bad {what} {text!r} for task family {family!r}; allowed: an integer {rng}"
        ) from None
    if v < lo or (hi is not None and v > hi):
        raise UserError(f"bad {what} {text!r} for task family {family!r}; allowed: an integer {rng}")
    return v
