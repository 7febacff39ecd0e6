"""The papers' studies as data files: typed, validated, and the only home of their hyperparameters.

A study file (YAML) names a task, a list of models (layer spec, sizes, training lengths, the published
numbers), shared training settings and one or more scales (``quick`` for a laptop CPU, ``paper`` for the
paper's protocol). ``load_study(name)`` finds a built-in study by name, or reads a path.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from statetrack.config import EvalConfig, ModelConfig, TrainConfig, validated
from statetrack.errors import UserError

HERE = Path(__file__).parent


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StudyModel(_Strict):
    label: str
    model: dict
    train_lengths: tuple[int, int]
    train: dict = Field(default_factory=dict, description="TrainConfig overrides for this model")
    published: dict[str, float | None] = Field(default_factory=dict)


class Scale(_Strict):
    seeds: int = Field(ge=1)
    steps: int = Field(ge=1)
    test_lengths: list[int]
    eval_batch: int = Field(128, ge=1)
    train: dict = Field(default_factory=dict, description="TrainConfig overrides at this scale")


class Study(_Strict):
    name: str
    title: str
    source: str
    task: str
    metric: str = "accuracy"
    published_columns: dict[str, str] = Field(default_factory=dict)
    notes: str = ""
    train: dict = Field(default_factory=dict)
    models: list[StudyModel]
    scales: dict[str, Scale]

    @model_validator(mode="after")
    def _unique(self):
        labels = [m.label for m in self.models]
        if len(set(labels)) != len(labels):
            raise ValueError(f"duplicate model labels in study {self.name!r}")
        return self

    def scale(self, name: str) -> Scale:
        if name not in self.scales:
            raise UserError(f"unknown scale {name!r} for study {self.name!r}; allowed: {', '.join(self.scales)}")
        return self.scales[name]

    def configs(self, scale: str, seeds: int | None = None, device: str = "cpu"):
        """Yield (label, seed, TrainConfig, EvalConfig) for every run of the grid at this scale."""
        sc = self.scale(scale)
        n = sc.seeds if seeds is None else seeds
        if n < 1:
            raise UserError(f"--seeds must be at least 1, got {n}")
        for m in self.models:
            mcfg = validated(ModelConfig, **m.model)
            for seed in range(n):
                fields = {**self.train, **m.train, **sc.train, "task": self.task, "model": mcfg,
                          "train_min_len": m.train_lengths[0], "train_max_len": m.train_lengths[1],
                          "steps": sc.steps, "seed": seed, "device": device}
                tcfg = validated(TrainConfig, **fields)
                ecfg = validated(EvalConfig, lengths=sc.test_lengths, batch_size=sc.eval_batch, device=device)
                yield m.label, seed, tcfg, ecfg


def builtin_studies() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.yaml"))


def load_study(name_or_path: str) -> Study:
    """A built-in study by name (see ``builtin_studies()``) or a YAML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = HERE / f"{name_or_path}.yaml"
        if not path.is_file():
            raise UserError(f"unknown study {name_or_path!r}; allowed: {', '.join(builtin_studies())} "
                            "or a path to a .yaml file")
    elif not path.is_file():
        raise UserError(f"study file {str(path)!r} not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        line = str(e).splitlines()[0]
        raise UserError(f"study file {str(path)!r} is not valid YAML: {line}") from None
    if not isinstance(data, dict):
        raise UserError(f"study file {str(path)!r} must hold a mapping, got {type(data).__name__}")
    try:
        return Study(**data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"study file {str(path)!r}: {where}: {err['msg']}") from None
