"""Tasks by name. ``get_task("parity")``, ``get_task("parity:final")``.

``registry`` holds the families (``register``, ``get_task``); ``suite`` registers every family but
parity and lists them (``list_tasks``); ``sampling`` draws examples and label shares for the command
line. The task classes (numpy) load when a task is built, so listing the families stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from statetrack.tasks.registry import FAMILIES, get_task, register
from statetrack.tasks.suite import list_tasks

if TYPE_CHECKING:
    from statetrack.tasks import draws
    from statetrack.tasks.base import Batch, Task
    from statetrack.tasks.examples import label_shares, sample_json

#: names loaded on first use: their modules import numpy (heavy)
_LAZY = {
    "Batch": "statetrack.tasks.base",
    "Task": "statetrack.tasks.base",
    "draws": "",
    "label_shares": "statetrack.tasks.examples",
    "sample_json": "statetrack.tasks.examples",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:  # heavy: numpy
        module = importlib.import_module(_LAZY[name] or f"statetrack.tasks.{name}")
        value = module if not _LAZY[name] else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'statetrack.tasks' has no attribute {name!r}")


__all__ = [
    "Batch",
    "Task",
    "get_task",
    "register",
    "FAMILIES",
    "list_tasks",
    "sample_json",
    "label_shares",
    "draws",
]
