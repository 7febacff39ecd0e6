"""Checkpoints as safetensors: tensors plus the run's config as JSON metadata. Loading runs no code."""
from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from statetrack.errors import UserError

FORMAT = "statetrack-checkpoint-1"


def save_checkpoint(model, config: dict, path: str | Path, extra: dict | None = None) -> Path:
    """Write the model's weights and ``config`` (a TrainConfig dict) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "config": json.dumps(config), "extra": json.dumps(extra or {})}
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    tmp.replace(path)
    return path


def read_checkpoint(path: str | Path) -> tuple[dict, dict, dict]:
    """(tensors, config, extra) from a checkpoint, with a clear UserError for a bad file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint {str(path)!r} not found")
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"checkpoint {str(path)!r} is not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise UserError(f"checkpoint {str(path)!r} has no statetrack metadata (format {meta.get('format')!r}; "
                        f"expected {FORMAT!r})")
    try:
        return tensors, json.loads(meta["config"]), json.loads(meta.get("extra", "{}"))
    except (KeyError, json.JSONDecodeError) as e:
        raise UserError(f"checkpoint {str(path)!r} has damaged metadata ({e})") from None


def load_checkpoint(path: str | Path, device="cpu"):
    """Rebuild the model a checkpoint describes. Returns (model, TrainConfig, task, extra).

    The plugin modules recorded in the checkpoint (``extra["plugins"]``) are imported first."""
    from statetrack.config import TrainConfig, validated
    from statetrack.model import build_model
    from statetrack.plugins import load_plugins
    from statetrack.tasks import get_task

    tensors, config, extra = read_checkpoint(path)
    load_plugins(extra.get("plugins") or [], f"recorded in checkpoint {str(path)!r}")
    cfg = validated(TrainConfig, **config)
    task = get_task(cfg.task)
    model = build_model(cfg.model, task)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise UserError(f"checkpoint {str(path)!r} does not match its config: missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]}")
    for k, v in tensors.items():
        if v.shape != expected[k].shape:
            raise UserError(f"checkpoint {str(path)!r}: tensor {k!r} has shape {tuple(v.shape)}, "
                            f"the config needs {tuple(expected[k].shape)}")
    model.load_state_dict(tensors)
    return model.to(device), cfg, task, extra
