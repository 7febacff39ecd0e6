"""Language modelling: corpora and their splits, tokens, the lm task, metrics, baselines, generation."""

from __future__ import annotations

import hashlib
import json
import math
import random
import sqlite3

import numpy as np
import pytest
import torch
from torch import nn

from statetrack.cli import main
from statetrack.errors import UserError
from statetrack.lm import baselines as bl
from statetrack.lm import synthetic, traces
from statetrack.lm.corpus import SPLITS, assign_splits, get_corpus, stdlib_files
from statetrack.lm.metrics import evaluate_lm, position_buckets, summarize
from statetrack.lm.synthetic import program
from statetrack.lm.tokens import BOS, EOS, ByteTokenizer
from statetrack.lm.traces import session
from statetrack.tasks import get_task
from statetrack.tasks.base import CorpusTask
from statetrack.tasks.corpus_tasks import LMTask
from statetrack.training.evaluation import _WATCH, watched

V = 259


def _fake_stdlib(root):
    """A small folder laid out like a standard library, with files the rules exclude."""
    rng = random.Random(0)
    for i in range(40):
        sub = root / ("pkg" if i % 3 else "") / f"mod{i:02d}.py"
        sub.parent.mkdir(parents=True, exist_ok=True)
        n = rng.randrange(5, 60)
        sub.write_text("".join(f"def f{j}(x):\n    return x + {rng.randrange(100)}\n" for j in range(n)))
    for d in (
        "site-packages/thirdparty",
        "test",
        "idlelib/idle_test",
        "encodings",
        "pydoc_data",
        "config-3.11-x",
    ):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "excluded.py").write_text("x = 1\n")
    (root / "_sysconfigdata_x.py").write_text("build = {}\n")
    (root / "latin1.py").write_bytes(b"# coding: latin-1\ns = '\xe9'\n")
    return root


@pytest.fixture(scope="module")
def fake_source(tmp_path_factory):
    return _fake_stdlib(tmp_path_factory.mktemp("stdlib"))


# -- corpora and splits -----------------------------------------------------------------------------
def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_split_reproducible_from_its_seed(fake_source, tmp_path):
    a = get_corpus("stdlib", 0, root=tmp_path / "a", source=fake_source)
    b = get_corpus("stdlib", 0, root=tmp_path / "b", source=fake_source)
    for s in SPLITS:
        ea, eb = a.manifest["splits"][s], b.manifest["splits"][s]
        assert ea["files"] == eb["files"] and ea["sha256"] == eb["sha256"]  # same files, same bytes
        assert (a.folder / f"{s}.u16").read_bytes() == (b.folder / f"{s}.u16").read_bytes()
        assert _digest(a.folder / f"{s}.u16") == ea["sha256"]  # the manifest's hash is the file's
    c = get_corpus("stdlib", 1, root=tmp_path / "a", source=fake_source)
    assert c.manifest["splits"]["test"]["files"] != a.manifest["splits"]["test"]["files"]
    files = [f for s in SPLITS for f in a.manifest["splits"][s]["files"]]
    assert sorted(files) == sorted(set(files)) and len(files) == 40  # a partition of the kept files
    assert not any(f.endswith("excluded.py") or "sysconfigdata" in f or f == "latin1.py" for f in files)
    assert a.manifest["excluded"]["not UTF-8"] == 1 and a.manifest["excluded"]["site-packages"] == 1
    # each split's token file: BOS + document + EOS, document by document
    split = a.split("test")
    toks = np.asarray(split.tokens)
    assert (
        toks[0] == BOS
        and toks[-1] == EOS
        and (toks == BOS).sum() == len(a.manifest["splits"]["test"]["files"])
    )
    first = a.manifest["splits"]["test"]["files"][0]
    assert next(a.documents("test")) == (fake_source / first).read_bytes()


def test_assign_splits_by_bytes():
    sizes = [1000 + 37 * i for i in range(400)]
    s = assign_splits(sizes, seed=3)
    frac = {k: sum(x for x, t in zip(sizes, s, strict=True) if t == k) / sum(sizes) for k in SPLITS}
    assert 0.05 <= frac["test"] < 0.06 and 0.05 <= frac["validation"] < 0.06 and frac["train"] > 0.88
    assert s == assign_splits(sizes, seed=3) and s != assign_splits(sizes, seed=4)


