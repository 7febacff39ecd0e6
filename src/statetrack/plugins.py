"""Plugins: tasks, mixers and studies defined outside the package (docs/extending.md).

A plugin is a Python module that registers tasks (``statetrack.tasks.register``) or mixers
(``statetrack.layers.register``) when it is imported. Modules are named

- in the environment variable ``STATETRACK_PLUGINS`` (comma-separated),
- with the command line's global ``--plugin MODULE`` (repeatable),
- by an installed distribution's entry points: group ``statetrack.tasks`` or ``statetrack.mixers``
  (the entry point's module is imported; an entry point that names a function is also called), and
  group ``statetrack.studies`` (entry point name = study name; its object is the path of a study YAML
  file, or a function returning one),
- in a run's record: a run stores the plugin modules that registered its task family and mixers
  (``config["plugins"]``, and the checkpoint's metadata), and ``eval`` / ``rerun`` import them first.

This module only imports modules by name; it knows nothing of what they register.
"""
from __future__ import annotations

import importlib
import os
import traceback
from importlib.metadata import entry_points

from statetrack.errors import UserError

ENV = "STATETRACK_PLUGINS"
GROUPS = ("statetrack.tasks", "statetrack.mixers")
STUDIES = "statetrack.studies"

#: module name -> how it was requested, in load order
_loaded: dict[str, str] = {}
_auto_done = False


def origin(obj) -> str | None:
    """The module that defines ``obj`` when it is not part of statetrack (a plugin), else None."""
    mod = getattr(obj, "__module__", None) or ""
    return None if mod == "statetrack" or mod.startswith("statetrack.") or mod == "__main__" else mod


def _import(name: str, how: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise UserError(f"plugin module {name!r} ({how}) not found; install it or add its folder to "
                            "PYTHONPATH") from None
        raise UserError(f"plugin module {name!r} ({how}) failed to import: {_where(e)}") from None
    except Exception as e:  # noqa: BLE001 - any error of a plugin's own code: said in one line, with where
        raise UserError(f"plugin module {name!r} ({how}) failed to import: {_where(e)}") from None


def _where(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    at = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}: " if tb else ""
    return f"{at}{type(e).__name__}: {e}".replace("\n", " ")


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
        raise UserError(f"{how} gives {type(path).__name__}; it must be a study file's path or a function "
                        "returning one")
    return os.fspath(path)
