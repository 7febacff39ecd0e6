"""The cells of a language-modelling report: one model on one corpus, its complete runs at the selected
learning rate (the one with the lowest median validation loss), and the corpus's baselines on the very
windows the models are scored on."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from statetrack.lm.answers import blind_level
from statetrack.lm.baselines import evaluate_baselines
from statetrack.lm.compressors import Compressed, corpus_compressors
from statetrack.lm.metrics import LMMetrics
from statetrack.model import Model, build_model
from statetrack.runs.jobs import Job
from statetrack.runs.store import RunStatus
from statetrack.tasks import get_task
from statetrack.tasks.base import CorpusTask
from statetrack.tasks.corpus_tasks import lm_vocab_size

POS, NEG = "[0,1]", "[-1,1]"


@dataclass
class Cell:
    """One model on one corpus: its complete runs at the selected learning rate."""

    label: str
    column: str
    task: str
    train_len: int
    lengths: list[int]
    job: Job  # the cell's first Job (its training and evaluation configs)
    runs: list = field(default_factory=list)  # RunResult
    lr: float | None = None
    lrs: list[float] = field(default_factory=list)  # every learning rate with a complete run (lr among them)
    params: int | None = None

    def values(self, length: int, key: str = "bpb") -> list[float]:
        out = []
        for r in self.runs:
            m = next((m for m in r.lm if m.length == length), None)
            v = None if m is None else getattr(m, key)
            if v is not None:
                out.append(v)
        return out

    def beyond(self) -> list[float]:
        """Per run: bpb of the positions at or beyond the training length, at the longest context."""
        ms = [next((m for m in r.lm if m.length == max(self.lengths)), None) for r in self.runs]
        return [v for v in (beyond_bpb(m, self.train_len) for m in ms if m is not None) if v is not None]


def beyond_bpb(m, train_len: int) -> float | None:
    """bpb of an LMMetrics' position buckets that start at or past ``train_len``."""
    far = [b for b in m.buckets if b["lo"] >= train_len]
    return sum(b["bpb"] * b["bytes"] for b in far) / sum(b["bytes"] for b in far) if far else None


def model_params(job) -> int:
    """Parameters of the model a job builds (counted from the built model, not typed in). A corpus's
    vocabulary is read from its task string, so that no corpus or tokenizer is built for the count."""
    task = job.train.task
    if task.startswith("lm:"):
        V = lm_vocab_size(task)
        return sum(p.numel() for p in Model(job.train.model, V, V).parameters())
    return sum(p.numel() for p in build_model(job.train.model, get_task(task)).parameters())


def gather(study, results) -> list[Cell]:
    """One Cell per (model, corpus) of every table, in the study's order."""
    cells = []
    for tdef in study.tables:
        for m in tdef.models:
            for t in tdef.model_tasks(m):
                mine = [
                    (j, r)
                    for j, r in results
                    if j.table == tdef.name and j.label == m.label and j.column == t.label
                ]
                if not mine:
                    continue
                j0 = mine[0][0]
                cell = Cell(
                    m.label,
                    t.label,
                    j0.train.task,
                    j0.train.train_max_len,
                    list(j0.eval.lengths),
                    params=model_params(j0),
                    job=j0,
                )
                done = [(j, r) for j, r in mine if r is not None and r.status == RunStatus.COMPLETE and r.lm]
                by_lr: dict[float, list] = {}
                for j, r in done:
                    by_lr.setdefault(j.train.lr, []).append(r)
                if by_lr:  # the learning rate with the lowest median validation loss
                    cell.lr = min(
                        by_lr,
                        key=lambda lr: (
                            statistics.median(
                                r.summary.get("best_val_loss", float("inf")) for r in by_lr[lr]
                            ),
                            lr,
                        ),
                    )
                    cell.runs = by_lr[cell.lr]
                    cell.lrs = sorted(by_lr)
                cells.append(cell)
    return cells


def eval_length(cell: Cell) -> int:
    """The context length the headline bpb is read at: the training length (or the next test length)."""
    longer = [n for n in cell.lengths if n >= cell.train_len]
    return min(longer) if longer else max(cell.lengths)


@dataclass
class CorpusBaselines:
    """The baselines of one corpus column: the count models on the models' windows, the state-blind level
    of the answers in those windows at the headline length (None for a corpus without answers), and the
    compressors on the test split's bytes (``statetrack.lm.compressors``)."""

    counts: dict[str, dict[int, LMMetrics]]  # 'unigram' | 'bigram' -> length -> metrics
    blind: float | None
    compressors: dict[str, Compressed]


def baselines(cells: list[Cell], results) -> dict[str, CorpusBaselines]:
    """Per corpus column: its baselines (``CorpusBaselines``)."""
    out: dict[str, CorpusBaselines] = {}
    for c in cells:
        if c.column in out:
            continue
        job = next(j for j, _ in results if j.column == c.column and j.label == c.label)
        ev = job.eval
        task = get_task(c.task)
        assert isinstance(task, CorpusTask)  # an lm study's columns are corpora
        corpus = task.corpus
        b = evaluate_baselines(corpus, list(ev.lengths), ev.tokens, ev.batch_size, ev.seed, ev.windows)
        counts = {k: {m.length: m for m in ms} for k, ms in b.items()}
        blind = blind_level(counts["bigram"][eval_length(c)].answer_buckets)
        out[c.column] = CorpusBaselines(counts, blind, corpus_compressors(corpus))
    return out


def columns_of(cells: list[Cell]) -> list[str]:
    return list(dict.fromkeys(c.column for c in cells))


def labels_of(cells: list[Cell]) -> list[str]:
    return list(dict.fromkeys(c.label for c in cells))


def find_cell(cells, label, column) -> Cell | None:
    return next((c for c in cells if c.label == label and c.column == column), None)


def pairs(labels: list[str]) -> list[tuple[str, str, str]]:
    """(family, [0,1] label, [-1,1] label) for labels that differ only by the eigenvalue range."""
    out = []
    for a in labels:
        if a.endswith(POS):
            fam = a[: -len(POS)].strip()
            b = next((x for x in labels if x.endswith(NEG) and x[: -len(NEG)].strip() == fam), None)
            if b:
                out.append((fam, a, b))
    return out
