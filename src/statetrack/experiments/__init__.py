"""The papers' studies as data files: typed, validated, and the only home of their hyperparameters.

A study file (YAML; the format is documented in ``docs/studies.md``) holds one or more *tables*. A table
is a grid: its ``tasks`` are the columns, its ``models`` the rows; every (model, task) cell is trained
for every learning rate and seed of the scale. The study also says how a run is scored (``metric`` and
``score``: per test length, mean over a range of test lengths, or longest length above a threshold),
how the seeds and learning rates of a cell are reduced to one number (``select``, which says whether
the paper selected on validation or on the test lengths), the published numbers, and a tolerance for
calling our number different from the paper's. ``scales`` (``quick`` for a laptop CPU, ``paper`` for
the paper's protocol) set seeds, steps, test lengths and may shrink the grid.

The old one-table form (``task`` + ``models`` + ``published_columns`` at the top level) is still read:
it becomes a table named ``main``.

``kind: lm`` makes a language-modelling study: its tasks are corpora (``lm:...`` task strings), every
run is scored by bits per byte on the test split, and the report (``statetrack.report.lm_tables``) shows bpb
beside the unigram and bigram baselines, by context length and by position, with an optional joint
table (``state_tracking``) of each model's results in a state-tracking study read from the same database.

``load_study(name)`` finds a built-in study by name, or reads a path (a YAML file of at most
``untrusted.MAX_YAML_BYTES``); ``Study.grid(scale)`` is the grid a sweep runs (:class:`statetrack.runs.jobs.Grid`:
counted and capped at ``jobs.MAX_RUNS`` runs unless raised, then expanded one run at a time).

The modules: ``schema`` (the study file's pydantic models), ``grid`` (a study's cells and the jobs a sweep
runs), ``loading`` (finding and reading study files) and ``card`` (the study a scorecard runs: the
frontier zoo's protocol on one mixer); the names below are re-exported from the first three.
"""

from statetrack.experiments.grid import Cell
from statetrack.experiments.loading import HERE, builtin_studies, load_study
from statetrack.experiments.study_schema import (
    Label,
    Metric,
    Name,
    Published,
    Reduce,
    Scale,
    Score,
    ScoreKind,
    Selection,
    StateTracking,
    Study,
    StudyKind,
    StudyModel,
    StudyTask,
    Table,
    parse_lengths,
)

__all__ = [
    "HERE",
    "Cell",
    "Label",
    "Metric",
    "Name",
    "Published",
    "Reduce",
    "Scale",
    "Score",
    "ScoreKind",
    "Selection",
    "StateTracking",
    "Study",
    "StudyKind",
    "StudyModel",
    "StudyTask",
    "Table",
    "builtin_studies",
    "load_study",
    "parse_lengths",
]
