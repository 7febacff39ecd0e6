# long: the study file's whole schema, one pydantic model per section, read top to bottom
"""The study file's schema: the pydantic models a study file (YAML, ``docs/studies.md``) is validated
against, from a whole :class:`Study` down to its tables' models and tasks and its scales.

A study's tables are grids (``tasks`` the columns, ``models`` the rows); ``score`` and ``select`` say how
runs become table cells; ``scales`` set seeds, steps and test lengths and may shrink the grid. The old
one-table form (``task`` + ``models`` + ``published_columns`` at the top level) is read as a table named
``main``. :meth:`Study.grid` is the grid a sweep runs (its cells and jobs: :mod:`statetrack.experiments.grid`).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from statetrack.config import EvalConfig, validated
from statetrack.errors import UserError, did_you_mean
from statetrack.experiments.grid import Cell, expand, learning_rates, model_config
from statetrack.progress import warn
from statetrack.runs.jobs import MAX_RUNS, Grid, Job
from statetrack.untrusted import confusable, label_problem, name_problem

Metric = Literal["accuracy", "scaled_accuracy", "token_accuracy", "sequence_accuracy"]
Reduce = Literal["median", "mean", "max", "min"]
Published = float | str | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*(?:/\s*(\d+))?\s*$")


def parse_lengths(v) -> list[int]:
    """A list of ints, an int, or 'A..B/S' (A to B inclusive in steps of S; S defaults to 1)."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if isinstance(v, str):
        m = _RANGE.match(v)
        if not m:
            raise ValueError(f"bad length range {v!r}; give a list of ints or 'A..B/S', e.g. '60..1000/20'")
        a, b, s = int(m[1]), int(m[2]), int(m[3] or 1)
        if a > b or s < 1:
            raise ValueError(f"bad length range {v!r}: need A <= B and S >= 1")
        v = list(range(a, b + 1, s)) + ([b] if (b - a) % s else [])
    if not isinstance(v, (list, tuple)) or not v:
        raise ValueError("test lengths must be a non-empty list of positive ints or 'A..B/S'")
    out = []
    for x in v:
        if isinstance(x, str):
            out += parse_lengths(x)
        elif isinstance(x, int) and not isinstance(x, bool) and x >= 1:
            out.append(x)
        else:
            raise ValueError(f"bad test length {x!r}; lengths are positive integers")
    return sorted(set(out))


#: how a run becomes a table cell: the metric at each test length, its mean over a range of lengths, or
#: the longest length at which it stays above a threshold
ScoreKind = Literal["per_length", "mean", "longest"]


class StudyKind(StrEnum):
    """What a study measures: state tracking (accuracy by test length) or language modelling (``kind: lm``:
    loss and bits per byte on corpora, :mod:`statetrack.report.lm_tables`)."""

    STATE = "state"
    LM = "lm"


class Score(_Strict):
    """How one run becomes one number (or one number per test length)."""

    kind: ScoreKind = "per_length"
    lengths: tuple[int, int] | None = Field(
        None, description="mean: the inclusive range of test lengths averaged over (default: all of them)"
    )
    threshold: float = Field(0.9, ge=0, le=1, description="longest: the metric must be > threshold")
    fail_below: int | None = Field(
        None, ge=1, description="longest: values below this are shown as 'x' (the paper's 'fails before N')"
    )
    every_shorter: bool = Field(
        True,
        description="longest: the metric must also be > threshold at every shorter test length; false: "
        "the longest test length at which it is > threshold, whatever the shorter ones read (a paper's "
        "'longest length achieving accuracy > 90%' read as written); the report then adds the table "
        "NAME-every-shorter with the stricter reading",
    )


class Selection(_Strict):
    """Seeds and learning rates of one cell -> one number.

    ``using: test``: reduce the seeds' test scores with ``seeds`` for every learning rate, then take the
    ``lrs`` reduction of those (the paper selected on the test lengths: say so in ``notes``).
    ``using: validation``: choose the learning rate whose seeds have the best ``seeds``-reduced
    in-distribution validation accuracy; at that rate report the ``seeds`` reduction of the test scores,
    except ``max``/``min``, which report the test score of the seed with the best / worst validation.
    """

    seeds: Reduce = "median"
    lrs: Literal["max", "median", "mean"] = "max"
    using: Literal["validation", "test"] = "validation"