def test_stdlib_rules_on_this_interpreter():
    files, dropped = stdlib_files()
    assert len(files) > 100 and files == sorted(files, key=lambda p: p.as_posix())
    parts = {p for f in files for p in f.parts}
    assert not parts & {"site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data"}
    assert "os.py" in {f.as_posix() for f in files}


def test_corpus_errors(tmp_path):
    with pytest.raises(UserError, match="unknown corpus 'wiki'; allowed: stdlib, synthetic"):
        get_corpus("wiki", root=tmp_path)
    with pytest.raises(UserError, match="bad corpus seed"):
        get_corpus("stdlib", -1, root=tmp_path)
    with pytest.raises(UserError, match="unknown option 'words' for task family 'lm'; allowed: bytes, bpe"):
        get_task("lm:stdlib/words")
    with pytest.raises(UserError, match="unknown tokenizer 'bpe=12'"):
        get_task("lm:stdlib/bpe=12")
    with pytest.raises(UserError, match="unknown option 'fast'"):
        get_task("lm:synthetic/fast")


# -- tokens -----------------------------------------------------------------------------------------
def test_byte_tokenizer_round_trip():
    tok = ByteTokenizer()
    data = bytes(range(256)) + "é ≠ λ\n".encode()
    ids = tok.encode(data)
    assert tok.vocab_size == V and ids.max() < 256 and tok.decode_bytes(ids) == data
    assert tok.decode_bytes(np.concatenate([[BOS], ids, [EOS]])) == data  # specials are not text
    assert tok.decode(tok.encode("def f(x):\n")) == "def f(x):\n"


def test_bpe_tokenizer(fake_source, tmp_path):
    pytest.importorskip("tokenizers")
    c = get_corpus("stdlib", 0, tokenizer="bpe=300", root=tmp_path, source=fake_source)
    tok = c.tokenizer
    assert tok.vocab_size == 300 and c.suffix == "bpe300"
    text = (fake_source / "pkg" / "mod01.py").read_text()
    ids = tok.encode(text)
    assert len(ids) < len(text.encode()) and tok.decode(ids) == text
    assert int(tok.token_bytes[ids].sum()) == len(text.encode())  # bits per byte stay exact
    split = c.split("train")
    assert split.tokens.dtype == np.uint16 and split.tokens[0] == tok.bos


# -- the generated corpora: answers far from their decisive statement -------------------------------
def _check_answers(data: bytes, answers, far: int, alphabet: bytes):
    for a in answers:
        assert data[a.offset] in alphabet and a.offset - a.decisive >= far
        assert data[a.decisive + 1] == ord("\n")  # the decisive statement ends there


def test_synthetic_programs_run_and_answers_need_far_state():
    r = random.Random(0)
    kinds = []
    for _ in range(60):
        data, answers = program(r)
        exec(compile(data, "<program>", "exec"), {})  # every assertion holds
        _check_answers(data, answers, synthetic.FAR, b"0123456789TF")
        text = data.decode()
        for a in answers:
            assert text[a.offset - 3 : a.offset] in ("== ", "is ")
            assert a.k == (2 if text[a.offset] in "TF" else 10)
            # nothing between the decisive statement and the answer reveals the value: no assignment of a
            # constant to, and no check of, the answer's variable (followed back through the swaps)
            var = text[a.offset - 5] if text[a.offset - 3 : a.offset] == "== " else "p"
            for line in reversed(text[a.decisive + 2 : text.rfind("\n", 0, a.offset) + 1].splitlines()):
                if line.startswith(f"{var}, ") or (", " + var + " =") in line:  # a swap moves the value
                    x, y = line.split(" = ")[0].split(", ")
                    var = y if var == x else x
                    continue
                assert not line.startswith(f"assert {var} ")
                assert not (line.startswith(f"{var} = ") and "not" not in line and "+" not in line)
        kinds += [a.k for a in answers]
    assert 0.15 < kinds.count(2) / len(kinds) < 0.4


