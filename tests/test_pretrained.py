"""The task suite for pretrained language models: lm-evaluation-harness task files (checked against the
harness's documented task fields), and eval-lm on a tiny randomly initialised Hugging Face model built here
(nothing is downloaded): its answer likelihoods against a float64 one-sequence-at-a-time reference, and its
accuracy near chance."""

import ast
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from statetrack.tasks import draws, get_task
from statetrack.tasks.harness import GROUP, documents, export_tasks

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the model is built here

#: the fields of lm-evaluation-harness's TaskConfig (lm_eval/api/task.py; docs/task_guide.md), and of a
#: group file (lm_eval/api/group.py, GroupConfig)
TASK_CONFIG = {
    "task", "task_alias", "tag", "custom_dataset", "dataset_path", "dataset_name", "dataset_kwargs",
    "training_split", "validation_split", "test_split", "fewshot_split", "process_docs", "doc_to_text",
    "doc_to_target", "doc_to_image", "doc_to_audio", "unsafe_code", "doc_to_choice", "process_results",
    "use_prompt", "description", "target_delimiter", "fewshot_delimiter", "fewshot_config", "num_fewshot",
    "metric_list", "output_type", "generation_kwargs", "repeats", "filter_list", "should_decontaminate",
    "doc_to_decontamination_query", "gen_prefix", "metadata",
}  # fmt: skip
GROUP_CONFIG = {"group", "group_alias", "task", "aggregate_metric_list", "metadata"}
OUTPUT_TYPES = {"loglikelihood", "multiple_choice", "loglikelihood_rolling", "generate_until"}
TASKS = ["parity", "group:S3", "tomita:3", "modarith:5"]


