"""Checkpoints as safetensors: tensors plus the run's config as JSON metadata. Loading runs no code: the
plugin modules a checkpoint records are named, never imported (``plugins.require``).

A checkpoint is checked before anything is built from it (:func:`inspect_checkpoint`): the header's
metadata must have the right types (``config`` and ``extra`` JSON objects), the config must be a valid
TrainConfig, the model it declares is built (on the ``meta`` device, with no memory, unless it is small:
:func:`declared_model`) to count its parameters
(refused above ``max_params``, :data:`MAX_PARAMS` by default) and to compare every tensor's name, shape
and dtype with the file's header, all before a tensor is read. The tensors are then read and a
non-finite value (NaN, inf) is refused: a diverged model's numbers mean nothing. Each problem is one
UserError line naming the file.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load, save

from statetrack.config import MAX_PARAMS, ModelConfig, TrainConfig, validated
from statetrack.errors import UserError
from statetrack.files import file_kind, sha256_bytes, write_file
from statetrack.model import Model, build_model
from statetrack.plugins import require
from statetrack.spec import Layers
from statetrack.tasks import get_task
from statetrack.tasks.base import Task
from statetrack.untrusted import load_json

FORMAT = "statetrack-checkpoint-1"

_DTYPES = {
    torch.float32: "F32",
    torch.float64: "F64",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.complex64: "C64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


class _SkipRandomInit(torch.overrides.TorchFunctionMode):
    """On the meta device, random initialisers (``normal_``, ``uniform_``, ...) are no-ops: the values do
    not exist, and torch would otherwise import its compiler (seconds) to run them there."""

    NAMES = {
        "normal_",
        "uniform_",
        "trunc_normal_",
        "log_normal_",
        "exponential_",
        "cauchy_",
        "geometric_",
        "random_",
        "bernoulli_",
    }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in self.NAMES:
            t = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            if t is not None and t.is_meta:
                return t
        return func(*args, **kwargs)


def meta_model(model_cfg, task):
    """The model ``model_cfg`` declares for ``task``, built on the meta device: its parameter names,
    shapes and dtypes, with no memory for their values (a bad spec is a UserError, as in a real build)."""
    with torch.device("meta"), _SkipRandomInit():
        return build_model(model_cfg, task)


#: a declared model whose tensors take at most this many bytes is built on the CPU (see declared_model)
SMALL_BUILD_BYTES = 32 << 20
#: the factory functions whose tensors a small build counts (parameters and buffers are made by these)
_FACTORIES = {"empty", "zeros", "ones", "full", "rand", "randn", "randint", "empty_strided"}


class _TooBig(Exception):
    pass


class _Budget(torch.overrides.TorchFunctionMode):
    """Counts the bytes the factory functions are asked for and stops the build (``_TooBig``) before one
    would take the total past ``limit``: the size is read from the same call on the meta device first."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.used = limit, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in _FACTORIES:
            self.used += func(*args, **{**kwargs, "device": "meta"}).nbytes
            if self.used > self.limit:
                raise _TooBig
        return func(*args, **kwargs)


def declared_model(model_cfg: ModelConfig, task: Task) -> Model:
    """The model ``model_cfg`` declares for ``task``, for its names, shapes, dtypes and errors: built on the
    CPU when its tensors take at most :data:`SMALL_BUILD_BYTES` (milliseconds; torch's random state is
    left as it was), else on the meta device (:func:`meta_model`). Any arithmetic on meta tensors imports
    torch's compiler (``torch._dynamo``, about 1.2 s of CPU), which a small run's checks need not pay."""
    rng = torch.get_rng_state()
    try:
        with _Budget(SMALL_BUILD_BYTES):
            return build_model(model_cfg, task)
    except _TooBig:
        return meta_model(model_cfg, task)
    finally:
        torch.set_rng_state(rng)


