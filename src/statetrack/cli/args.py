"""Argument parsing shared by every command: the parser class, option groups, value parsers."""
from __future__ import annotations

import argparse

from statetrack.errors import UserError


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it says it already."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "(default" in text or action.default is argparse.SUPPRESS \
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            return text
        return f"{text} (default: {show_default(action.default, action)})".lstrip()


def show_default(v, action=None) -> str:
    """A default as the help text shows it: off/on for flags, none, lists comma-separated."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)) or isinstance(v, bool):
        return "on" if v else "off"
    if v is None or v == []:
        return "none"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v).replace("%", "%%")


class Parser(argparse.ArgumentParser):
    """No abbreviated options (``--step`` is not ``--steps``), defaults in the help, one-line errors."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit code 2, no usage dump
        raise UserError(f"{self.prog}: {message}")


def parse_lengths(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UserError(f"bad test lengths {text!r}; give positive integers separated by commas, "
                        "e.g. 16,100,1000") from None
    if not vals:
        raise UserError("empty test lengths; give positive integers separated by commas, e.g. 16,100,1000")
    bad = [v for v in vals if v < 1]
    if bad:
        raise UserError(f"bad test length {bad[0]}; test lengths must be positive integers")
    return vals


def parse_range(text: str) -> tuple[int, int]:
    parts = text.replace(":", "-").split("-") if not text.startswith("-") else [text]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, "
                        "e.g. 8 or 1-40") from None
    lo, hi = (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[-1]) if len(vals) == 2 else (0, -1)
    if not 1 <= lo <= hi:
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40")
    return lo, hi


def add_db(q) -> None:
    """--db: the results database."""
    from statetrack.store import DEFAULT_DB

    q.add_argument("--db", default=DEFAULT_DB, help="results database")


def add_json(q, what: str = "one object per (run, length)") -> None:
    q.add_argument("--json", action="store_true", help=f"print JSON, {what}")


def add_max_params(q) -> None:
    """--max-params: the largest model a checkpoint may declare before it is built."""
    from statetrack.checkpoint import MAX_PARAMS

    q.add_argument("--max-params", type=int, default=MAX_PARAMS,
                   help=f"refuse a checkpoint whose model has more parameters (default: {MAX_PARAMS})")