def _render(template: str, doc: dict) -> str:
    """A '{{field}}' template of the harness (Jinja) on one document."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: str(doc[m[1]]), template)


def test_exported_tasks_have_the_harness_task_format(tmp_path):
    rows = export_tasks(TASKS, [8, 16], 40, tmp_path / "tasks")
    assert len(rows) == len(TASKS) * 2
    for r in rows:
        config = yaml.safe_load(Path(r["yaml"]).read_text())
        assert set(config) <= TASK_CONFIG
        assert config["output_type"] in OUTPUT_TYPES and config["output_type"] == "multiple_choice"
        assert config["dataset_path"] == "json" and config["test_split"] == "test"
        assert config["dataset_kwargs"]["data_files"]["test"] == r["jsonl"] and os.path.isabs(r["jsonl"])
        for m in config["metric_list"]:
            assert set(m) <= {"metric", "aggregation", "higher_is_better"} and m["metric"] == "acc"
        lines = Path(r["jsonl"]).read_text().splitlines()
        assert len(lines) == 40
        labels = []
        for line in lines:
            doc = json.loads(line)
            # as the harness reads a document: the prompt, the choices (a list literal), the target (an index)
            assert _render(config["doc_to_text"], doc) == doc["prompt"]
            choice = ast.literal_eval(_render(config["doc_to_choice"], doc))
            target = ast.literal_eval(_render(config["doc_to_target"], doc))
            assert choice == doc["choices"] and 0 <= target < len(choice)
            assert doc["prompt"].endswith("Label:") and doc["inputs"] in doc["prompt"]
            labels.append(target)
        # chance stated: the majority share of the final label in that draw at that length
        dist, _ = draws.label_distribution(get_task(r["task"]), "test", r["length"])
        assert config["metadata"]["chance"] == pytest.approx(np.max(dist) / np.sum(dist))
        assert r["chance"] == config["metadata"]["chance"]
        # the documents are the test draw: the answers agree with the task's own final labels
        b = draws.batch(get_task(r["task"]), "test", draws.test_rng(0, "test", r["length"]), 40, r["length"])
        assert labels == b.targets[:, -1].tolist()
    group = yaml.safe_load((tmp_path / "tasks" / f"{GROUP}.yaml").read_text())
    assert set(group) <= GROUP_CONFIG and group["group"] == GROUP
    assert group["task"] == [r["name"] for r in rows]


def test_a_bad_task_writes_nothing(tmp_path):
    from statetrack.errors import UserError

    with pytest.raises(UserError, match="tomita"):
        export_tasks(["parity", "tomita:99"], [8], 5, tmp_path / "tasks")
    assert not (tmp_path / "tasks").exists()


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A GPT-2 of one layer with random weights and a word-level tokenizer of the documents' words, saved
    as a local checkpoint (safetensors)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {w for t in ("parity", "group:S3") for d in documents(t, 8, 50) for w in d.prompt.split()}
    words |= {w for t in ("parity", "group:S3") for c in documents(t, 8, 1)[0].choices for w in c.split()}
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(words))}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        n_layer=1,
        n_head=2,
        n_embd=16,
        vocab_size=len(vocab),
        n_positions=128,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    path = tmp_path_factory.mktemp("tiny-gpt2")
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path, model, tokenizer


def test_answer_likelihoods_match_a_float64_reference(tiny_lm):
    from statetrack.training.pretrained import _continuation, choice_scores

    _, model, tokenizer = tiny_lm
    ref = model.double()
    try:
        for doc in documents("group:S3", 8, 3):
            fast, cut = choice_scores(model.float(), tokenizer, doc, 128)
            assert not cut
            for choice, got in zip(doc.choices, fast, strict=True):
                ctx, cont = _continuation(tokenizer, doc.prompt, choice)
                # the continuation one token at a time, each from the whole prefix before it, in float64
                want = 0.0
                for j in range(len(cont)):
                    with torch.no_grad():
                        logits = ref.double()(input_ids=torch.tensor([ctx + cont[:j]])).logits[0, -1]
                    want += float(torch.log_softmax(logits, -1)[cont[j]])
                assert got == pytest.approx(want, abs=1e-4)
    finally:
        model.float()


def test_eval_lm_scores_a_tiny_random_model_near_chance(tiny_lm):
    from statetrack.training.pretrained import eval_lm

    path, _, _ = tiny_lm
    scores = eval_lm(path, ["parity", "group:S3"], [8], n=60)
    assert [(s.task, s.length, s.n) for s in scores] == [("parity", 8, 60), ("group:S3", 8, 60)]
    for s in scores:
        assert s.chance == pytest.approx({"parity": 1 / 2, "group:S3": 1 / 6}[s.task])
        # random weights know nothing of the task: near chance (the draw balances the labels)
        assert abs(s.accuracy - s.chance) < 0.25
        assert s.low <= s.accuracy <= s.high and s.truncated == 0


def test_eval_lm_command(tiny_lm, capsys):
    from statetrack.cli import main

    path, _, _ = tiny_lm
    args = ["eval-lm", str(path), "--tasks", "parity", "--lengths", "8,9", "--n", "6", "--json"]
    assert main(args) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["model"], r["length"], r["n"]) for r in rows] == [(str(path), 8, 6), (str(path), 9, 6)]
    assert all(r["judgement"] in ("above", "at", "below") for r in rows)
    assert main(args[:-1]) == 0  # the table: accuracy beside chance, per length
    out = capsys.readouterr().out
    assert "parity at 8 (test):" in out and "chance 50.0%" in out


def test_eval_lm_of_a_missing_checkpoint_is_one_line(tmp_path):
    pytest.importorskip("transformers")
    from statetrack.errors import UserError
    from statetrack.training.pretrained import eval_lm

    with pytest.raises(UserError, match="cannot load a causal language model .* save_pretrained") as e:
        eval_lm(tmp_path / "nothing", ["parity"], [8], n=2)
    assert "\n" not in str(e.value)


def test_eval_lm_on_a_device_this_machine_lacks_is_one_line(tiny_lm):
    from statetrack.errors import UserError
    from statetrack.training.pretrained import eval_lm

    bad = "cuda" if not torch.cuda.is_available() else "nodevice"
    with pytest.raises(UserError, match="--device"):
        eval_lm(tiny_lm[0], ["parity"], [8], n=2, device=bad)