def _checked(problem):
    def check(value: str) -> str:
        why = problem(value)
        if why:
            raise ValueError(why)
        return value

    return AfterValidator(check)


#: a study's name: it names the report's files, so it is an identifier (untrusted.name_problem)
Name = Annotated[str, _checked(name_problem)]
#: a model's or task's label, a table's name: printable text of bounded length (untrusted.label_problem)
Label = Annotated[str, _checked(label_problem)]


def eval_overrides(v: dict) -> dict:
    """A task's EvalConfig overrides, checked: only the fields a study may set, lengths parsed."""
    allowed = {"lengths", "test_split", "batch_size", "horizons"}
    bad = sorted(set(v) - allowed)
    if bad:
        raise ValueError(f"unknown eval field {bad[0]!r}; allowed: {', '.join(sorted(allowed))}")
    return {**v, "lengths": parse_lengths(v["lengths"])} if "lengths" in v else v


def _over(below: dict, above: dict) -> dict:
    """TrainConfig overrides ``above`` over ``below``: a rate (lr) or a grid (lrs) above replaces whichever
    of the two below gives (a layer never gives both: ``_check_scale`` refuses it)."""
    out = {**below, **above}
    if "lrs" in above:
        out.pop("lr", None)
    elif "lr" in above:
        out.pop("lrs", None)
    return out


class StudyTask(_Strict):
    label: Label
    task: str
    train_lengths: tuple[int, int] | None = None
    train: dict = Field(default_factory=dict, description="TrainConfig overrides for this task")
    probes: list[str] = Field(
        default_factory=list, description="tasks run once on the trained model and stored as traces"
    )
    depth: int | None = Field(
        None,
        ge=1,
        le=64,
        description="repeat each model's layer spec this many "
        "times on this task (e.g. 2 for parity, 3 for "
        "modular arithmetic)",
    )
    eval: dict = Field(
        default_factory=dict,
        description="EvalConfig overrides for this task at every scale, e.g. test_split: test for "
        "a task without a long-range draw, or lengths: '500..511' (consecutive "
        "lengths, where a fixed input's final label cycles)",
    )

    @field_validator("eval")
    @classmethod
    def _eval_fields(cls, v):
        return eval_overrides(v)


class StudyModel(_Strict):
    label: Label
    model: dict
    train_lengths: tuple[int, int] | None = None
    train: dict = Field(
        default_factory=dict,
        description="TrainConfig overrides for this model (an lr here is "
        "the model's one learning rate, over the scale's grid)",
    )
    tasks: list[str] | None = Field(None, description="labels of the tasks this model runs on (default all)")
    published: dict[str, Published] = Field(
        default_factory=dict, description="published value per task label / published column"
    )
    scales: dict[str, dict] = Field(
        default_factory=dict,
        description="ModelConfig overrides for this model at a scale (e.g. its width "
        "where the models' sizes are matched)",
    )
    control_of: str | None = Field(
        None,
        description="the label of the row this row controls: its cells start from a construction (train.init) "
        "to show that the weights exist and stay under training; the report shows them as evidence "
        "beside that row's cells and counts them in no agreement",
    )


