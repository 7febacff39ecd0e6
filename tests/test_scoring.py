"""Scoring: chance per length from the labels scored, Wilson intervals, lengths that are not scored,
the metrics table's in-place migration, and a constant answer scoring no better than chance on every
registered task family."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
import torch

from statetrack import EvalConfig, evaluate
from statetrack.tasks import FAMILIES, draws, get_task
from statetrack.training.evaluation import (
    LengthMetrics,
    evaluate_length,
    longest_generalized,
    uncertain_judgement,
    wilson,
)
from test_tasks_suite import PARITY_DFA

#: task strings per family for the constant-answer test; a family missing here is tried by its bare
#: name, so a family registered later is covered as soon as that works (else the test names it)
EXAMPLES = {
    "parity": ["parity", "parity:final"],
    "group": ["group:S3", "group:C2xC4", "group:S5/transpositions", "group:C6/generators+identity"],
    "modcount": ["modcount:3"],
    "modarith": ["modarith:5"],
    "modarith-brackets": ["modarith-brackets:5", "modarith-brackets:5/mult"],
    "cycle": ["cycle:5", "cycle:5/every"],
    "evenpairs": ["evenpairs", "evenpairs:every"],
    "tomita": [f"tomita:{k}" for k in range(1, 8)],
    "dfa": ["dfa:{tmp}"],
    "offset": ["offset", "offset:two-isis"],
    "witness": ["witness:alt", "witness:pulse:4"],
}
LENGTHS = [1, 2, 7, 16, 100]


class Constant(torch.nn.Module):
    """Answers class ``c`` at every position."""

    def __init__(self, num_classes: int, c: int):
        super().__init__()
        self.k, self.c = num_classes, c
        self.w = torch.nn.Parameter(torch.zeros(1))

    def init_state(self, _batch):
        return None

    def forward(self, x, state=None):
        out = torch.zeros(*x.shape, self.k)
        out[..., self.c] = 1.0
        return out, state


def test_wilson_known_values():
    # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (score interval without
    # continuity correction)
    for (k, n), (lo, hi) in {
        (81, 263): (0.2553, 0.3662),
        (15, 148): (0.0624, 0.1605),
        (0, 20): (0.0, 0.1611),
        (1, 29): (0.0061, 0.1718),
    }.items():
        got = wilson(k, n)
        assert got[0] == pytest.approx(lo, abs=5e-5) and got[1] == pytest.approx(hi, abs=5e-5)
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)
    assert wilson(50, 100) == pytest.approx((0.4038, 0.5962), abs=5e-5)


def test_metrics_fill_in_the_interval():
    m = LengthMetrics(100, 0.5, 0.5, 0.0, 0.0, 0.5, 100)
    assert (m.accuracy_low, m.accuracy_high) == pytest.approx(wilson(50, 100))
    assert (
        LengthMetrics.from_row(
            {
                "length": 5,
                "accuracy": 1.0,
                "token_accuracy": 1.0,
                "sequence_accuracy": 1.0,
                "scaled_accuracy": 1.0,
                "chance": 0.5,
                "n_sequences": 64,
            }
        ).accuracy_low
        > 0.94
    )


def test_uncertain_judgement():
    sure = [LengthMetrics(n, 1.0, 1, 1, 1, 0.5, 256) for n in (10, 100)]
    assert not uncertain_judgement(sure)
    assert uncertain_judgement(sure + [LengthMetrics(1000, 0.91, 1, 1, 1, 0.5, 256)])
    # beyond the first failing length nothing is read
    assert not uncertain_judgement(
        sure + [LengthMetrics(1000, 0.5, 1, 1, 0, 0.5, 256), LengthMetrics(2000, 0.91, 1, 1, 0, 0.5, 256)]
    )
    na = LengthMetrics(7, None, None, None, None, None, 0, note="no accepted string of length 7")
    assert longest_generalized(sure + [na]) == 100


def _family_tasks(tmp_path) -> list[str]:
    dfa = tmp_path / "lang.json"
    dfa.write_text(json.dumps(PARITY_DFA))
    out = []
    for family in FAMILIES:
        if (
            family == "lm"
        ):  # a corpus, scored by evaluate_run: test_lm.py::test_a_constant_answer_scores_chance
            continue
        names = [n.replace("{tmp}", str(dfa)) for n in EXAMPLES.get(family, [family])]
        for n in names:
            try:
                get_task(n)
            except Exception as e:  # noqa: BLE001 - any error: a new family needs an example above
                pytest.fail(f"task family {family!r}: add an example task string to EXAMPLES ({e})")
        out += names
    return out


def test_a_constant_answer_scores_chance_on_every_family(tmp_path):
    """Every registered family, every length: the chance stored is the majority share of the final label's
    distribution in the test draw (the same for every model); answering the distribution's most frequent
    label everywhere scores it up to the sampling error of the sequences scored (chance lies inside the
    answer's 99.9% interval), and answering class 0 scores at most that."""
    checked = 0
    for name in _family_tasks(tmp_path):
        task = get_task(name)
        for n in LENGTHS:
            if task.test_unavailable(n):  # no test set at this length: named, never a number
                m = evaluate_length(Constant(task.num_classes, 0), task, n, 64, 16, np.random.default_rng(0))
                assert m.accuracy is None and m.scaled_accuracy is None and m.note, (name, n)
                continue
            dist, _ = draws.label_distribution(task, "test", n)
            top = int(np.argmax(dist))
            cfg = EvalConfig(lengths=[n], batch_size=64, chunk=16, seed=5)
            zero, best = (evaluate(Constant(task.num_classes, c), task, cfg)[0] for c in (0, top))
            assert zero.chance == best.chance == pytest.approx(dist.max(), abs=1e-12), (name, n)
            if best.chance == 1.0:  # one final label for every sequence (fixed inputs): no scaled score
                assert zero.scaled_accuracy is None and best.scaled_accuracy is None and best.note, (name, n)
                continue
            lo, hi = wilson(round(best.accuracy * 64), 64, z=3.2905)
            assert lo <= best.chance <= hi, (name, n, best.accuracy, best.chance)
            assert zero.accuracy <= hi, (name, n)
            checked += 1
    assert checked >= 80


def test_constant_answer_on_the_issue_case():
    """Tomita 3 at length 500: before, 'reject' everywhere scored 100%; now 50% and scaled 0."""
    task = get_task("tomita:3")
    m = evaluate(Constant(2, 0), task, EvalConfig(lengths=[50, 100, 200, 500], batch_size=128))
    assert all(x.accuracy == 0.5 and x.chance == 0.5 and x.scaled_accuracy == 0.0 for x in m)
    assert longest_generalized(m) is None


def test_chance_is_measured_per_length():
    """Tomita 5: 50/50 at even lengths (not the pooled 0.75), not scored at odd ones."""
    task = get_task("tomita:5")
    m = evaluate(Constant(2, 1), task, EvalConfig(lengths=[8, 9, 100], batch_size=100))
    assert m[0].chance == 0.5 and m[0].accuracy == 0.5 and m[0].scaled_accuracy == 0.0
    assert m[1].accuracy is None and m[1].note == "no accepted string of length 9" and m[1].n_sequences == 0
    assert (
        0.5 < m[2].token_majority < 1
    )  # prefix labels are not balanced: the batch's majority over positions


def test_per_length_chance_from_an_imbalanced_draw():
    """cycle:5 is scored on its training draw: chance is the majority share of its final label's distribution
    at that length (exact, through its automaton), not the majority of the 50 sequences scored."""
    task = get_task("cycle:5")
    m = evaluate_length(Constant(5, 0), task, 4, 50, 16, np.random.default_rng(0))
    b = task.test_batch(np.random.default_rng(0), 50, 4)
    counts = np.bincount(b.targets[:, -1], minlength=5)
    # after 4 steps of -1, 0, +1 from 0: 19 of the 81 walks end at 0, 17 at each of +-1, 14 at each of +-2
    assert m.chance == pytest.approx(19 / 81) and m.accuracy == counts[0] / 50


def test_store_migrates_a_version_1_file(tmp_path):
    """A file written by schema version 1 gains the new metrics columns in place; old rows stay readable
    (their interval is computed from accuracy and n_sequences)."""
    from statetrack.runs.store import SCHEMA_VERSION, Store

    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript("""
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('application', 'statetrack'), ('schema_version', '1');
    CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, study TEXT, label TEXT, model TEXT NOT NULL,
      task TEXT NOT NULL, seed INTEGER NOT NULL, train_min_len INTEGER, train_max_len INTEGER, config TEXT NOT NULL,
      versions TEXT NOT NULL, status TEXT NOT NULL, error TEXT, checkpoint TEXT, created REAL NOT NULL,
      finished REAL, wall_time REAL, summary TEXT);
    CREATE TABLE metrics (run_id INTEGER NOT NULL REFERENCES runs(id), length INTEGER NOT NULL,
      accuracy REAL, token_accuracy REAL, sequence_accuracy REAL, scaled_accuracy REAL,
      chance REAL, n_sequences INTEGER, PRIMARY KEY (run_id, length));
    INSERT INTO runs (model, task, seed, config, versions, status, created) VALUES ('rnn', 'parity', 0, '{}', '{}',
      'complete', 0);
    INSERT INTO metrics VALUES (1, 16, 0.75, 0.8, 0.1, 0.5, 0.5, 128);
    """)
    con.commit()
    con.close()
    store = Store(db)
    rows = store.metrics(1)
    assert rows[0].accuracy == 0.75 and rows[0].accuracy_low is None
    m = LengthMetrics.from_row(rows[0])
    assert (m.accuracy_low, m.accuracy_high) == pytest.approx(wilson(96, 128))
    rid = store.start_run({"model": {"layers": "rnn"}, "task": "tomita:2", "seed": 0})
    store.finish_run(
        rid,
        [m, LengthMetrics(7, None, None, None, None, None, 0, note="no accepted string of length 7")],
        None,
        1.0,
        {},
    )
    back = {r.length: r for r in store.metrics(rid)}
    assert back[7].note == "no accepted string of length 7" and back[16].accuracy_high == m.accuracy_high
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    con.close()
    Store(db)  # opening a migrated file again changes nothing


def test_json_rows_carry_interval_and_note():
    from statetrack.runs.records import length_rows

    rows = length_rows(
        {"run_id": 1},
        [
            LengthMetrics(8, 1.0, 1, 1, 1, 0.5, 64),
            LengthMetrics(9, None, None, None, None, None, 0, note="n/a"),
            {
                "length": 10,
                "accuracy": 1.0,
                "token_accuracy": 1.0,  # an old row
                "sequence_accuracy": 1.0,
                "scaled_accuracy": 1.0,
                "chance": 0.5,
                "n_sequences": 64,
            },
        ],
    )
    assert rows[0]["accuracy_high"] == 1.0 and rows[0]["accuracy_low"] > 0.94
    assert rows[1]["accuracy"] is None and rows[1]["note"] == "n/a" and rows[1]["accuracy_low"] is None
    assert rows[2]["accuracy_low"] == rows[0]["accuracy_low"] and rows[2]["note"] is None


def test_report_marks_judgements_an_interval_could_change(tmp_path):
    """Tables: '?' where a 95% interval read by a threshold judgement contains the threshold; 'n/a'
    where no run has a test set at a length (and such a length neither passes nor fails)."""
    from statetrack.experiments import load_study
    from statetrack.report import study_tables
    from statetrack.runs.runner import RunResult

    na = "no accepted string of length 11"
    empty = LengthMetrics(11, None, None, None, None, None, 0, note=na)
    metrics = {
        "A": [
            LengthMetrics(10, 1.0, 1, 1, 1, 0.5, 128),
            empty,
            LengthMetrics(100, 0.93, 1, 1, 0.86, 0.5, 128),
        ],
        "B": [LengthMetrics(10, 1.0, 1, 1, 1, 0.5, 128), empty, LengthMetrics(100, 0.5, 1, 1, 0, 0.5, 128)],
    }
    for kind in ("longest", "per_length"):
        p = tmp_path / f"{kind}.yaml"
        p.write_text(f"""
name: marks
title: marks
source: test
score: {{kind: {kind}, threshold: 0.9}}
train_lengths: [1, 8]
tables:
  - tasks: [tomita:2]
    models:
      - {{label: A, model: {{layers: rnn}}}}
      - {{label: B, model: {{layers: rnn}}}}
scales:
  quick: {{seeds: 1, steps: 1, test_lengths: [10, 11, 100]}}
""")
        study = load_study(str(p))
        results = [
            (
                j,
                RunResult(
                    i,
                    "complete",
                    metrics[j.label],
                    {"longest_90": 100 if j.label == "A" else 10, "best_val_accuracy": 1.0},
                    None,
                ),
            )
            for i, j in enumerate(study.cells("quick"))
        ]
        t = study_tables(study, results, "quick")[0]
        a, b = t.rows
        if kind == "longest":
            assert a["text"]["tomita:2"] == ">=100 ?" and b["text"]["tomita:2"] == "10"
        else:
            assert a["text"][11] == "n/a" and a["text"][100] == "93.0"
            md = t.markdown()
            assert "| 100 ? |" in md and "| 10 |" in md
        assert "?" in t.caption and "n/a" in t.caption


def test_the_longest_passing_length_read_as_written_and_at_every_shorter_one(tmp_path):
    """score every_shorter: false reads a paper's 'longest length with accuracy > 90%' as written (a run
    that dips and comes back counts at the longer length); the table NAME-every-shorter beside it holds
    the stricter reading, with the published numbers but no mark and no count in the report's agreement."""
    from statetrack.experiments import load_study
    from statetrack.report import study_tables
    from statetrack.report.selection import longest_above
    from statetrack.report.state_tables import state_tables
    from statetrack.runs.runner import RunResult

    dips = {10: 1.0, 100: 0.2, 1000: 0.99}
    assert longest_above(dips, 0.9) == 10 and longest_above(dips, 0.9, every_shorter=False) == 1000
    assert longest_above({10: 0.5}, 0.9, every_shorter=False) == 0
    ms = [LengthMetrics(n, a, 1, 1, 1, 0.5, 4096) for n, a in dips.items()]
    # read from the longest down: 1000 passes for sure, and nothing shorter is read
    assert not uncertain_judgement(ms, strict=True, every_shorter=False)
    assert uncertain_judgement(ms + [LengthMetrics(2000, 0.905, 1, 1, 1, 0.5, 256)], every_shorter=False)
    assert not uncertain_judgement(ms + [LengthMetrics(2000, 0.5, 1, 1, 1, 0.5, 4096)], every_shorter=False)

    p = tmp_path / "dips.yaml"
    p.write_text("""
name: dips
title: dips
source: test
score: {kind: longest, threshold: 0.9, every_shorter: false}
train_lengths: [1, 8]
tables:
  - tasks: [parity]
    models:
      - {label: A, model: {layers: rnn}, published: {parity: 1000}}
scales:
  quick: {seeds: 1, steps: 1, test_lengths: [10, 100, 1000]}
""")
    study = load_study(str(p))
    results = [
        (j, RunResult(i, "complete", ms, {"longest_90": 10, "best_val_accuracy": 1.0}, None))
        for i, j in enumerate(study.cells("quick"))
    ]
    main_t = study_tables(study, results, "quick")[0]
    tables = state_tables(study, results, [main_t])
    assert [t.name for t in tables] == ["main", "main-every-shorter"]
    strict = tables[1]
    assert main_t.rows[0]["text"]["parity"] == ">=1000" and main_t.rows[0]["differs"]["parity"] is False
    assert strict.rows[0]["text"]["parity"] == "10"
    assert strict.rows[0]["differs"]["parity"] is None and "*" not in strict.rows[0]["text"]["parity"]
    assert "0 of 1 cells with a published number agree" in strict.caption and "A on parity" in strict.caption
    assert "whatever the shorter test lengths read" in main_t.caption


class Flaky(torch.nn.Module):
    """Running parity, wrong at a position where a running hash of the inputs is 0 mod ``k``: about one
    final answer in ``k`` is wrong, and which ones depends on the whole string."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k
        self.w = torch.nn.Parameter(torch.zeros(1))

    def init_state(self, batch):
        return torch.zeros(batch, 2, dtype=torch.long)

    def forward(self, x, state):
        out = torch.zeros(*x.shape, 2)
        par, h = state[:, 0].clone(), state[:, 1].clone()
        for t in range(x.shape[1]):
            par = (par + x[:, t]) % 2
            h = (h * 31 + x[:, t] + 7) % 1_000_003
            ans = torch.where(h % self.k == 0, 1 - par, par)
            out[torch.arange(x.shape[0]), t, ans] = 1.0
        return out, torch.stack([par, h], dim=1)


def test_test_sets_of_two_lengths_are_independent(tmp_path):
    """Each (seed, split, length) has its own stream: the long-range suffixes at length 61 are not the first
    symbols of those at 200 (they were, for every string, when one seed served every length), in
    evaluation and in ``sample`` alike; the two draws at one length differ too."""
    from statetrack.tasks import sample_json

    dfa = tmp_path / "lastc.json"
    dfa.write_text(
        json.dumps(
            {
                "states": ["N", "C", "B"],
                "alphabet": ["a", "b", "c"],
                "start": "N",
                "accept": ["N", "C"],
                "transitions": {
                    "N": {"a": "N", "b": "N", "c": "C"},
                    "C": {"a": "C", "b": "B", "c": "C"},
                    "B": {"a": "B", "b": "B", "c": "C"},
                },
            }
        )
    )
    task = get_task(f"dfa:{dfa}")
    seed = EvalConfig().seed
    short = draws.batch(task, "long", draws.test_rng(seed, "long", 61), 200, 61).inputs[:, 30:]
    long = draws.batch(task, "long", draws.test_rng(seed, "long", 200), 200, 200).inputs[:, 100:131]
    assert (short == long).all(axis=1).sum() == 0
    # the old way: one generator per seed, whatever the length
    old = [draws.batch(task, "long", np.random.default_rng(seed), 200, n).inputs for n in (61, 200)]
    assert (old[0][:, 30:] == old[1][:, 100:131]).all(axis=1).all()
    a, b = (sample_json(task.name, n, 50, seed=0, split="long") for n in (61, 200))
    assert sum(x["inputs"][30:] == y["inputs"][100:131] for x, y in zip(a, b, strict=True)) == 0
    # sample --seed S shows the strings evaluation scores with seed S
    first = draws.batch(task, "test", draws.test_rng(seed, "test", 40), 8, 40).inputs
    assert [r["inputs"] for r in sample_json(task.name, 40, 8, seed=seed, split="test")] == first.tolist()
    assert not (first == draws.batch(task, "long", draws.test_rng(seed, "long", 40), 8, 40).inputs).all()


def test_test_set_size_follows_the_interval():
    """A length whose accuracy interval contains 90% is scored with twice the sequences, up to ``doublings``
    times; one still undecided says so (``decided`` False, a note, '?' in the judgement); a length far from
    90% keeps the batch."""
    from statetrack.training.evaluation import decision_z, straddles

    task = get_task("parity")
    sure = evaluate(Flaky(1_000_003), task, EvalConfig(lengths=[40], batch_size=64, device="cpu"))[0]
    assert sure.n_sequences == 64 and sure.accuracy == 1.0 and sure.decided and sure.note is None
    bad = evaluate(Flaky(2), task, EvalConfig(lengths=[40], batch_size=64, device="cpu"))[0]
    assert bad.n_sequences == 64 and bad.accuracy < 0.8 and bad.decided
    ms = evaluate(Flaky(10), task, EvalConfig(lengths=[40, 41, 42, 43], batch_size=64, device="cpu"))
    z = decision_z(4)
    assert z == pytest.approx(2.5758, abs=1e-4)  # 99%: 5% over five looks
    for m in ms:
        k = round(m.accuracy * m.n_sequences)
        assert m.n_sequences in (64, 128, 256, 512, 1024)
        assert m.decided == (not straddles(k, m.n_sequences, z))
        # more sequences only where the previous look straddled 90%
        assert m.n_sequences == 1024 or m.decided
        if not m.decided:
            assert "undecided at 90%" in m.note and uncertain_judgement([m])
    assert any(m.n_sequences > 64 for m in ms)
    one = evaluate(Flaky(10), task, EvalConfig(lengths=[40], batch_size=64, doublings=0, device="cpu"))[0]
    assert one.n_sequences == 64
    # the stored cell of the audit: 106 of 128 right (82.8%, 95% interval 75.3-88.4%): its decision interval
    # (99%: 72.7-89.7%) excludes 90%, so it is decided, below 90%, on its own batch
    assert not straddles(106, 128, z) and wilson(106, 128, z)[1] < 0.9
    # a batch one sequence luckier (107: interval 73.6-90.3%) would have been scored with 256
    assert straddles(107, 128, z)
