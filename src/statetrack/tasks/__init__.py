"""Tasks by name. ``get_task("parity")``, ``get_task("parity:final")``.

``registry`` holds the families (``register``, ``get_task``); ``suite`` registers every family but
parity and provides the listing and sampling API of the command line.
"""
from statetrack.tasks import draws
from statetrack.tasks.base import Batch, Task
from statetrack.tasks.registry import FAMILIES, get_task, register
from statetrack.tasks.suite import label_shares, list_tasks, sample_json

__all__ = ["Batch", "Task", "get_task", "register", "FAMILIES", "list_tasks", "sample_json", "label_shares", "draws"]