class Table(_Strict):
    name: Label = "main"
    title: str = ""
    tasks: list[StudyTask]
    models: list[StudyModel]
    published_columns: dict[str, str] = Field(
        default_factory=dict, description="per_length tables: published columns, key -> header"
    )
    compare: dict[str, str | tuple[int, int]] = Field(
        default_factory=dict,
        description="per_length tables: published key -> 'validation', a [lo, hi] "
        "range of test lengths whose mean is compared, or 'probe:TASK' "
        "(yes/no: accuracy on the probe's input-1 steps > threshold)",
    )

    @field_validator("tasks", mode="before")
    @classmethod
    def _task_strings(cls, v):
        if isinstance(v, list):
            return [{"label": t, "task": t} if isinstance(t, str) else t for t in v]
        return v

    @model_validator(mode="after")
    def _check(self):
        for what, labels in (
            ("model", [m.label for m in self.models]),
            ("task", [t.label for t in self.tasks]),
        ):
            if len(set(labels)) != len(labels):
                raise ValueError(f"duplicate {what} labels in table {self.name!r}")
            for group in confusable(labels):
                warn(
                    f"{what} labels {' and '.join(map(ascii, group))} of table {self.name!r} look the same "
                    "(letters of other scripts, or other forms of one letter); rename one so that their rows "
                    "can be told apart"
                )
        if not self.tasks or not self.models:
            raise ValueError(f"table {self.name!r} needs at least one task and one model")
        known = {t.label for t in self.tasks}
        for key, spec in self.compare.items():
            if key not in self.published_columns:
                raise ValueError(f"compare names {key!r}, which is not a published column")
            if (
                isinstance(spec, str)
                and spec != "validation"
                and not (spec.startswith("probe:") and any(spec[6:] in t.probes for t in self.tasks))
            ):
                raise ValueError(
                    f"compare {key!r}: {spec!r} must be 'validation', [lo, hi] or 'probe:P' "
                    "with P a probe of a task"
                )
        rows = {m.label for m in self.models}
        for m in self.models:
            if m.control_of is not None and (m.control_of not in rows or m.control_of == m.label):
                raise ValueError(
                    f"model {m.label!r}: control_of names {m.control_of!r}, which is not another row "
                    f"of table {self.name!r}"
                )
            bad = [t for t in (m.tasks or []) if t not in known]
            if bad:
                raise ValueError(
                    f"model {m.label!r} names unknown task {bad[0]!r}; tasks: {', '.join(known)}"
                )
            keys = set(self.published_columns) | known
            bad = [k for k in m.published if k not in keys]
            if bad:
                raise ValueError(
                    f"model {m.label!r}: published value for unknown column {bad[0]!r}; "
                    f"allowed: {', '.join(sorted(keys))}"
                )
        return self

    def model_tasks(self, m: StudyModel) -> list[StudyTask]:
        return [t for t in self.tasks if m.tasks is None or t.label in m.tasks]


class StateTracking(_Strict):
    """LM studies: the state-tracking study whose results are shown beside each model's bpb."""

    study: str = Field(description="a built-in study (or path) whose models have the same labels")
    table: str = "main"
    columns: list[str] = Field(description="task labels of that study's table, e.g. parity")
    scales: dict[str, str] = Field(
        default_factory=dict,
        description="this study's scale -> that study's scale read beside it, where "
        "that study has no scale of the same name (default: the same)",
    )


class Scale(_Strict):
    seeds: int = Field(ge=1)
    steps: int = Field(ge=1)
    test_lengths: list[int]
    eval_batch: int = Field(128, ge=1)
    eval_tokens: int | None = Field(None, ge=1, description="lm studies: test tokens scored at each length")
    eval_windows: Literal["random", "tile"] = Field(
        "random", description="lm studies: test windows at random offsets, or tiling the whole test split"
    )
    test_split: Literal["test", "long", "test+long"] = Field(
        "test",
        description="the draws scored at every test length (EvalConfig.test_split): 'test+long' adds the "
        "long-range draw of the regular tasks beside their test draw",
    )
    horizons: bool = Field(
        False,
        description="measure each run's failure horizons on the witness families of "
        "its task (regular tasks), up to the longest test length",
    )
    train_lengths: tuple[int, int] | None = Field(
        None, description="training lengths at this scale (over the study's, task's and model's)"
    )
    train: dict = Field(default_factory=dict, description="TrainConfig overrides at this scale")
    task_train: dict[str, dict] = Field(
        default_factory=dict,
        description="task label -> TrainConfig overrides for that task at this scale, over "
        "everything else (e.g. fewer steps on a corpus that needs fewer); an lr "
        "here replaces the scale's learning-rate grid for that task, and lrs: "
        "[...] gives that task its own grid",
    )
    model_train: dict[str, dict] = Field(
        default_factory=dict,
        description="model label -> TrainConfig overrides for that model at this scale (e.g. more steps "
        "for a row whose runs are cheap and learn late); a task's own overrides (task_train) come after",
    )
    cell_train: dict[str, dict[str, dict]] = Field(
        default_factory=dict,
        description="model label -> task label -> TrainConfig overrides for that one cell at this scale, "
        "over the model's and the task's (e.g. the paper's steps for a cell that fits only with them); an "
        "lr or lrs here replaces the cell's learning-rate grid",
    )
    model: dict = Field(
        default_factory=dict, description="ModelConfig overrides at this scale (e.g. d_model)"
    )
    lrs: list[float] | None = Field(None, description="learning rates at this scale (default: the study's)")
    tables: list[str] | None = Field(None, description="only these tables at this scale")
    models: list[str] | None = Field(None, description="only these model labels at this scale")
    tasks: list[str] | None = Field(None, description="only these task labels at this scale")
    model_tasks: dict[str, list[str]] = Field(
        default_factory=dict,
        description="model label -> only these of its task labels at this scale (e.g. the ablation rows "
        "on one column, where the others need the paper's budget)",
    )
    task_eval: dict[str, dict] = Field(
        default_factory=dict,
        description="task label -> EvalConfig overrides for that task at this scale, over the task's own "
        "(e.g. a denser grid of test lengths on one column)",
    )
    replace_tasks: dict[str, str] = Field(
        default_factory=dict,
        description="task label -> the task string used at this scale instead (e.g. "
        "a variant labelled at every position, to train in minutes)",
    )

    @field_validator("test_lengths", mode="before")
    @classmethod
    def _lengths(cls, v):
        return parse_lengths(v)

    @field_validator("task_eval")
    @classmethod
    def _task_eval(cls, v):
        return {label: eval_overrides(over) for label, over in v.items()}

    def cells_train(self) -> dict[str, dict]:
        """``cell_train`` keyed by 'MODEL on TASK', the way messages and reports name a cell."""
        return {f"{m} on {t}": over for m, by_task in self.cell_train.items() for t, over in by_task.items()}


