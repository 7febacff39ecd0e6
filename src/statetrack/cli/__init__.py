"""Command line: a thin layer over the Python API.

Every command parses its arguments, calls one library function, and prints a table (or JSON Lines
with ``--json``). Bad input ends with one line on stderr and exit code 2; nothing is written first.

One module per area, each adding its subcommands (``add_commands``): ``run`` (train, eval, runs, rerun),
``studies`` (reproduce, sweep, report), ``theory`` (oracle, construct, counterexample, spectrum),
``catalog`` (models, tasks, sample, groups), ``lm`` (generate, corpus); ``args`` and ``output`` are shared
by all of them.
"""
from __future__ import annotations

import argparse
import os
import sys

from statetrack.cli import catalog, lm, run, studies, theory
from statetrack.cli.args import Parser
from statetrack.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="statetrack", description="State tracking in linear RNNs and SSMs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for area in (run, studies, catalog, theory, lm):
        area.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from statetrack import memory

    memory.configure()
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
