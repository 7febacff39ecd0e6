"""The task registry: families by name, and ``get_task`` from a task string.

A task string is ``family`` or ``family:argument``. Families register a factory that receives the
argument string (or None) and raises UserError on a bad one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from statetrack import plugins
from statetrack.errors import UserError, allowed

if TYPE_CHECKING:
    from statetrack.tasks.base import Task

#: family name -> (factory taking the argument string or None, one-line description)
FAMILIES: dict[str, tuple[Callable[[str | None], Task], str]] = {}
#: family name -> the plugin module that registered it (families of statetrack itself are absent)
ORIGIN: dict[str, str] = {}


Factory = Callable[[str | None], "Task"]


def register(family: str, description: str) -> Callable[[Factory], Factory]:
    """Register a task family: ``@register("mytask", "one line")`` on a factory that receives the text
    after ``mytask:`` (or None) and returns a Task, raising UserError on a bad argument. A family registered
    by another module (statetrack's own included) is not replaced: a UserError says so."""

    def deco(factory: Factory) -> Factory:
        plugins.check_replacement(
            "task family", family, FAMILIES[family][0] if family in FAMILIES else None, factory
        )
        FAMILIES[family] = (factory, description)
        module = plugins.origin(factory)
        if module:
            ORIGIN[family] = module
        return factory

    return deco


@register("parity", "parity of the bits so far; 'parity' labels every position, 'parity:final' the last only")
def _parity(arg: str | None) -> Task:
    from statetrack.tasks.base import Scoring  # heavy: numpy
    from statetrack.tasks.parity import Parity

    if arg in (None, "", "every", "prefix"):
        return Parity(Scoring.EVERY)
    if arg == "final":
        return Parity(Scoring.FINAL)
    raise UserError(f"unknown parity variant {arg!r}; allowed: final, every")


def get_task(name: str) -> Task:
    """Build a task from its string name, e.g. ``parity`` or ``parity:final``."""
    if not isinstance(name, str) or not name.strip():
        raise UserError("empty task name; allowed families: " + ", ".join(sorted(FAMILIES)))
    family, _, arg = name.strip().partition(":")
    if family not in FAMILIES:
        plugins.autoload()
    if family not in FAMILIES:
        raise allowed("task family", family, FAMILIES)
    return FAMILIES[family][0](arg if _ else None)