def test_traces_run_as_doctests_and_answers_need_far_state():
    import doctest

    r = random.Random(0)
    for _ in range(40):
        data, answers = session(r)
        test = doctest.DocTestParser().get_doctest(data.decode(), {}, "session", None, 0)
        assert (
            doctest.DocTestRunner().run(test, out=lambda _s: None).failed == 0
        )  # every printed list is right
        _check_answers(data, answers, traces.FAR, b"012")
        assert [a.k for a in answers] == [3, 2] * (len(answers) // 2)
        for a in answers[::2]:  # the first digit of each print; no other reveal since the decisive one
            between = data[a.decisive + 2 : a.offset].decode()
            lines = between.split("\n")
            assert lines[-2:] == [">>> s", "["] and not any(
                x.startswith(("[", ">>> s = [")) for x in lines[:-2]
            )


@pytest.mark.parametrize("name", ["synthetic", "traces"])
def test_generated_corpus_files(name):
    c = get_corpus(name, 0)  # the test run's cache (conftest), shared with the training tests
    split = c.split("validation")
    toks, k = np.asarray(split.tokens), np.asarray(split.answers)
    dist = np.asarray(split.distance)
    assert len(toks) == len(k) == len(dist) and 0.01 < (k > 0).mean() < 0.05
    assert set(k[k > 0].tolist()) <= {2, 3, 10} and ((dist > 0) == (k > 0)).all()
    far = synthetic.FAR if name == "synthetic" else traces.FAR
    assert dist[k > 0].min() >= far
    # the token at the decisive position ends a statement, in the same document
    offs = np.r_[c.offsets("validation"), len(toks)]
    for i in np.flatnonzero(k)[:200]:
        doc = np.searchsorted(offs, i, side="right") - 1
        assert toks[i + 1 - dist[i]] == ord("\n") and i - dist[i] >= offs[doc]


def test_answer_buckets_and_the_state_blind_level():
    from statetrack.lm.answers import answer_buckets, blind_level, bucket_summary, merge_buckets, wilson

    L = 64
    k = np.zeros((2, L), int)
    dist = np.zeros((2, L), int)
    k[0, 40], dist[0, 40] = 10, 20  # decisive statement at position 40 - 20 + 1 = 21: in context
    k[0, 10], dist[0, 10] = 2, 30  # decisive statement before the window: outside
    k[1, 63], dist[1, 63] = 4, 40  # in context, bucket 32-63
    nats = np.full((2, L), math.log(2))  # one bit per token
    hits = np.zeros((2, L), bool)
    hits[1, 63] = True
    bs = answer_buckets(nats, hits, k, dist)
    assert [b["label"] for b in bs] == ["16-31", "32-63", "outside"]
    assert [b["n"] for b in bs] == [1, 1, 1] and [b["hits"] for b in bs] == [0, 1, 0]
    assert blind_level(bs) == pytest.approx((math.log2(10) + 1 + 2) / 3)
    inside = merge_buckets(bs, lambda b: b["hi"] is not None)
    s = bucket_summary(inside)
    assert s["n"] == 2 and s["bpb"] == 1 and s["accuracy"] == 0.5
    assert s["blind_bpb"] == pytest.approx((math.log2(10) + 2) / 2) and s["blind_accuracy"] == pytest.approx(
        0.175
    )
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi and wilson(0, 10)[0] == 0


def test_a_state_blind_predictor_scores_the_blind_level_exactly():
    """The uniform guess among the k values of each answer pays log2 k: its answer bpb is the level."""
    c = get_corpus("traces", 0)
    from statetrack.lm.answers import blind_level
    from statetrack.lm.metrics import eval_windows

    toks, (k, dist) = eval_windows(c.split("test"), 128, None, 0)
    nats = np.where(k > 0, np.log(np.maximum(k, 1)), 0.1)
    m = summarize(nats, np.zeros(k.shape, bool), np.ones(k.shape, int), (k, dist))
    assert m.answer_bpb == pytest.approx(blind_level(m.answer_buckets))


# -- the lm task ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fake_task(fake_source, tmp_path_factory):
    corpus = get_corpus("stdlib", 0, root=tmp_path_factory.mktemp("cache"), source=fake_source)
    return LMTask("stdlib", _corpus=corpus)


def test_lm_batches_are_shifted_windows(fake_task):
    t = fake_task
    assert isinstance(t, CorpusTask) and t.num_classes == t.vocab_size == V and t.name == "lm:stdlib"
    b = t.sample_batch(np.random.default_rng(0), 8, 32)
    assert b.inputs.shape == (8, 32) and b.mask.all()
    assert (b.inputs[:, 1:] == b.targets[:, :-1]).all()  # targets = inputs shifted by one
    toks = np.asarray(t.split.tokens)
    for row_in, row_out in zip(b.inputs, b.targets, strict=True):  # each row is a window of the train file
        window = np.concatenate([row_in, row_out[-1:]])
        starts = np.flatnonzero(toks[: len(toks) - 32] == window[0])
        assert any((toks[s : s + 33] == window).all() for s in starts)
    assert t.heldout("test").split.path.name == "test.u16"
    assert t.heldout("validation").split_name == "validation"
    assert 0.05 < t.chance_level() < 0.5  # the most frequent byte's rate (a space, here)


class _Spy:
    """Stands for a memmap: records the slices read, refuses to be read whole."""

    def __init__(self, mm):
        self.mm, self.read = mm, []

    def __len__(self):
        return len(self.mm)

    def __getitem__(self, k):
        assert isinstance(k, slice), f"read {k!r}"
        self.read.append(k.stop - k.start)
        return self.mm[k]

    def __array__(self, *a, **kw):
        raise AssertionError("the whole token file was read")


def test_windows_are_read_from_a_memmap_not_loaded(fake_task):
    t = fake_task.heldout("train")
    assert isinstance(t.split.tokens, np.memmap)
    spy = _Spy(t.split.tokens)
    t.split.tokens = spy
    t.sample_batch(np.random.default_rng(1), 5, 20)
    assert spy.read == [21] * 5  # five windows of 21 tokens, nothing else


# -- metrics ----------------------------------------------------------------------------------------
class _Uniform(nn.Module):
    num_classes = V

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def init_state(self, _batch):
        return None

    def forward(self, x, state=None):
        return torch.zeros(*x.shape, V) + 0 * self.w, state


def test_uniform_predictor_is_log2_vocab_bits(fake_task):
    split = fake_task.heldout("test").split
    [m] = evaluate_lm(_Uniform(), split, fake_task.tokenizer.token_bytes, [64], tokens=640, batch_size=4)
    assert m.windows == 10 and m.tokens == 640
    assert m.bpb == pytest.approx(math.log2(V), rel=1e-6)  # float32 logits
    assert all(b["bpb"] == pytest.approx(math.log2(V)) for b in m.buckets)
    assert [(b["lo"], b["hi"]) for b in m.buckets] == position_buckets(64)


def test_a_long_lm_evaluation_reports_its_tokens_as_it_goes(fake_task):
    """The progress lines of ``eval`` and of a run's evaluation (tokens, rate, ETA) read these calls: one
    per chunk, the tokens done rising to all of them, for every length."""
    split = fake_task.heldout("test").split
    calls = []
    watch = lambda L, done, total: calls.append((L, done, total))  # noqa: E731
    evaluate_lm(
        _Uniform(),
        split,
        fake_task.tokenizer.token_bytes,
        [16, 64],
        tokens=640,
        batch_size=4,
        chunk=8,
        watch=watch,
    )
    for L in (16, 64):
        mine = [c for c in calls if c[0] == L]
        done = [d for _, d, _ in mine]
        assert len(mine) > 2 and done == sorted(done) and done[-1] == mine[-1][2] >= 640
    with watched(watch):
        assert _WATCH.get() is watch  # what evaluate_run hands to evaluate_lm


class _Always(_Uniform):
    """Answers token ``c`` at every position."""

    def __init__(self, c: int):
        super().__init__()
        self.c = c

    def forward(self, x, state=None):
        out = torch.full((*x.shape, V), -10.0) + 0 * self.w
        out[..., self.c] = 10.0
        return out, state


def test_a_constant_answer_scores_chance(fake_task):
    """An LM's length metrics: chance is the most frequent target's share among the tokens scored, so
    the best constant answer has accuracy = chance and scaled accuracy 0, and any other constant less."""
    from statetrack.config import EvalConfig
    from statetrack.training.evaluation import evaluate_run

    cfg = EvalConfig(lengths=[16, 64], batch_size=4, tokens=640)
    [m16, m64], _ = evaluate_run(_Uniform(), fake_task, cfg)
    for n, m in ((16, m16), (64, m64)):
        split = fake_task.heldout("test").split
        from statetrack.lm.metrics import eval_windows, n_windows_for

        windows, _ = eval_windows(split, n, n_windows_for(n, 640, 4), cfg.seed)
        top = int(np.bincount(windows[:, -1]).argmax())
        [best], _ = evaluate_run(_Always(top), fake_task, EvalConfig(lengths=[n], batch_size=4, tokens=640))
        [other], _ = evaluate_run(
            _Always((top + 1) % V), fake_task, EvalConfig(lengths=[n], batch_size=4, tokens=640)
        )
        assert best.accuracy == best.chance == m.chance and best.scaled_accuracy == 0.0
        assert other.accuracy <= other.chance and other.scaled_accuracy <= 0.0
        assert 0 < m.token_majority < 1


def test_bpb_counts_bytes_not_tokens():
    nats = np.full((2, 4), math.log(2))  # one bit per token
    m1 = summarize(nats, np.zeros((2, 4), bool), np.ones((2, 4), int))
    m2 = summarize(nats, np.zeros((2, 4), bool), np.full((2, 4), 2))  # tokens of two bytes each
    assert (
        m1.bpb == pytest.approx(1.0)
        and m2.bpb == pytest.approx(0.5)
        and m1.loss == pytest.approx(math.log(2))
    )
    assert position_buckets(8) == [(0, 1), (1, 2), (2, 4), (4, 8)]
    assert position_buckets(6) == [(0, 1), (1, 2), (2, 4), (4, 6)]


def test_baselines_against_a_hand_computation(monkeypatch):
    train = np.array([0, 1, 0, 1, 1, 2], dtype=np.uint16)
    for chunk in (2, 3, 100):  # pairs across chunk boundaries are counted once
        monkeypatch.setattr(bl, "CHUNK", chunk)
        c = bl.count_ngrams(train, 3)
        assert c.unigram.tolist() == [2, 3, 1]
        pairs = {
            (code // 3, code % 3): n for code, n in zip(c.codes.tolist(), c.pair_counts.tolist(), strict=True)
        }
        assert pairs == {(0, 1): 2, (1, 0): 1, (1, 1): 1, (1, 2): 1}
        assert c.prev.tolist() == [2, 3, 0]
    w = np.array([[1, 0, 2, 2]])  # targets 0, 2, 2 after 1, 0, 2
    uni = bl.baseline_nats(c, w, "unigram")
    assert np.allclose(uni, -np.log([[(2 + 1) / 9, (1 + 1) / 9, (1 + 1) / 9]]))
    bi = bl.baseline_nats(c, w, "bigram")
    assert np.allclose(bi, -np.log([[(1 + 1) / (3 + 3), (0 + 1) / (2 + 3), (0 + 1) / (0 + 3)]]))
    assert bl.baseline_hits(c, w, "bigram").tolist() == [
        [False, False, False]
    ]  # argmax: 1->1 (tie by count), 0->1


@pytest.mark.slow  # xz -9e over a real corpus's test split
def test_compressor_baselines(capsys):
    import bz2
    import gzip
    import lzma

    from statetrack.lm import compressors

    text = b"".join(b"def f%d(x):\n    return x + %d\n" % (i, i * i) for i in range(300))
    train = b"".join(b"def f%d(x):\n    return x + %d\n" % (i, i * i) for i in range(300, 3000))
    res = compressors.compressed_sizes(text, train)
    assert res["gzip"].compressed_bytes == len(gzip.compress(text, 9, mtime=0))
    assert res["bz2"].compressed_bytes == len(bz2.compress(text, 9))
    assert res["xz"].compressed_bytes == len(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME))
    assert (
        res["xz_train"].context_bytes == len(train) and res["xz_train"].bpb < res["xz"].bpb
    )  # the train split helps
    assert res["gzip"].bpb == pytest.approx(8 * res["gzip"].compressed_bytes / len(text))
    assert "xz_train" not in compressors.compressed_sizes(text)
    # on a corpus: the test split's bytes, cached in its folder, and printed by `statetrack corpus`
    assert main(["corpus", "traces", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    corpus = get_corpus("traces", 0)
    test = b"".join(corpus.documents("test"))
    assert d["compressors"]["gzip"]["test_bytes"] == len(test) == d["splits"]["test"]["bytes"]
    assert d["compressors"]["gzip"]["compressed_bytes"] == len(gzip.compress(test, 9, mtime=0))
    cache = corpus.folder / compressors.CACHE
    assert cache.is_file()
    stamp = cache.stat().st_mtime_ns
    assert compressors.corpus_compressors(corpus)["xz"].bpb == d["compressors"]["xz"]["bpb"]
    assert cache.stat().st_mtime_ns == stamp  # read back, not computed again


# -- training, the store, generation ----------------------------------------------------------------
LM_TRAIN = [
    "train",
    "--task",
    "lm:synthetic",
    "--layers",
    "lstm",
    "--d-model",
    "16",
    "--d-state",
    "32",
    "--steps",
    "40",
    "--eval-every",
    "20",
    "--train-lengths",
    "32",
    "--test-lengths",
    "32,64",
    "--batch-size",
    "16",
    "--eval-batch",
    "8",
    "--lr",
    "0.01",
]


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("lmrun") / "runs" / "lm.db")
    assert main(LM_TRAIN + ["--db", db, "--json"]) == 0
    from statetrack.runs.store import Store

    r = Store(db).runs()[0]
    return db, r


def test_eval_of_an_lm_checkpoint_scores_the_test_split(lm_run, capsys):
    db, r = lm_run
    assert main(["eval", r.checkpoint, "--lengths", "32,128", "--tokens", "512", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["length"] for x in rows] == [32, 128] and all(0 < x["bpb"] < math.log2(V) for x in rows)
    assert rows[0]["buckets"][-1]["hi"] == 32
    assert main(["eval", r.checkpoint, "--lengths", "32", "--tokens", "512"]) == 0
    assert "bpb" in capsys.readouterr().out


def test_rerun_of_an_lm_run_compares_its_bpb(lm_run, capsys):
    db, r = lm_run
    assert main(["rerun", str(r.id), "--db", db, "--json"]) == 0  # 0: the same numbers, bpb included
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["length"] for x in rows] == [32, 64] and all("bpb" in x for x in rows)


def test_a_tiny_model_beats_the_uniform_predictor(lm_run):
    from statetrack.runs.store import Store

    db, r = lm_run
    rows = Store(db).lm_metrics(r.id)
    assert [x["length"] for x in rows] == [32, 64]
    assert all(x["bpb"] < math.log2(V) - 2 for x in rows)  # 40 steps: far below 8.02 bits
    assert rows[0]["buckets"][0]["lo"] == 0 and rows[0]["answer_tokens"] > 0
    assert r.summary["corpus"]["sha256"]["test"] and r.summary["params"] > 0


def test_store_migrates_a_version_1_database(tmp_path):
    from statetrack.runs.store import SCHEMA_VERSION, Store

    path = tmp_path / "old.db"
    Store(path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE lm_metrics")
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    con.execute(
        "INSERT INTO runs (model, task, seed, config, versions, status, created) "
        "VALUES ('rnn', 'parity', 0, '{}', '{}', 'complete', 0)"
    )
    con.commit()
    con.close()
    s = Store(path)
    assert s.schema_version() == SCHEMA_VERSION == 2
    assert s.lm_metrics(1) == [] and s.runs()[0].model == "rnn"


def test_run_keys_of_older_configs_are_unchanged():
    from statetrack.config import EvalConfig

    e = EvalConfig(lengths=[8, 16])
    late = EvalConfig.LATE_FIELDS  # tokens, test_split, horizons, windows: left out at their defaults
    assert "tokens" in late and e.key_dict() == {k: v for k, v in e.model_dump().items() if k not in late}
    assert EvalConfig(lengths=[8], tokens=100).key_dict()["tokens"] == 100
    assert EvalConfig(lengths=[8], windows="tile").key_dict()["windows"] == "tile"


def test_generate_prints_text(lm_run, capsys):
    db, r = lm_run
    argv = ["generate", r.checkpoint, "--prompt", "a = 1\nb = ", "--tokens", "40", "--temperature", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("a = 1\nb = ") and len(out) > len("a = 1\nb = ") + 5
    assert main(argv) == 0 and capsys.readouterr().out == out  # greedy: the same text again
    assert main(argv[:-2] + ["--temperature", "1.0", "--top-k", "5", "--seed", "3", "--json"]) == 0
    assert "continuation" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--tokens", "0"], "bad number of tokens 0; allowed: an integer >= 1"),
        (["--temperature", "-1"], "bad temperature -1.0; allowed"),
        (["--top-k", "0"], "bad top-k 0; allowed"),
    ],
)
def test_generate_bad_input(lm_run, capsys, extra, needle):
    assert main(["generate", lm_run[1].checkpoint] + extra) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_generate_needs_a_language_model(db, capsys, tmp_path):
    assert main(["generate", str(tmp_path / "missing.safetensors")]) == 2
    assert "not found" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "--layers",
                "rnn",
                "--d-model",
                "2",
                "--steps",
                "2",
                "--test-lengths",
                "8",
                "--eval-batch",
                "4",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    from statetrack.runs.store import Store

    ck = Store(db).runs()[0].checkpoint
    capsys.readouterr()
    assert main(["generate", ck]) == 2
    err = capsys.readouterr().err
    assert "trained on task 'parity', not a corpus" in err and err.count("\n") == 1


# -- the study and its report -----------------------------------------------------------------------
def test_grazzi2024_lm_parameter_counts_match():
    from statetrack.experiments import load_study
    from statetrack.report.lm_cells import model_params

    study = load_study("grazzi2024-lm")
    assert study.kind == "lm" and study.state_tracking.study == "grazzi2024"
    for scale in ("quick", "medium", "paper"):
        jobs = [j for j in study.cells(scale) if j.seed == 0]
        for column in {j.column for j in jobs}:  # every corpus: their vocabularies (bytes, BPE) differ
            counts = {j.label: model_params(j) for j in jobs if j.column == column}
            assert len(counts) == 6 and max(counts.values()) <= 1.1 * min(counts.values()), (
                scale,
                column,
                counts,
            )
            assert counts["Mamba [0,1]"] == counts["Mamba [-1,1]"]
            assert counts["DeltaNet [0,1]"] == counts["DeltaNet [-1,1]"]
    medium = study.cells("medium")
    assert {j.column for j in medium} == {"stdlib", "traces"}
    assert all(j.train.train_max_len >= 256 and j.eval.windows == "tile" for j in medium)


TINY_LM = """
name: lm-tiny
title: tiny lm study
source: test
kind: lm
state_tracking: {study: grazzi2024, columns: [parity]}
train: {batch_size: 8, eval_every: 5, val_sequences: 8, lr: 0.01}
train_lengths: [48, 48]
tables:
  - name: main
    tasks: [{label: synthetic, task: "lm:synthetic"}]
    models:
      - {label: "Mamba [0,1]", model: {layers: "mamba(conv=0)", d_model: 8, d_state: 4}}
      - {label: "Mamba [-1,1]", model: {layers: "negmamba(conv=0)", d_model: 8, d_state: 4}}
scales:
  quick: {seeds: 1, steps: 10, eval_batch: 16, eval_tokens: 6144, test_lengths: [48, 96],
          task_train: {synthetic: {lrs: [0.01, 0.02]}}}
"""


def test_lm_study_report_and_json(tmp_path, db, capsys):
    path = tmp_path / "lm-tiny.yaml"
    path.write_text(TINY_LM)
    out = tmp_path / "rep"
    assert (
        main(["reproduce", str(path), "--db", db, "--workers", "1", "--json", "--out", str(out), "--html"])
        == 0
    )
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    runs = [r for r in rows if "baseline" not in r]
    base = {r["model"]: r for r in rows if "baseline" in r}
    assert len(runs) == 4 and {r["model"] for r in runs} == {"Mamba [0,1]", "Mamba [-1,1]"}
    for r in runs:
        assert r["length"] == 48 and 0 < r["bpb"] < math.log2(V) and set(r["bpb_by_length"]) == {"48", "96"}
    assert set(base) == {
        "unigram (add-one)",
        "bigram (add-one)",
        "gzip -9",
        "bz2 -9",
        "xz -9e",
        "xz -9e after train",
    }
    assert base["bigram (add-one)"]["bpb"] < base["unigram (add-one)"]["bpb"] < math.log2(V)
    assert base["xz -9e after train"]["bpb"] < base["xz -9e"]["bpb"] < base["gzip -9"]["bpb"] < 8
    test_bytes = get_corpus("synthetic", 0).describe()["splits"]["test"]["bytes"]
    assert base["gzip -9"]["test_bytes"] == test_bytes
    md = (out / "lm-tiny.md").read_text()
    for needle in (
        "| bigram (add-one) |",
        "| gzip -9 |",
        "| xz -9e after train |",
        "| Mamba: [-1,1] - [0,1] |",
        "parity (grazzi2024)",
        "0 complete runs found",
        "answer bits per byte by distance to the decisive",
        "| state-blind level (exact) |",
        "answers in context: [-1,1] minus [0,1] =",
        "(table `training`)",
        "positions-synthetic.png",
        "curves-synthetic.png",
        "context-synthetic.png",
        "answers-synthetic.png",
    ):
        assert needle in md, needle
    # the corpus's own grid of two rates: each model's rate is read from its validation loss, and said
    assert {r["lr"] for r in runs} == {0.01, 0.02}
    said = (
        "synthetic: the learning rate of each model is the one with the lowest median validation loss among "
    )
    assert said + "0.01, 0.02: Mamba [0,1] 0.0" in md
    for r in runs:
        labels = [b["label"] for b in r["answer_buckets"]]
        assert labels[-1] == "outside" and "32-63" in labels and sum(b["n"] for b in r["answer_buckets"]) > 50
    assert (out / "lm-tiny" / "positions-synthetic.png").stat().st_size > 1000
    assert "unigram (add-one)" in (out / "lm-tiny.csv").read_text()
    page = (out / "lm-tiny.html").read_text()
    assert "bigram (add-one)" in page and "<svg" in page


@pytest.mark.slow
def test_lm_run_on_the_ray_executor(tmp_path):
    pytest.importorskip("ray")
    from statetrack.config import EvalConfig, ModelConfig, TrainConfig
    from statetrack.runs.store import Store
    from statetrack.runs.sweep import Job, run_jobs

    tc = TrainConfig(
        task="lm:synthetic",
        model=ModelConfig(layers="lstm", d_model=8, d_state=8),
        train_min_len=16,
        train_max_len=16,
        steps=5,
        batch_size=4,
        eval_every=5,
        val_sequences=4,
        device="cpu",
    )
    job = Job("LSTM", 0, tc, EvalConfig(lengths=[16, 32], batch_size=4, tokens=128, device="cpu"), "ray-lm")
    db = str(tmp_path / "ray.db")
    [(_, res)] = run_jobs([job], db, executor="ray", workers=1)
    assert res.status == "complete" and [m.length for m in res.lm] == [16, 32]
    assert [r["length"] for r in Store(db).lm_metrics(res.run_id)] == [16, 32]


def test_corpus_help_names_every_corpus(capsys):
    from statetrack.cli import main
    from statetrack.lm.corpus import CORPORA

    with pytest.raises(SystemExit):
        main(["corpus", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(name in out for name in CORPORA), out
