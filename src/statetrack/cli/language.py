"""Commands of the language-modelling area: ``generate`` (text from a trained checkpoint), ``corpus``
(build a corpus, show its splits and baselines), ``export-tasks`` (the task suite as lm-evaluation-harness
tasks) and ``eval-lm`` (a pretrained Hugging Face causal LM scored on them)."""

from __future__ import annotations

import json
import sys
from operator import itemgetter

from statetrack.cli.args import add_checkpoint, add_json, checkpoint_path, parse_seed, parse_split
from statetrack.cli.output import Col, print_table, say
from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.untrusted import terminal_text


def cmd_generate(a):
    from statetrack.lm.generation import check_generation, generate
    from statetrack.tasks.base import CorpusTask
    from statetrack.training.checkpoint import load_checkpoint

    check_generation(a.tokens, a.temperature, a.top_k)  # before the checkpoint is loaded
    a.checkpoint = checkpoint_path(a)
    model, cfg, task, _ = load_checkpoint(a.checkpoint)
    if not isinstance(task, CorpusTask):
        raise UserError(
            f"checkpoint {a.checkpoint!r} was trained on task {task.name!r}, not a corpus; generate "
            "needs a language model (a task lm:stdlib, lm:synthetic, ...)"
        )
    text = generate(model, task.tokenizer, a.prompt, a.tokens, a.temperature, a.top_k, a.seed)
    if a.json:
        print(
            json.dumps(
                {
                    "checkpoint": a.checkpoint,
                    "prompt": a.prompt,
                    "continuation": text,
                    "temperature": a.temperature,
                    "top_k": a.top_k,
                    "seed": a.seed,
                }
            )
        )
    else:  # a model's bytes may hold escape sequences: shown as escapes on a terminal, as they are in a pipe
        print(terminal_text(a.prompt + text) if sys.stdout.isatty() else a.prompt + text)
    return 0


def cmd_corpus(a):
    from statetrack.lm.baselines import BASELINES, LABELS, evaluate_baselines
    from statetrack.lm.compressors import corpus_compressors
    from statetrack.lm.corpus import get_corpus

    if a.seed < 0:
        raise UserError(f"bad corpus seed {a.seed}; allowed: an integer >= 0")
    corpus = get_corpus(a.name, a.seed, a.tokenizer)
    d = corpus.describe()
    base = evaluate_baselines(corpus, [a.length], a.eval_tokens)
    d["baselines"] = {
        b: {
            "bpb": base[b][0].bpb,
            "answer_bpb": base[b][0].answer_bpb,
            "length": a.length,
            "tokens": base[b][0].tokens,
        }
        for b in BASELINES
    }
    comp = corpus_compressors(corpus)
    d["compressors"] = {
        k: {
            "label": c.label,
            "bpb": c.bpb,
            "compressed_bytes": c.compressed_bytes,
            "test_bytes": c.test_bytes,
            "context_bytes": c.context_bytes,
        }
        for k, c in comp.items()
    }
    if a.json:
        print(json.dumps(d))
        return 0
    splits = list(d["splits"].items())
    print_table(
        f"corpus {d['corpus']} (seed {d['seed']}, {d['tokenizer']['tokenizer']} tokens, python "
        f"{d['python']}): {d['folder']}",
        [
            Col("split", lambda r: r[0]),
            Col("documents", lambda r: f"{r[1]['documents']:,}", "right"),
            Col("bytes", lambda r: f"{r[1]['bytes']:,}", "right"),
            Col("tokens", lambda r: f"{r[1]['tokens']:,}", "right"),
            Col("sha256 (token file)", lambda r: d["sha256"][r[0]][:16] + "...", optional=True),
        ],
        splits,
    )
    for b in BASELINES:
        x = d["baselines"][b]
        ans = "" if x["answer_bpb"] is None else f", answer bytes {x['answer_bpb']:.3f}"
        say(
            f"{LABELS[b]}: {x['bpb']:.3f} bits per byte on the test split "
            f"({x['tokens']:,} tokens in windows of {a.length}{ans})"
        )
    for c in comp.values():
        ctx = f", after the train split's last {c.context_bytes:,} bytes" if c.context_bytes else ""
        say(
            f"{c.label}: {c.bpb:.3f} bits per byte on the test split ({c.test_bytes:,} bytes as one stream{ctx})"
        )
    return 0


def print_lm_metrics(title: str, lm, con=None) -> None:
    """A language model's metrics per context length (train, eval): bpb on the test split."""
    print_table(
        title,
        [
            Col("length", lambda m: str(m.length), "right"),
            Col("bpb", lambda m: f"{m.bpb:.3f} ±{m.bpb_se:.3f}", "right"),
            Col("loss (nats/token)", lambda m: f"{m.loss:.3f}", "right", optional=True),
            Col("token acc", lambda m: f"{100 * m.token_accuracy:.1f}", "right"),
            Col("answer bpb", lambda m: "-" if m.answer_bpb is None else f"{m.answer_bpb:.3f}", "right"),
            Col("windows x length", lambda m: f"{m.windows} x {m.length}", "right", optional=True),
        ],
        lm,
        caption="bits per byte of next-token prediction on the test split (± standard error over the windows); "
        "answer bpb: on the synthetic corpus's state-dependent bytes",
        con=con,
    )


