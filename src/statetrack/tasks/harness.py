"""The task suite as text, for pretrained language models: documents of prompts and answer choices, and
lm-evaluation-harness task files.

A document is one test sequence of a task at one length, drawn from the split's draw
(:mod:`statetrack.tasks.draws`: ``test`` or the long-range ``long``) with the evaluation's seeds, written
as text (:func:`render`): its inputs, the task's answer choices (its label names, or the class numbers)
and the index of the right one, the final label. Chance is the majority share of the final label's
distribution in that draw at that length (``draws.label_distribution``), as the evaluation of trained
models states it.

``export_tasks(tasks, lengths, n, out)`` writes, per task and length, ``NAME.jsonl`` (one document per
line) and ``NAME.yaml``, a task of lm-evaluation-harness (``output_type: multiple_choice``: each choice is
scored by its log-likelihood after the prompt; metric ``acc``), and a group file running them all. The
harness then runs them with ``lm_eval --include_path OUT --tasks statetrack``. :mod:`statetrack.training.
pretrained` scores a Hugging Face causal LM on the same documents without the harness.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.files import ensure_dir, inside, write_file
from statetrack.tasks import draws
from statetrack.tasks.algebraic import WordProblem
from statetrack.tasks.base import CorpusTask, Task
from statetrack.tasks.registry import get_task

#: the name of the group file's task group
GROUP = "statetrack"
#: the harness's fields a task file sets (lm-evaluation-harness ``TaskConfig``)
TASK_FIELDS = (
    "task",
    "dataset_path",
    "dataset_kwargs",
    "test_split",
    "output_type",
    "doc_to_text",
    "doc_to_choice",
    "doc_to_target",
    "target_delimiter",
    "metric_list",
    "metadata",
)
#: most documents per task and length
MAX_DOCS = 100_000


@dataclass(frozen=True)
class Doc:
    """One test sequence as text: the prompt, the answer choices, the index of the right one, and the chance
    level of its task and length."""

    id: int
    task: str
    length: int
    split: str
    inputs: str
    prompt: str
    choices: list[str]
    label: int
    chance: float

    def as_dict(self) -> dict:
        return asdict(self)


def symbol_names(task: Task) -> list[str]:
    """How each input token prints: the task's symbols; a group's letters as its elements (named as its
    labels are) where the group has more than two; else the token's number."""
    if task.symbols is not None:
        return [str(s) for s in task.symbols]
    alg = task.algebra()
    if isinstance(alg, WordProblem) and task.label_names is not None and task.num_classes > 2:
        return [str(task.label_names[e]) for e in alg.letters]
    return [str(t) for t in range(task.vocab_size)]


def choices(task: Task) -> list[str]:
    """The answer choices: the label names, or the class numbers."""
    if task.label_names is not None:
        return [str(x) for x in task.label_names]
    return [str(c) for c in range(task.num_classes)]


def render(task: Task, inputs: np.ndarray) -> tuple[str, str]:
    """(the inputs as text, the prompt) of one sequence of ``task``."""
    names = symbol_names(task)
    text = " ".join(names[int(t)] for t in inputs)
    answers = choices(task)
    shown = ", ".join(answers) if len(answers) <= 12 else f"{', '.join(answers[:12])}, ..."
    prompt = (
        f"Task {task.name}: read the inputs and give the label after the last one ({shown}).\n"
        f"Inputs: {text}\nLabel:"
    )
    return text, prompt


def _task(name: str) -> Task:
    task = get_task(name)
    if isinstance(task, CorpusTask):
        raise UserError(
            f"{name!r} is a corpus; export-tasks writes state-tracking tasks (parity, group:S3, ...)"
        )
    return task


def documents(
    task_name: str, length: int, n: int, split: str | Split = Split.TEST, seed: int = 0
) -> list[Doc]:
    """``n`` documents of ``task_name`` at ``length`` from the split's draw (seeded as the evaluation's
    test sets are: ``draws.test_rng(seed, split, length)``)."""
    task = _task(task_name)
    split = draws.check_split(split)
    if not 1 <= n <= MAX_DOCS:
        raise UserError(f"--n must be in 1..{MAX_DOCS}, got {n}")
    if length < 1:
        raise UserError(f"bad length {length}; lengths are positive integers")
    why = draws.unavailable(task, split, length)
    if why:
        raise UserError(f"{task.name} has no {split.value!r} draw at length {length}: {why}")
    b = draws.batch(task, split, draws.test_rng(seed, split, length), n, length)
    if not b.mask[:, -1].all():
        raise UserError(f"{task.name} scores no label after the last input; it cannot be asked as a question")
    dist, _ = draws.label_distribution(task, split, length)
    chance = float(np.max(dist) / np.sum(dist))
    out = []
    for i in range(n):
        text, prompt = render(task, b.inputs[i])
        out.append(
            Doc(i, task.name, length, split.value, text, prompt, choices(task), int(b.targets[i, -1]), chance)
        )
    return out


def task_name(task: str, length: int, split: str) -> str:
    """The harness's name of one task file: ``statetrack_parity_L64_test``."""
    return f"{GROUP}_{_slug(task)}_L{length}_{split}"


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_").lower()


def task_config(name: str, data_file: Path, chance: float, task: str, length: int, split: str) -> dict:
    """One lm-evaluation-harness task: the local jsonl as its test split, each choice scored by its
    log-likelihood after the prompt (the harness puts ``target_delimiter`` between them), accuracy."""
    return {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "{{prompt}}",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "{{label}}",
        "target_delimiter": " ",
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {
            "version": 1.0,
            "chance": chance,
            "statetrack_task": task,
            "length": length,
            "split": split,
        },
    }


def export_tasks(
    tasks: list[str],
    lengths: list[int],
    n: int,
    out: str | Path,
    split: str | Split = Split.TEST,
    seed: int = 0,
) -> list[dict]:
    """Write each task at each length as lm-evaluation-harness files into ``out`` (see the module
    docstring); returns one entry per task file: name, task, length, split, documents, chance, yaml and
    jsonl paths. Every task and length is checked before a file is written."""

    split = draws.check_split(split)
    made = [(t, L, documents(t, L, n, split, seed)) for t in tasks for L in lengths]
    with inside(out):  # the files hold the split's text
        return _write_tasks(made, ensure_dir(out, f"cannot write the tasks in {str(out)!r}"), split.value)


def _write_tasks(made: list, folder: Path, split: str) -> list[dict]:
    """The files of ``export_tasks``, written into ``folder`` (never through a link)."""
    import yaml

    rows = []
    for _, L, docs in made:
        name = task_name(docs[0].task, L, split)
        data = folder / f"{name}.jsonl"
        write_file(data, "".join(json.dumps(d.as_dict()) + "\n" for d in docs), what="task data")
        config = task_config(name, data, docs[0].chance, docs[0].task, L, split)
        path = write_file(folder / f"{name}.yaml", yaml.safe_dump(config, sort_keys=False), what="task file")
        rows.append(
            {
                "name": name,
                "task": docs[0].task,
                "length": L,
                "split": split,
                "documents": len(docs),
                "chance": docs[0].chance,
                "yaml": str(path),
                "jsonl": str(data),
            }
        )
    group = {
        "group": GROUP,
        "task": [r["name"] for r in rows],
        "aggregate_metric_list": [{"metric": "acc", "aggregation": "mean", "weight_by_size": True}],
        "metadata": {"version": 1.0},
    }
    write_file(folder / f"{GROUP}.yaml", yaml.safe_dump(group, sort_keys=False), what="task file")
    return rows
