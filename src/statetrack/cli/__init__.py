"""Command line: a thin layer over the Python API.

Every command parses its arguments, calls one library function, and prints a table (or JSON Lines
with ``--json``). Bad input ends with one line on stderr and exit code 2; nothing is written first.
Ctrl-C, SIGTERM and SIGHUP stop the command (its runs recorded ``interrupted``) with exit code 130 / 143 / 129.

One module per area, each adding its subcommands (``add_commands``): ``run`` (train, eval, rerun),
``database`` (runs, plot), ``studies`` (reproduce, sweep, report), ``theory`` (oracle, construct,
counterexample, spectrum), ``catalog`` (models, tasks, sample, groups), ``language`` (generate, corpus,
eval-lm, export-tasks);
shared by all of them: ``args`` (the parser), ``options`` (options derived from the typed configs),
``output`` (width, tables, JSON) and ``bars`` (progress lines and bars).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from statetrack.cli import catalog, database, language, run, studies, theory
from statetrack.cli.args import Parser
from statetrack.cli.output import guarded_output
from statetrack.errors import UserError
from statetrack.files import reason
from statetrack.untrusted import cut_long_values, terminal_text
from statetrack.version import __version__

PLUGIN_HELP = (
    "import MODULE first: a plugin registering tasks, mixers (repeatable; also STATETRACK_PLUGINS=a,b)"
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="statetrack",
        description="State tracking in linear RNNs and SSMs.",
        epilog="'statetrack COMMAND --help' shows a command's options and their defaults.",
    )
    p.add_argument("--version", action="version", version=f"statetrack {__version__}")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE", help=PLUGIN_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=Parser)
    for area in (run, database, studies, catalog, theory, language):
        area.add_commands(sub)
    for q in sub.choices.values():  # --plugin is accepted after the command too
        q.add_argument(
            "--plugin", action="append", default=[], dest="plugin_after", metavar="MODULE", help=PLUGIN_HELP
        )
    return p


def main(argv: list[str] | None = None) -> int:
    from statetrack import progress
    from statetrack.runs import store
    from statetrack.training import memory

    memory.configure()
    progress.to_stderr()  # warnings (a damaged row left out, --workers capped) are lines on stderr
    store.warned.clear()  # each command says once which damaged rows it leaves out
    with guarded_output() as out:
        code = _run(argv)
    if out.error is not None and code != 2:  # the work is done; its output could not be written
        print(
            f"error: cannot write to standard output: {reason(out.error)}; the command's work is done, its "
            "output lost",
            file=sys.stderr,
        )
        return 2
    return code


def _out_of_memory(e: ImportError) -> bool:
    """An import that failed for want of memory: a shared library that could not be mapped."""
    return any(s in str(e) for s in ("failed to map segment", "Cannot allocate memory"))


def _run(argv: list[str] | None) -> int:
    from statetrack import plugins
    from statetrack.runs import signals

    try:
        with signals.handled():
            parser = build_parser()
            args = parser.parse_args(argv)
            plugins.autoload()
            plugins.load_plugins(args.plugin + getattr(args, "plugin_after", []), "--plugin")
            if args.command is None:  # a bare 'statetrack': the command list
                parser.print_help()
                return 0
            return int(args.fn(args) or 0)  # a command that returns nothing succeeded
    except UserError as e:
        print(f"error: {terminal_text(cut_long_values(str(e)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(signals.describe(e), file=sys.stderr)
        return signals.exit_code(e)
    except (MemoryError, ImportError) as e:  # out of memory as modules load (ulimit -v, a full machine)
        if isinstance(e, ImportError) and not _out_of_memory(e):
            raise
        print(
            f"error: statetrack ran out of memory ({type(e).__name__}: {str(e) or 'no more memory'}); "
            "free memory or raise the limit (ulimit -v) and run the command again",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno() if sys.__stdout__ else 1)
        return 0