def with_lm(rows: list[dict], lm) -> list[dict]:
    """JSON rows per length, with the LM metrics of that length added (bpb, its standard error, loss,
    answer bpb, the position buckets)."""
    by = {m.length: m for m in lm}
    return [
        {
            **r,
            **(
                {k: getattr(by[r["length"]], k) for k in ("bpb", "bpb_se", "loss", "answer_bpb", "buckets")}
                if r.get("length") in by
                else {}
            ),
        }
        for r in rows
    ]


def _task_list(text: str) -> list[str]:
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    if not tasks:
        raise UserError("empty --tasks; give task names separated by commas, e.g. parity,group:S3,tomita:3")
    return tasks


def cmd_export_tasks(a):
    from statetrack.cli.args import parse_lengths
    from statetrack.tasks.harness import GROUP, export_tasks

    rows = export_tasks(_task_list(a.tasks), parse_lengths(a.lengths), a.n, a.out, a.split, a.seed)
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print_table(
        "lm-evaluation-harness tasks (multiple choice, metric acc)",
        [
            Col("task file", itemgetter("name")),
            Col("documents", lambda r: str(r["documents"]), "right"),
            Col("chance", lambda r: f"{100 * r['chance']:.1f}%", "right"),
        ],
        rows,
    )
    say(
        f"wrote {len(rows)} task files and the group {GROUP!r} in {a.out}; run them with: lm_eval --model hf "
        f"--model_args pretrained=MODEL --include_path {a.out} --tasks {GROUP}"
    )
    return 0


def cmd_eval_lm(a):
    from statetrack.cli.args import parse_lengths
    from statetrack.training.pretrained import eval_lm, score_text

    scores = eval_lm(a.model, _task_list(a.tasks), parse_lengths(a.lengths), a.n, a.split, a.seed, a.device)
    if a.json:
        for s in scores:
            print(json.dumps({"model": a.model, **s.as_dict()}))
        return 0
    for s in scores:
        say(score_text(s))
    return 0


def add_suite_options(q, n: int) -> None:
    """The documents of the task suite: tasks, lengths, documents per length, draw, seed."""
    q.add_argument(
        "--tasks",
        default="parity,modarith:5,group:S3,group:A5,tomita:3",
        help="tasks, comma-separated (any of 'statetrack tasks')",
    )
    q.add_argument("--lengths", default="16,64", help="lengths, comma-separated (default 16,64)")
    q.add_argument("--n", type=int, default=n, help=f"documents per task and length (default {n})")
    q.add_argument(
        "--split",
        type=parse_split,
        default=Split.TEST,
        choices=[Split.TEST, Split.LONG],
        help="the draw: test or long (long-range)",
    )
    q.add_argument("--seed", type=parse_seed, default=0, help="the draw's seed (default 0, the evaluation's)")


def add_commands(sub) -> None:
    add_pretrained(sub)
    add_lm(sub)


def add_pretrained(sub) -> None:
    """``export-tasks`` and ``eval-lm``: the task suite for pretrained language models."""
    q = sub.add_parser(
        "export-tasks",
        help="write the task suite as lm-evaluation-harness tasks (jsonl + yaml, chance stated)",
    )
    add_suite_options(q, 200)
    q.add_argument("--out", default="runs/lm-eval-tasks", help="folder for the task files")
    add_json(q, "one object per task file")
    q.set_defaults(fn=cmd_export_tasks)

    q = sub.add_parser(
        "eval-lm", help="score a local Hugging Face causal LM on the task suite by answer likelihood"
    )
    q.add_argument("model", help="a folder written by save_pretrained, or a model in the local HF cache")
    add_suite_options(q, 100)
    q.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, ... (default cpu)")
    add_json(q, "one object per task and length")
    q.set_defaults(fn=cmd_eval_lm)


def add_lm(sub) -> None:
    """``generate`` and ``corpus``: language models trained here."""
    q = sub.add_parser(
        "generate", help="continue a prompt with a trained language model (a checkpoint of an lm:... run)"
    )
    add_checkpoint(q, "a checkpoint (.safetensors) of an lm:... run")
    q.add_argument("--prompt", default="", help="text to continue (default: empty, a new document)")
    q.add_argument(
        "--tokens", type=int, default=200, help="tokens to generate (default 200; stops early at EOS)"
    )
    q.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature; 0 = greedy (default 0.8)"
    )
    q.add_argument("--top-k", type=int, default=None, help="sample among the K most probable tokens only")
    q.add_argument("--seed", type=parse_seed, default=0, help="sampling seed (default 0)")
    add_json(q, "one object with the continuation")
    q.set_defaults(fn=cmd_generate)

    q = sub.add_parser(
        "corpus", help="build a language-modelling corpus (cached) and show its splits and baselines"
    )
    q.add_argument("name", help="the corpus: stdlib, synthetic or traces")
    q.add_argument("--seed", type=parse_seed, default=0, help="the split's seed (default 0)")
    q.add_argument("--tokenizer", default="bytes", help="bytes (default), bpe or bpe=N (needs tokenizers)")
    q.add_argument(
        "--length", type=int, default=128, help="window length the baselines are scored at (default 128)"
    )
    q.add_argument("--eval-tokens", type=int, default=65536, help="test tokens the baselines are scored on")
    add_json(q, "one object")
    q.set_defaults(fn=cmd_corpus)
