"""Typed configs: every component is built from one of these, and every run stores them whole."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from statetrack.errors import UserError


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Config):
    """embedding -> blocks (norm, mixer, residual, optional MLP) -> norm -> head."""

    layers: str = Field(description="layer spec, e.g. 'mamba,s4d' or 'negmamba*2'")
    d_model: int = Field(8, ge=1, le=4096, description="embedding / residual width")
    d_state: int = Field(16, ge=1, le=4096, description="state size per channel (hidden size for RNNs)")
    mlp: bool = Field(False, description="add an MLP sub-block after each mixer")
    norm: Literal["rmsnorm", "layernorm", "none"] = "rmsnorm"

    @field_validator("layers")
    @classmethod
    def _parse(cls, v):
        from statetrack.spec import format_layers, parse_layers

        return format_layers(parse_layers(v))


class TrainConfig(_Config):
    """One training run: task, model, optimiser, schedule, lengths, validation, seed."""

    task: str = "parity"
    model: ModelConfig
    train_min_len: int = Field(8, ge=1)
    train_max_len: int = Field(8, ge=1)
    steps: int = Field(2000, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_frac: float = Field(0.1, ge=0, le=1)
    clip: float = Field(1.0, gt=0)
    eval_every: int = Field(100, ge=1)
    patience: int = Field(10, ge=1, description="validations without improvement before early stop")
    val_sequences: int = Field(512, ge=1)
    seed: int = 0
    device: Literal["cpu", "cuda", "auto"] = Field(
        "auto", validate_default=True, description="cpu, cuda, or auto (cuda where present); stored resolved")
    precision: Literal["float32", "bfloat16"] = Field(
        "float32", description="CUDA only: 'bfloat16' runs the forward pass under bf16 autocast")
    cuda_graphs: bool = Field(True, description="CUDA only: capture each training length's step as a CUDA "
                                                "graph and replay it")
    init: str | None = Field(None, description="'construction:NAME' to start from a construction")
    init_noise: float = Field(0.0, ge=0)

    _device = field_validator("device")(classmethod(lambda cls, v: concrete_device(v)))

    @model_validator(mode="after")
    def _lengths(self):
        if self.train_min_len > self.train_max_len:
            raise ValueError(f"train_min_len {self.train_min_len} > train_max_len {self.train_max_len}")
        return self

    @property
    def train_lengths(self) -> tuple[int, int]:
        return (self.train_min_len, self.train_max_len)


class EvalConfig(_Config):
    """Length-generalization evaluation: a grid of test lengths, a batch of fresh sequences each."""

    lengths: list[int] = Field(default_factory=lambda: default_lengths())
    batch_size: int = Field(128, ge=1)
    chunk: int = Field(1024, ge=1, description="time steps per forward call; memory is flat in length")
    seed: int = 12345
    device: Literal["cpu", "cuda", "auto"] = Field(
        "auto", validate_default=True, description="cpu, cuda, or auto (cuda where present); stored resolved")
    memory_mb: int = Field(2048, ge=1, description="chunks shrink so that no layer's activations for one "
                                                   "chunk exceed this many MiB")

    _device = field_validator("device")(classmethod(lambda cls, v: concrete_device(v)))

    @field_validator("lengths")
    @classmethod
    def _positive(cls, v):
        if not v:
            raise ValueError("no test lengths given")
        if any(n < 1 for n in v):
            raise ValueError(f"test lengths must be positive, got {[n for n in v if n < 1]}")
        return sorted(set(v))


def concrete_device(name: str) -> str:
    """'auto' -> 'cuda' where a CUDA device is present, else 'cpu'; other names unchanged. Configs store
    the device a run actually used, so a run's key says where its numbers come from."""
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_lengths(lo: int = 16, hi: int = 10_000) -> list[int]:
    """Roughly log-spaced round lengths from lo to hi: 16, 32, ..., 512, 1000, 2000, 5000, 10000."""
    grid = [2 ** k for k in range(4, 10)] + [m * 10 ** e for e in range(3, 7) for m in (1, 2, 5)]
    return sorted({n for n in grid if lo <= n <= hi} | {hi})


def validated(cls, **kwargs):
    """Build a config, turning pydantic's multi-line errors into one UserError line."""
    try:
        return cls(**kwargs)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or cls.__name__
        msg = err.get("msg", str(e)).removeprefix("Value error, ")
        if isinstance(err.get("ctx", {}).get("error"), UserError):
            raise err["ctx"]["error"] from None
        raise UserError(f"bad {where}: {msg} (got {err.get('input')!r})") from None
