"""statetrack: state tracking in linear RNNs and state-space models.

The public API, in the order a notebook uses it::

    from statetrack import get_task, ModelConfig, TrainConfig, build_model, train, evaluate

The names are loaded on first use (PEP 562), so that ``import statetrack`` and the command line's
``--version`` and ``--help`` do not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from statetrack.errors import UserError
from statetrack.version import __version__

if TYPE_CHECKING:
    from statetrack.config import EvalConfig, ModelConfig, TrainConfig
    from statetrack.model import Model, build_model
    from statetrack.tasks import Task, get_task
    from statetrack.training.evaluation import LengthMetrics, evaluate
    from statetrack.training.loop import TrainResult, train

#: public name -> the module that defines it
_API = {
    "get_task": "statetrack.tasks",
    "Task": "statetrack.tasks",
    "ModelConfig": "statetrack.config",
    "TrainConfig": "statetrack.config",
    "EvalConfig": "statetrack.config",
    "Model": "statetrack.model",
    "build_model": "statetrack.model",
    "train": "statetrack.training.loop",
    "TrainResult": "statetrack.training.loop",
    "evaluate": "statetrack.training.evaluation",
    "LengthMetrics": "statetrack.training.evaluation",
}


def __getattr__(name: str):
    if name in _API:  # loaded on first use: the modules import torch (heavy)
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'statetrack' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])


__all__ = [
    "UserError",
    "__version__",
    "get_task",
    "Task",
    "ModelConfig",
    "TrainConfig",
    "EvalConfig",
    "Model",
    "build_model",
    "train",
    "TrainResult",
    "evaluate",
    "LengthMetrics",
]
