"""Commands of the language-modelling area: ``generate`` (text from a trained checkpoint) and ``corpus``
(build a corpus, show its splits and baselines)."""

from __future__ import annotations

import json
import sys

from statetrack.cli.args import add_checkpoint, add_json, checkpoint_path, parse_seed
from statetrack.cli.output import Col, print_table, say
from statetrack.errors import UserError
from statetrack.untrusted import terminal_text


def cmd_generate(a):
    from statetrack.lm.sampling import check_generation, generate
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


def add_commands(sub) -> None:
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
