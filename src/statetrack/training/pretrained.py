"""A pretrained causal language model scored on the task suite, by the likelihood of each answer.

The documents are those ``export-tasks`` writes for lm-evaluation-harness (:mod:`statetrack.tasks.
harness`: a prompt, the answer choices, the right one), scored as the harness scores a
``multiple_choice`` task: each choice, after a space, is a continuation of the prompt; its score is the
sum of the log-probabilities of its tokens; the answer is the choice with the highest score (the
harness's ``acc``). A continuation's tokens are those the tokenizer gives the prompt and the choice
together beyond the prompt's own (as the harness splits them). Where the prompt and a choice pass the
model's context, the prompt is cut from the left, and the result counts the documents so cut.

``eval_lm(path, tasks, lengths, n)`` loads a local Hugging Face checkpoint (a folder of
``save_pretrained``, or a model already in the local cache) and scores it; ``score_lm(model, tokenizer,
docs)`` scores a model given as objects. The accuracy of each task and length stands beside its chance
(the majority share of the final label in that draw) with a 95% Wilson interval. transformers is
imported only here, when a checkpoint is loaded; weights are read from safetensors files only and no code
of the checkpoint's is run (``trust_remote_code`` off): a checkpoint is data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.tasks.harness import Doc, documents
from statetrack.training.evaluation import wilson


@dataclass
class LMScore:
    """One task at one length: documents, correct answers, accuracy with its 95% interval, chance, and the
    documents whose prompt was cut to fit the context."""

    task: str
    length: int
    split: str
    n: int
    correct: int
    accuracy: float
    low: float
    high: float
    chance: float
    truncated: int

    @property
    def judgement(self) -> str:
        """above / at / below chance (the interval against chance)."""
        return "above" if self.low > self.chance else "below" if self.high < self.chance else "at"

    def as_dict(self) -> dict:
        return {**asdict(self), "judgement": self.judgement}


def _continuation(tokenizer, prompt: str, choice: str) -> tuple[list[int], list[int]]:
    """(the prompt's tokens, the choice's after it), split as the harness splits them."""
    ctx = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    whole = tokenizer(prompt + " " + choice, add_special_tokens=False)["input_ids"]
    if whole[: len(ctx)] == ctx and len(whole) > len(ctx):
        return ctx, whole[len(ctx) :]
    return ctx, tokenizer(" " + choice, add_special_tokens=False)["input_ids"]


@torch.no_grad()
def choice_scores(model, tokenizer, doc: Doc, max_len: int) -> tuple[list[float], bool]:
    """The log-likelihood of each answer choice after the prompt, and whether the prompt was cut."""
    device = next(model.parameters()).device
    rows, conts, cut = [], [], False
    for choice in doc.choices:
        ctx, cont = _continuation(tokenizer, doc.prompt, choice)
        seq = ctx + cont
        if len(seq) > max_len:
            seq, cut = seq[len(seq) - max_len :], True
        rows.append(seq)
        conts.append(len(cont))
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    attn = torch.zeros(len(rows), width, dtype=torch.long)
    for i, seq in enumerate(rows):
        ids[i, : len(seq)] = torch.tensor(seq)
        attn[i, : len(seq)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits.float()
    logp = torch.log_softmax(logits, dim=-1).cpu()
    out = []
    for i, (seq, k) in enumerate(zip(rows, conts, strict=True)):
        pos = torch.arange(len(seq) - k, len(seq))  # the continuation's tokens, each read at the token before
        out.append(float(logp[i, pos - 1, ids[i, pos]].sum()))
    return out, cut


def score_lm(model, tokenizer, docs: list[Doc], max_len: int | None = None) -> list[LMScore]:
    """Score ``model`` (a causal LM: ``model(input_ids=...).logits``) on ``docs``; one LMScore per task
    and length, in the documents' order. ``max_len``: the model's context (default: its config's)."""
    max_len = max_len or _context(model)
    groups: dict[tuple[str, int, str], list[tuple[bool, bool, float]]] = {}
    model.eval()
    for d in docs:
        scores, cut = choice_scores(model, tokenizer, d, max_len)
        best = max(range(len(scores)), key=scores.__getitem__)
        groups.setdefault((d.task, d.length, d.split), []).append((best == d.label, cut, d.chance))
    out = []
    for (task, length, split), rows in groups.items():
        n, k = len(rows), sum(ok for ok, _, _ in rows)
        low, high = wilson(k, n)
        out.append(
            LMScore(task, length, split, n, k, k / n, low, high, rows[0][2], sum(c for _, c, _ in rows))
        )
    return out


def _context(model) -> int:
    cfg = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return 2048


def check_device(device: str) -> None:
    """A device torch knows and this machine has (``cpu``, ``cuda``, ``cuda:1``, ``mps``)."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise UserError(f"bad --device {device!r}; allowed: cpu, cuda, cuda:N, mps") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {device!r}, but this machine has no CUDA device; use --device cpu")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"--device {device!r}, but this machine has no MPS device; use --device cpu")


def load_lm(path: str | Path, device: str = "cpu"):
    """(model, tokenizer) of a local Hugging Face causal LM: a folder of ``save_pretrained`` or a name in
    the local cache; nothing is downloaded, no code of the checkpoint's is run, weights from safetensors."""
    try:
        import transformers
    except ImportError:
        raise UserError(
            "eval-lm needs transformers: pip install 'statetrack[hf]' (or pip install transformers)"
        ) from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    check_device(device)
    where = str(path)
    kw = {"local_files_only": True, "trust_remote_code": False}
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, **kw)
        model = AutoModelForCausalLM.from_pretrained(where, use_safetensors=True, **kw)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"cannot load a causal language model from {where!r}: {first}; give a folder written by "
            "save_pretrained (config.json, model.safetensors, the tokenizer's files) or a model in the local "
            "Hugging Face cache"
        ) from None
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]  # transformers types .to narrowly


def eval_lm(
    path: str | Path,
    tasks: list[str],
    lengths: list[int],
    n: int = 100,
    split: str | Split = Split.TEST,
    seed: int = 0,
    device: str = "cpu",
) -> list[LMScore]:
    """Score the local checkpoint ``path`` on each task at each length (``n`` documents each, the ones
    ``export-tasks`` writes with the same arguments); the documents are checked before the model loads."""
    docs = [d for t in tasks for L in lengths for d in documents(t, L, n, split, seed)]
    model, tokenizer = load_lm(path, device)
    return score_lm(model, tokenizer, docs)


def score_text(s: LMScore) -> str:
    """One line: accuracy, interval and chance."""
    return (
        f"{s.task} at {s.length} ({s.split}): {100 * s.accuracy:.1f}% [{100 * s.low:.1f}-{100 * s.high:.1f}] "
        f"of {s.n}, chance {100 * s.chance:.1f}%: {s.judgement} chance"
        + (f"; {s.truncated} prompts cut to fit the context" if s.truncated else "")
    )
