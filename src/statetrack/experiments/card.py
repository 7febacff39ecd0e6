"""The study a scorecard runs (``statetrack.scorecard``): the frontier zoo's main table with one row, the
mixer scored, at one of the zoo's scales. Data only, without torch: the command line checks a card's
arguments with it before anything heavy loads."""

from __future__ import annotations

from pydantic import ValidationError

from statetrack.errors import UserError
from statetrack.experiments.loading import load_study
from statetrack.experiments.study_schema import Study, parse_lengths

ZOO = "frontier-zoo"
TABLE = "main"
#: the scale-level fields of the zoo that name its own rows or tables, cleared for a card's one row
_ROW_FIELDS: dict[str, dict | None] = {
    "tables": None,
    "models": None,
    "tasks": None,
    "model_tasks": {},
    "model_train": {},
    "cell_train": {},
}


def card_study(layers: str, label: str, scale: str, steps: int | None = None, test_lengths=None) -> Study:
    """The frontier zoo's main table with one row, ``layers`` under ``label``, at the zoo's ``scale``
    (its seeds, steps, widths, learning rates and test lengths; ``steps`` and ``test_lengths`` override
    them)."""
    zoo = load_study(ZOO)
    zoo.scale(scale)  # an unknown scale: the allowed ones
    if steps is not None and steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    if test_lengths is not None:
        try:  # '500..511', '16,64,100..200/50', or a list
            if isinstance(test_lengths, str):
                test_lengths = [int(x) if x.strip().isdigit() else x.strip() for x in test_lengths.split(",")]
            test_lengths = parse_lengths(test_lengths)
        except ValueError as e:
            raise UserError(f"bad --test-lengths {test_lengths!r}: {e}") from None
    main = next(t for t in zoo.tables if t.name == TABLE)
    tasks = {t.label for t in main.tasks}
    data = zoo.model_dump(mode="json")
    data["name"], data["title"] = "scorecard", f"Scorecard of {label}: the frontier zoo's protocol"
    data["tables"] = [
        {**main.model_dump(mode="json"), "models": [{"label": label, "model": {"layers": layers}}]}
    ]
    sc = {**data["scales"][scale], **_ROW_FIELDS}
    for key in ("task_train", "task_eval", "replace_tasks"):
        sc[key] = {k: v for k, v in sc[key].items() if k in tasks}
    if steps is not None:
        sc["steps"] = steps
    if test_lengths is not None:
        sc["test_lengths"] = test_lengths
    data["scales"] = {scale: sc}
    try:
        return Study.model_validate(data)
    except ValidationError as e:  # a label the study format refuses (unprintable, too long)
        raise UserError(f"bad --label {label!r}: {e.errors()[0]['msg']}") from None
