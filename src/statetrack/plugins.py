"""Plugins: tasks, mixers and studies defined outside the package (docs/extending.md).

A plugin is a Python module that registers tasks (``statetrack.tasks.register``) or mixers
(``statetrack.layers.register``) when it is imported. Modules are named

- in the environment variable ``STATETRACK_PLUGINS`` (comma-separated),
- with the command line's global ``--plugin MODULE`` (repeatable),
- by an installed distribution's entry points: group ``statetrack.tasks`` or ``statetrack.mixers``
  (the entry point's module is imported; an entry point that names a function is also called), and
  group ``statetrack.studies`` (entry point name = study name; its object is the path of a study YAML
  file, or a function returning one),
A run stores the plugin modules that registered its task family and mixers (``config["plugins"]``, and
its checkpoint's metadata), but data never names code to import: a checkpoint, a database row or a config
file that names a module not imported yet is refused in one line (:func:`require`) that names it and says
to pass ``--plugin`` if it is trusted. A plugin cannot replace a task family or a mixer registered
before it, statetrack's own included (:func:`check_replacement`).

This module only imports modules by name; it knows nothing of what they register.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback
from importlib.metadata import entry_points

from statetrack.errors import Interrupted, UserError

ENV = "STATETRACK_PLUGINS"
GROUPS = ("statetrack.tasks", "statetrack.mixers")
STUDIES = "statetrack.studies"

#: module name -> how it was requested, in load order
_loaded: dict[str, str] = {}
_auto_done = False


#: a module name as ``import`` takes it: dotted identifiers
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", re.ASCII)


def provider(obj) -> str:
    """The module that defines ``obj``: ``statetrack`` for statetrack's own (any of its modules)."""
    mod = getattr(obj, "__module__", None) or ""
    return "statetrack" if mod == "statetrack" or mod.startswith("statetrack.") else mod


def origin(obj) -> str | None:
    """The module that defines ``obj`` when it is a plugin that a run can record, else None (statetrack's
    own, or a script's ``__main__``, which no other process can import)."""
    mod = provider(obj)
    return None if mod in ("statetrack", "__main__") else mod


def check_replacement(kind: str, name: str, old, new) -> None:
    """A UserError when ``new`` would replace ``old`` (registered under ``name``) and another module defines
    it: built-in names stay built in, and a name stays with the plugin that registered it first, so that a
    run's record names one implementation. The same module registering again (imported anew) is allowed."""
    if old is None or old is new or provider(old) == provider(new):
        return
    who = "statetrack itself" if provider(old) == "statetrack" else f"plugin module {provider(old)!r}"
    raise UserError(
        f"{kind} {name!r} is already registered by {who}; module {provider(new)!r} cannot replace it: "
        f"register yours under another name"
    )


def _import(name: str, how: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise UserError(
                f"plugin module {name!r} ({how}) not found; install it or add its folder to PYTHONPATH"
            ) from None
        raise UserError(f"plugin module {name!r} ({how}) failed to import: {_where(e)}") from None
    except Interrupted:  # Ctrl-C or SIGTERM while it imports: the command is interrupted
        raise
    # a bug in the plugin's own code (an exit at import too): said in one line, with where
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001
        raise UserError(f"plugin module {name!r} ({how}) failed to import: {_where(e)}") from None


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    at = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}: " if tb else ""
    what = (
        f"it called sys.exit({e.code!r}) while being imported"
        if isinstance(e, SystemExit)
        else f"{type(e).__name__}: {e}"
        if str(e)
        else type(e).__name__
    )
    return f"{at}{what}".replace("\n", " ")


def load_plugins(names, how: str) -> list[str]:
    """Import each module of ``names`` (a list, or a comma-separated string); ``how`` says who asked for
    it (``--plugin``, ``STATETRACK_PLUGINS``, ``recorded with run 3``) in the error of a missing one."""
    if isinstance(names, str):
        names = names.split(",")
    out = []
    for name in (n.strip() for n in names or []):
        if not name:
            continue
        if name not in _loaded:
            _import(name, how)
            _loaded[name] = how
        out.append(name)
    return out


def require(names: str | list[str] | None, what: str) -> list[str]:
    """The plugin modules ``names`` that data (``what``: a checkpoint, a run of a database, a config file)
    records, checked without importing any: each must be imported in this process already (by
    ``--plugin``, ``STATETRACK_PLUGINS``, an entry point, or the program itself). A UserError names the
    others and says to pass ``--plugin`` if they are trusted; one for a name that is not a module name."""
    if isinstance(names, str):
        names = names.split(",")
    names = [n.strip() for n in names or [] if isinstance(n, str) and n.strip()]
    bad = [n for n in names if not MODULE_NAME.fullmatch(n)]
    if bad:
        raise UserError(
            f"{what} names plugin module {bad[0]!r}, which is not a module name; nothing was imported"
        )
    autoload()  # the user's own configuration: STATETRACK_PLUGINS and installed entry points
    missing = [n for n in dict.fromkeys(names) if n not in sys.modules]
    if missing:
        one = len(missing) == 1
        raise UserError(
            f"{what} names plugin module{'' if one else 's'} "
            f"{', '.join(map(repr, missing))}, not loaded; data never imports code: if you trust "
            f"{'it' if one else 'them'}, pass {' '.join(f'--plugin {m}' for m in missing)}"
        )
    return names


def load_entry_points() -> list[str]:
    """Import the modules of the installed ``statetrack.tasks`` and ``statetrack.mixers`` entry points."""
    out = []
    for group in GROUPS:
        for ep in entry_points(group=group):
            how = f"entry point {ep.name!r} in group {group!r}"
            module = ep.value.partition(":")[0].strip()
            if module not in _loaded:
                _import(module, how)
                obj = ep.load()
                if callable(obj) and ":" in ep.value:
                    obj()
                _loaded[module] = how
            out.append(module)
    return out


def autoload() -> None:
    """Once per process: the modules of ``STATETRACK_PLUGINS`` and of the installed entry points. The
    registries call it before they report an unknown name, so plugins work from Python too."""
    global _auto_done
    if _auto_done:
        return
    _auto_done = True
    load_plugins(os.environ.get(ENV, ""), f"environment variable {ENV}")
    load_entry_points()


def loaded() -> list[str]:
    """The plugin modules imported so far (to pass on to worker processes)."""
    return list(_loaded)


def study_entry_points() -> dict:
    """Study name -> its entry point (group ``statetrack.studies``)."""
    return {ep.name: ep for ep in entry_points(group=STUDIES)}


def study_path(name: str) -> str | None:
    """The YAML path of the study entry point ``name``, or None when there is none."""
    ep = study_entry_points().get(name)
    if ep is None:
        return None
    how = f"entry point {name!r} in group {STUDIES!r}"
    _import(ep.value.partition(":")[0].strip(), how)
    obj = ep.load()
    path = obj() if callable(obj) else obj
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(
            f"{how} gives {type(path).__name__}; it must be a study file's path or a function returning one"
        )
    return os.fspath(path)
