"""statetrack: state tracking in linear RNNs and state-space models.

The public API, in the order a notebook uses it::

    from statetrack import get_task, ModelConfig, TrainConfig, build_model, train, evaluate
"""
from statetrack.errors import UserError
from statetrack.version import __version__
from statetrack.tasks import get_task, Task
from statetrack.config import ModelConfig, TrainConfig, EvalConfig
from statetrack.model import Model, build_model
from statetrack.training import train, TrainResult
from statetrack.evaluation import evaluate, LengthMetrics

__all__ = [
    "UserError", "get_task", "Task", "ModelConfig", "TrainConfig", "EvalConfig",
    "Model", "build_model", "train", "TrainResult", "evaluate", "LengthMetrics", "__version__",
]