def declared_params(model_cfg, task) -> int:
    """The parameter count (with buffers) of the model ``model_cfg`` declares, from one block of each
    distinct layer (:func:`declared_model`): a 64-layer stack costs one layer's construction, not 64."""
    counts = Counter(model_cfg.layers)
    once = declared_model(model_cfg.model_copy(update={"layers": Layers(counts)}), task)
    total = sum(v.numel() for v in once.state_dict().values())
    for block, n in zip(once.blocks, counts.values(), strict=True):
        total += (n - 1) * sum(v.numel() for v in block.state_dict().values())
    return total


def checkpoint_bytes(model, config: dict, extra: dict | None = None) -> bytes:
    """The file a checkpoint of ``model`` with ``config`` (a TrainConfig dict) consists of."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "config": json.dumps(config), "extra": json.dumps(extra or {})}
    return save(tensors, metadata=meta)


def save_checkpoint(
    model, config: dict, path: str | Path, extra: dict | None = None, exclusive: bool = False
) -> Path:
    """Write the model's weights and ``config`` (a TrainConfig dict) to ``path``, whole or not at all.
    ``exclusive``: never replace an existing file (a run's own checkpoint)."""
    return write_file(path, checkpoint_bytes(model, config, extra), exclusive=exclusive, what="checkpoint")


def save_run_checkpoint(model, config: dict, path: str | Path, extra: dict) -> tuple[Path, str]:
    """A run's checkpoint: a new file (an existing one is never replaced); returns (path, sha256)."""
    data = checkpoint_bytes(model, config, extra)
    return write_file(path, data, exclusive=True, what="checkpoint"), sha256_bytes(data)


def rewrite_extra(data: bytes, extra: dict) -> bytes:
    """The same checkpoint (tensors, config) with its ``extra`` metadata updated by ``extra``."""
    meta = _header(data)[1]
    old = load_json(meta.get("extra") or "{}", "a checkpoint's extra metadata")
    return save(load(data), metadata={**meta, "extra": json.dumps({**old, **extra})})


def _header(data: bytes) -> tuple[dict, dict]:
    n = int.from_bytes(data[:8], "little")
    head = load_json(data[8 : 8 + n], "a checkpoint's header")
    return head, head.pop("__metadata__", {}) or {}


@dataclass
class Inspection:
    """What a checkpoint declares, checked against its header (no tensor read yet)."""

    path: Path
    config: TrainConfig
    extra: dict
    task: object
    params: int


def _bad(path, what: str) -> UserError:
    return UserError(f"checkpoint {str(path)!r} {what}")


def _meta_json(path, meta: dict, key: str, required: bool) -> dict:
    if key not in meta:
        if required:
            raise _bad(path, f"has damaged metadata (no {key!r})")
        return {}
    try:
        value = load_json(meta[key], f"checkpoint {str(path)!r}: its metadata {key!r}")
    except (TypeError, json.JSONDecodeError) as e:
        raise _bad(path, f"has damaged metadata ({key!r} is not valid JSON: {e})") from None
    if not isinstance(value, dict):
        raise _bad(path, f"has damaged metadata ({key!r} is a JSON {type(value).__name__}, not an object)")
    return value


def inspect_checkpoint(path: str | Path, max_params: int | None = None) -> Inspection:
    """Check a checkpoint's metadata, declared model and tensor header without reading any tensor or
    allocating more than a small model; a UserError line for anything wrong (see the module docstring)."""
    path = Path(path)
    max_params = MAX_PARAMS if max_params is None else max_params
    kind = file_kind(path)
    if kind == "missing":
        raise UserError(f"checkpoint {str(path)!r} not found")
    if kind is not None:  # a folder, a FIFO (reading it would wait for a writer), a device
        raise UserError(f"checkpoint {str(path)!r} is {kind}, not a checkpoint file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            header = {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except (SafetensorError, OSError, ValueError) as e:
        raise _bad(path, f"is not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise _bad(path, f"has no statetrack metadata (format {meta.get('format')!r}; expected {FORMAT!r})")
    config = _meta_json(path, meta, "config", required=True)
    extra = _meta_json(path, meta, "extra", required=False)
    plugins = extra.get("plugins") or []
    if not isinstance(plugins, list) or not all(isinstance(m, str) for m in plugins):
        raise _bad(path, "has damaged metadata ('plugins' is not a list of module names)")
    require(plugins, f"checkpoint {str(path)!r}")  # they register its task or mixers: named, never imported
    try:
        cfg = validated(TrainConfig, **config)
        task = get_task(cfg.task)
    except UserError as e:
        raise _bad(path, f"declares a bad config: {e}") from None
    try:
        params = declared_params(cfg.model, task)
    except UserError as e:
        raise _bad(path, f"declares a bad model: {e}") from None
    if params > max_params:
        raise _bad(
            path,
            f"declares a model of {params:,} parameters ({_short(cfg.model.layers)}, d_model "
            f"{cfg.model.d_model}, d_state {cfg.model.d_state}), over the limit of {max_params:,}; "
            "raise --max-params to load it",
        )
    _check_header(path, header, declared_model(cfg.model, task).state_dict())
    return Inspection(path, cfg, extra, task, params)


def _check_header(path: Path, header: dict, expected: dict) -> None:
    """The file's tensors are the declared model's: the same names, shapes and dtypes."""
    missing = sorted(set(expected) - set(header))
    unexpected = sorted(set(header) - set(expected))
    if missing or unexpected:
        raise _bad(path, f"does not match its config: missing {missing[:3]}, unexpected {unexpected[:3]}")
    for k, (shape, dtype) in header.items():
        if shape != tuple(expected[k].shape):
            raise UserError(
                f"checkpoint {str(path)!r}: tensor {k!r} has shape {shape}, the config needs "
                f"{tuple(expected[k].shape)}"
            )
        want = _DTYPES.get(expected[k].dtype, str(expected[k].dtype))
        if dtype != want:
            raise UserError(
                f"checkpoint {str(path)!r}: tensor {k!r} has dtype {dtype}, the config needs {want}"
            )


def _short(layers: Layers) -> str:
    """'transformer,transformer,...' (64 times) -> 'transformer*64'."""
    return ",".join(f"{k}*{n}" if (n := len(list(g))) > 1 else k for k, g in groupby(map(str, layers)))


def read_checkpoint(path: str | Path, max_params: int | None = None) -> tuple[dict, dict, dict]:
    """(tensors, config, extra) from a checkpoint, checked (:func:`inspect_checkpoint`) and with every
    floating tensor finite."""
    info = inspect_checkpoint(path, max_params)
    try:
        with safe_open(str(info.path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except (SafetensorError, OSError, ValueError) as e:
        raise _bad(path, f"is not a readable safetensors file ({e})") from None
    for k, v in tensors.items():
        if (v.is_floating_point() or v.is_complex()) and not bool(torch.isfinite(v).all()):
            bad = int((~torch.isfinite(v)).sum())
            raise UserError(
                f"checkpoint {str(path)!r}: tensor {k!r} has {bad} NaN or infinite value(s) of "
                f"{v.numel()}; a diverged model is not loaded"
            )
    return tensors, info.config.model_dump(), info.extra


def load_checkpoint(path: str | Path, device="cpu", max_params: int | None = None):
    """Rebuild the model a checkpoint describes. Returns (model, TrainConfig, task, extra).

    The plugin modules recorded in the checkpoint (``extra["plugins"]``) must be imported already: a
    checkpoint names them but never imports them (``plugins.require``)."""
    tensors, config, extra = read_checkpoint(path, max_params)
    cfg = validated(TrainConfig, **config)
    task = get_task(cfg.task)
    model = build_model(cfg.model, task)
    model.load_state_dict(tensors)
    return model.to(device), cfg, task, extra


def check_task_fits(model, task, path, trained_on: str) -> None:
    """One line if ``task``'s inputs or labels do not fit the checkpoint's model (built for ``trained_on``)."""
    if task.vocab_size > model.vocab_size:
        raise UserError(
            f"task {task.name} has {task.vocab_size} input tokens; checkpoint {str(path)!r} was built "
            f"for {model.vocab_size} ({trained_on})"
        )
    if task.num_classes > model.num_classes:
        raise UserError(
            f"task {task.name} has {task.num_classes} classes; checkpoint {str(path)!r} was built "
            f"for {model.num_classes} ({trained_on})"
        )