class Study(_Strict):
    name: Name
    title: str
    source: str
    notes: str = ""
    kind: StudyKind = StudyKind.STATE
    state_tracking: StateTracking | None = None
    metric: Metric = "accuracy"
    oracle: bool = Field(
        False,
        description="report the theory oracle's verdict beside every (model, task) cell "
        "and whether the measurements agree with it (report.verdict_tables)",
    )
    score: Score = Field(default_factory=Score)
    select: Selection = Field(default_factory=Selection)
    tolerance: float = Field(0.1, ge=0, description="|ours - paper| above this (0-1 scale) is marked")
    length_factor: float = Field(2.0, ge=1, description="longest: ours/paper outside [1/f, f] is marked")
    train: dict = Field(default_factory=dict)
    train_lengths: tuple[int, int] | None = None
    lrs: list[float] | None = Field(None, description="learning-rate grid (default: train.lr)")
    tables: list[Table]
    scales: dict[str, Scale]

    @model_validator(mode="before")
    @classmethod
    def _one_table_form(cls, data):
        if isinstance(data, dict) and "models" in data:
            data = dict(data)
            task = data.pop("task", None)
            if task is None:
                raise ValueError("the one-table form needs 'task' beside 'models'")
            table = {
                "name": "main",
                "title": data.get("title", ""),
                "tasks": [{"label": task, "task": task}],
                "models": data.pop("models"),
                "published_columns": data.pop("published_columns", {}),
                "compare": data.pop("compare", {}),
            }
            if "tables" in data:
                raise ValueError("give either 'tables' or 'task' + 'models', not both")
            data["tables"] = [table]
        return data

    @model_validator(mode="after")
    def _check(self):
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate table names in study {self.name!r}")
        if self.kind is StudyKind.LM:
            bad = [x.task for t in self.tables for x in t.tasks if not x.task.startswith("lm:")]
            if bad:
                raise ValueError(
                    f"a study of kind 'lm' trains on corpora (lm:...); task {bad[0]!r} is not one"
                )
        elif self.score.kind == "per_length" and any(len(t.tasks) != 1 for t in self.tables):
            raise ValueError("score kind 'per_length' needs exactly one task per table")
        if self.state_tracking is not None and self.kind is not StudyKind.LM:
            raise ValueError("state_tracking is for studies of kind 'lm'")
        for sname, sc in self.scales.items():
            self._check_scale(sname, sc)
        for t in self.tables:
            for m in t.models:
                bad = [x for x in m.scales if x not in self.scales]
                if bad:
                    raise ValueError(
                        f"model {m.label!r} has sizes for unknown scale {bad[0]!r}; scales: "
                        f"{', '.join(self.scales)}"
                    )
        return self

    def _check_scale(self, sname: str, sc: Scale) -> None:
        """A scale names only the study's tables, models and tasks, and gives a task one rate or one grid."""
        tasks = [x.label for t in self.tables for x in t.tasks]
        for what, have, known in (
            ("table", sc.tables, [t.name for t in self.tables]),
            ("model", sc.models, [m.label for t in self.tables for m in t.models]),
            ("task", sc.tasks, tasks),
            ("task", list(sc.replace_tasks), tasks),
            ("task", list(sc.task_train), tasks),
            ("task", list(sc.task_eval), tasks),
            ("model", list(sc.model_tasks), [m.label for t in self.tables for m in t.models]),
            ("model", list(sc.model_train), [m.label for t in self.tables for m in t.models]),
            ("task", [x for v in sc.model_tasks.values() for x in v], tasks),
            ("model", list(sc.cell_train), [m.label for t in self.tables for m in t.models]),
            ("task", [x for v in sc.cell_train.values() for x in v], tasks),
        ):
            bad = [x for x in (have or []) if x not in known]
            if bad:
                raise ValueError(f"scale {sname!r} names unknown {what} {bad[0]!r}")
        for kind, overrides in (
            ("task_train", sc.task_train),
            ("model_train", sc.model_train),
            ("cell_train", sc.cells_train()),
        ):
            for name, over in overrides.items():
                if "lr" in over and "lrs" in over:
                    raise ValueError(f"scale {sname!r}: {kind} for {name!r} sets both lr and lrs; keep one")
                if "lrs" in over and (
                    not isinstance(over["lrs"], list)
                    or not over["lrs"]
                    or not all(isinstance(x, int | float) and x > 0 for x in over["lrs"])
                ):
                    raise ValueError(
                        f"scale {sname!r}: {kind} lrs for {name!r} must be a non-empty list of "
                        f"positive learning rates, got {over['lrs']!r}"
                    )

    # -- the grid ----------------------------------------------------------------------------
    def scale(self, name: str) -> Scale:
        if name not in self.scales:
            raise UserError(
                f"unknown scale {name!r}{did_you_mean(name, self.scales)} for study {self.name!r}; "
                f"allowed: {', '.join(self.scales)}"
            )
        return self.scales[name]

    def active_tables(self, scale: str) -> list[Table]:
        sc = self.scale(scale)
        return [t for t in self.tables if sc.tables is None or t.name in sc.tables]

    def restrict(self, scale: str, models: list[str] | None = None, tasks: list[str] | None = None) -> Study:
        """This study with its grid at ``scale`` narrowed to these model and task labels: a declared part
        of a protocol. The runs keep their keys, so the whole grid, run later, reuses them."""
        sc = self.scale(scale)
        update = {}
        for what, chosen, have, known in (
            ("model", models, sc.models, [m.label for t in self.tables for m in t.models]),
            ("task", tasks, sc.tasks, [x.label for t in self.tables for x in t.tasks]),
        ):
            if not chosen:
                continue
            bad = [c for c in chosen if c not in known]
            if bad:
                raise UserError(
                    f"study {self.name!r} has no {what} {bad[0]!r}{did_you_mean(bad[0], known)}; allowed: "
                    f"{', '.join(dict.fromkeys(known))}"
                )
            update[what + "s"] = [c for c in dict.fromkeys(have or known) if c in chosen]
        narrowed = self.model_copy(update={"scales": {**self.scales, scale: sc.model_copy(update=update)}})
        if update and not narrowed.triples(scale):
            asked = " and ".join(f"{w} {', '.join(c)}" for w, c in (("model", models), ("task", tasks)) if c)
            cells = [f"{m.label} on {t.label}" for _, m, t in self.triples(scale)]
            shown = "; ".join(cells[:12]) + (f"; and {len(cells) - 12} more" if len(cells) > 12 else "")
            raise UserError(
                f"study {self.name!r} at scale {scale!r} runs no cell of {asked} (the study file's scale "
                f"says why it leaves them out); its cells: {shown}"
            )
        return narrowed

    def grid(
        self, scale: str, seeds: int | None = None, device: str = "auto", max_runs: int = MAX_RUNS
    ) -> Grid:
        """Every run of the grid at this scale (tables x models x tasks x learning rates x seeds), as the
        jobs a sweep runs: counted, and refused in one line above ``max_runs``, before any run's config is
        built; then built one run at a time as the grid is iterated."""
        sc = self.scale(scale)
        n = sc.seeds if seeds is None else seeds
        if n < 1:
            raise UserError(f"--seeds must be at least 1, got {n}")
        return expand(self.grid_cells(scale, device), self.name, scale, n, max_runs)

    def grid_cells(self, scale: str, device: str = "auto") -> list[Cell]:
        """The (table, model, task) cells of the grid at this scale, their configs checked: what every run
        of a cell shares (its training fields, evaluation and learning-rate grid), before the seeds."""
        return [self._cell(table, m, t, scale, device) for table, m, t in self.triples(scale)]

    def triples(self, scale: str) -> list[tuple[Table, StudyModel, StudyTask]]:
        """The (table, model, task) triples the grid at this scale runs."""
        sc = self.scale(scale)
        return [
            (table, m, t)
            for table in self.active_tables(scale)
            for m in table.models
            if sc.models is None or m.label in sc.models
            for t in table.model_tasks(m)
            if (sc.tasks is None or t.label in sc.tasks) and t.label in sc.model_tasks.get(m.label, [t.label])
        ]

    def _cell(self, table: Table, m: StudyModel, t: StudyTask, scale: str, device: str) -> Cell:
        """The cell of model ``m`` on task ``t``: each setting from the most specific layer that gives it
        (the scale over the model over the task over the study; the task's settings at this scale over
        all)."""
        sc = self.scale(scale)
        mcfg = model_config({**m.model, **sc.model, **m.scales.get(scale, {})}, t.depth)
        lengths = sc.train_lengths or m.train_lengths or t.train_lengths or self.train_lengths
        if lengths is None:
            raise UserError(
                f"study {self.name!r}: no training lengths for model {m.label!r} on "
                f"task {t.label!r} (set train_lengths on the study, task or model)"
            )
        base = {**self.train, **t.train, **m.train, **sc.train}
        over: dict = {}
        for layer in (  # the model's overrides, then its task's, then its cell's
            sc.model_train.get(m.label, {}),
            sc.task_train.get(t.label, {}),
            sc.cell_train.get(m.label, {}).get(t.label, {}),
        ):
            over = _over(over, layer)
        lrs = learning_rates(over, m.train, sc.lrs, self.lrs, base)
        over.pop("lrs", None)
        ecfg = validated(
            EvalConfig,
            **{
                "lengths": sc.test_lengths,
                "batch_size": sc.eval_batch,
                "device": device,
                "tokens": sc.eval_tokens,
                "windows": sc.eval_windows,
                "test_split": sc.test_split,
                "horizons": sc.horizons,
                **t.eval,
                **sc.task_eval.get(t.label, {}),
            },
        )
        fields = {
            **base,
            "task": sc.replace_tasks.get(t.label, t.task),
            "model": mcfg,
            "train_min_len": lengths[0],
            "train_max_len": lengths[1],
            "steps": sc.steps,
            "device": device,
            **over,
        }
        return Cell(self.name, table.name, m.label, t.label, fields, ecfg, tuple(lrs), tuple(t.probes))

    def cells(
        self, scale: str, seeds: int | None = None, device: str = "auto", max_runs: int = MAX_RUNS
    ) -> list[Job]:
        """Every run of the grid at this scale, as a list (:meth:`grid` expands it lazily)."""
        return list(self.grid(scale, seeds, device, max_runs))

    def configs(self, scale: str, seeds: int | None = None, device: str = "auto"):
        """Yield (label, seed, TrainConfig, EvalConfig) for every run of the grid at this scale."""
        for c in self.grid(scale, seeds, device):
            yield c.label, c.seed, c.train, c.eval

    # the one-table form's attributes, for code written against it
    @property
    def models(self) -> list[StudyModel]:
        return self.tables[0].models

    @property
    def task(self) -> str:
        return self.tables[0].tasks[0].task

    @property
    def published_columns(self) -> dict[str, str]:
        return self.tables[0].published_columns
