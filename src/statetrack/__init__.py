"""statetrack: state tracking in linear RNNs and state-space models.

The public API, in the order a notebook uses it::

    from statetrack import get_task, ModelConfig, TrainConfig, build_model, train, evaluate
"""
from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.errors import UserError
from statetrack.evaluation import LengthMetrics, evaluate
from statetrack.model import Model, build_model
from statetrack.tasks import Task, get_task
from statetrack.training import TrainResult, train
from statetrack.version import __version__

__all__ = [
    "UserError", "get_task", "Task", "ModelConfig", "TrainConfig", "EvalConfig",
    "Model", "build_model", "train", "TrainResult", "evaluate", "LengthMetrics", "__version__",
]
