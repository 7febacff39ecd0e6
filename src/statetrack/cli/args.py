"""Argument parsing shared by every command: the parser class, option groups, value parsers."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from statetrack.config import MAX_PARAMS, MAX_SEED, Split
from statetrack.errors import UserError, did_you_mean
from statetrack.runs.store import DEFAULT_DB, RunRecord, RunStatus, Store
from statetrack.untrusted import terminal_text


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it says it already."""

    def _get_help_string(self, action):
        text = action.help or ""
        # --help and --version have the default SUPPRESS
        if not action.option_strings or "(default" in text or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: {show_default(action.default, action)})".lstrip()


def show_default(v, action=None) -> str:
    """A default as the help text shows it: off/on for flags, none, lists comma-separated."""
    flag = action is not None and action.nargs == 0 and isinstance(action.const, bool)  # store_true/false
    if flag or isinstance(v, bool):
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
        self.commands: argparse._SubParsersAction | None = None

    def add_subparsers(self, **kwargs):
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def long_options(self) -> list[str]:
        """The ``--name`` options this parser takes."""
        return [o for o in self._option_string_actions if o.startswith("--")]

    def error(self, message):  # one line, exit code 2, no usage dump
        raise UserError(f"{self.prog}: {message}")

    def _check_value(self, action, value):  # an unknown choice or command: the closest ones too
        if action.choices is not None and value not in action.choices:
            names = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action,
                f"invalid choice: {value!r}{did_you_mean(str(value), names)} "
                f"(choose from {', '.join(names)})",
            )

    def parse_args(self, args=None, namespace=None):
        """As argparse's, with the closest options named for an unrecognized one (``--d_model``)."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            command = getattr(ns, "command", None)
            if command and self.commands is not None:
                parser = self.commands.choices.get(command, self)
            flag = next((x.split("=", 1)[0] for x in extras if x.startswith("-")), "")
            hint = did_you_mean(flag, parser.long_options()) if flag else ""
            self.error(
                f"unrecognized arguments: {' '.join(extras)}{hint}; allowed: the options that "
                f"'{parser.prog} --help' lists"
            )
        return ns


def parse_lengths(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UserError(
            f"bad test lengths {text!r}; give positive integers separated by commas, e.g. 16,100,1000"
        ) from None
    if not vals:
        raise UserError("empty test lengths; give positive integers separated by commas, e.g. 16,100,1000")
    bad = [v for v in vals if v < 1]
    if bad:
        raise UserError(f"bad test length {bad[0]}; test lengths must be positive integers")
    return vals


def parse_seed(text: str) -> int:
    """A ``--seed`` value: an integer from 0 to ``MAX_SEED`` (argparse reports anything else in one line)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"bad seed {text!r}; allowed: an integer from 0 to {MAX_SEED:,}")
    return value


def parse_threads(text: str) -> int:
    """A ``--threads`` value: 0 (torch's default, one per core) or a positive count of torch threads."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 4096:
        raise argparse.ArgumentTypeError(
            f"bad thread count {text!r}; allowed: 1 to 4096 torch threads, or 0 for torch's default"
        )
    return value


def parse_split(text: str) -> Split | str:
    """A ``--split`` value: the ``Split`` it names (text that names none stays text, so that the option's
    choices refuse it in one line with the closest ones)."""
    try:
        return Split(text)
    except ValueError:
        return text


def parse_range(text: str) -> tuple[int, int]:
    parts = text.replace(":", "-").split("-") if not text.startswith("-") else [text]
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise UserError(
            f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40"
        ) from None
    lo, hi = (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[-1]) if len(vals) == 2 else (0, -1)
    if not 1 <= lo <= hi:
        raise UserError(
            f"bad training lengths {text!r}; give N or MIN-MAX with 1 <= MIN <= MAX, e.g. 8 or 1-40"
        )
    return lo, hi


def db_path(text: str) -> str:
    """--db's value: a database in a folder that exists, so that a mistyped folder is said, not created.
    A missing folder named as the default's (``runs/``) is made, where its parent exists."""
    folder = os.path.dirname(text)
    made = os.path.basename(os.path.normpath(folder)) == os.path.dirname(DEFAULT_DB) and os.path.isdir(
        os.path.dirname(os.path.normpath(folder)) or "."
    )
    if folder and not os.path.exists(folder) and not made:  # (a file in the way: the store says so)
        raise argparse.ArgumentTypeError(
            f"no database {text!r}: its folder {folder!r} does not exist; create it first "
            f"(mkdir -p {shlex.quote(folder)}) or give a database in an existing folder"
        )
    return text


def add_db(q) -> None:
    """--db: the results database."""
    q.add_argument("--db", default=DEFAULT_DB, type=db_path, help="results database")


#: how a command names a stored run: its id, ``last`` (the latest complete run) or its label
RUN_REF = (
    "a run: its id, 'last' (the latest complete run) or its --label (the latest complete run so labelled)"
)


def find_run(db: str, ref: str) -> RunRecord:
    """The stored run that ``ref`` names in ``db`` (see RUN_REF; ``Store.find``); a UserError names a bad
    one, and a label that several complete runs share is said on stderr (the latest is taken)."""
    run, same = Store(db, readonly=True).find(ref)  # it only reads
    if len(same) > 1:  # said, not chosen silently
        print(
            terminal_text(
                f"note: {len(same)} complete runs are labelled {str(ref).strip()!r} in {db!r} (ids "
                f"{', '.join(map(str, same))}); this is the latest, run {run.id} (name another by its id)"
            ),
            file=sys.stderr,
        )
    return run


def add_checkpoint(q, what: str = "a checkpoint (.safetensors) of train, sweep or construct") -> None:
    """The checkpoint argument: a file, or ``run:REF``, the checkpoint of a stored run in --db."""
    q.add_argument(
        "checkpoint", help=f"{what}, or run:ID, run:last, run:LABEL for the checkpoint of a run in --db"
    )
    if "--db" not in q.long_options():
        add_db(q)


def checkpoint_path(a) -> str:
    """The file the checkpoint argument names (``run:REF``: that run's checkpoint)."""
    text = str(a.checkpoint)
    if not text.startswith("run:"):
        return text
    r = find_run(a.db, text[4:])
    if r.status != RunStatus.COMPLETE or not r.checkpoint:
        raise UserError(f"run {r.id} is {r.status} and has no checkpoint; name a complete run")
    return str(r.checkpoint)


def add_json(q, what: str = "one object per (run, length)") -> None:
    q.add_argument("--json", action="store_true", help=f"print JSON, {what}")


def add_max_params(q) -> None:
    """--max-params: the largest model a checkpoint may declare before it is built."""
    q.add_argument(
        "--max-params",
        type=int,
        default=MAX_PARAMS,
        help=f"refuse a checkpoint whose model has more parameters (default: {MAX_PARAMS})",
    )
