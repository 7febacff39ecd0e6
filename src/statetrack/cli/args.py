"""Argument parsing shared by every command: the parser class, option groups, value parsers."""
from __future__ import annotations

import argparse

from statetrack.errors import UserError


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2, no usage dump
        raise UserError(f"{self.prog}: {message}")


def parse_lengths(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UserError(f"bad test lengths {text!r}; give positive integers separated by commas, e.g. 16,100,1000") from None
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
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40") from None
    lo, hi = (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[-1]) if len(vals) == 2 else (0, -1)
    if not 1 <= lo <= hi:
        raise UserError(f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40")
    return lo, hi


def add_db(q) -> None:
    """--db: the results database."""
    from statetrack.store import DEFAULT_DB

    q.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")


def add_json(q, what: str = "one object per (run, length)") -> None:
    q.add_argument("--json", action="store_true", help=f"print JSON Lines, {what}")
