"""The oracle beside a study's cells (report.verdicts): pooled scores, chance over consecutive lengths of
a fixed input, the outcome rules, the report's sections and the leaderboard page; and the frontier-zoo
study's grid."""

from __future__ import annotations

import pytest

from statetrack.experiments import load_study
from statetrack.report.verdict_tables import SeedScore, VerdictCell, seed_score, verdict_table
from statetrack.runs.runner import RunResult
from statetrack.tasks import get_task
from statetrack.training.evaluation import LengthMetrics

STUDY = load_study("frontier-zoo")


def _jobs(model: str, column: str):
    return [j for j in STUDY.cells("quick") if j.label == model and j.column == column]


def _result(job, correct_of_n: list[tuple[int, int]]) -> RunResult:
    ms = [
        LengthMetrics(n, k / m, None, None, None, 0.5, m)
        for n, (k, m) in zip(job.eval.lengths, correct_of_n, strict=True)
    ]
    return RunResult(1, "complete", ms, {}, None)


def test_the_grid_every_mixer_on_five_tasks_three_seeds():
    from statetrack.layers import MIXERS, ORIGIN
    from statetrack.spec import parse_layers

    jobs = STUDY.cells("quick")
    assert len(jobs) == 27 * 5 * 3
    names = {s.name for j in jobs for s in parse_layers(j.train.model.layers)}
    # every mixer of the zoo, old and new (plugins other tests registered in this process are not its)
    assert names == set(MIXERS) - set(ORIGIN)
    by_col = {j.column: j.eval for j in jobs}
    assert by_col["count mod 3"].test_split == "test" and by_col["count mod 3"].batch_size == 1
    assert {by_col[c].test_split for c in ("parity", "S3", "A5", "Tomita 1")} == {"long"}
    assert by_col["parity"].lengths == list(range(500, 512))


def test_pooled_score_long_draw_and_interval():
    (job, *_) = _jobs("Mamba [0,1]", "parity")
    s = seed_score(job, _result(job, [(12, 24)] * 12), get_task("parity"), fixed_input=False)
    assert s.n == 288 and s.accuracy == pytest.approx(0.5) and s.chance == pytest.approx(0.5)
    assert s.low < 0.5 < s.high and s.judgement == "at" and s.split == "long"
    s = seed_score(job, _result(job, [(20, 24)] * 12), get_task("parity"), fixed_input=False)
    assert s.judgement == "above"
    s = seed_score(job, _result(job, [(2, 24)] * 12), get_task("parity"), fixed_input=False)
    assert s.judgement == "below"


def test_fixed_input_counts_each_length_once_and_chance_pools_the_cycle():
    (job, *_) = _jobs("Mamba-3", "count mod 3")
    task = get_task("modcount:3")
    # a constant answer is right at one residue in three: 4 of the 12 lengths
    s = seed_score(
        job, _result(job, [(1, 1) if n % 3 == 0 else (0, 1) for n in job.eval.lengths]), task, True
    )
    assert s.n == 12 and s.chance == pytest.approx(1 / 3) and s.accuracy == pytest.approx(1 / 3)
    assert s.judgement == "at"
    s = seed_score(job, _result(job, [(1, 1)] * 12), task, True)
    assert s.judgement == "above"  # 12 of 12: the 99% interval starts above 1/3


def _cell(verdict, judgements):
    c = VerdictCell("m", "t", "mamba", "parity", verdict, "T1", "why")
    lo_hi = {"tracks": (0.9, 0.98), "above": (0.7, 0.9), "at": (0.4, 0.6), "below": (0.1, 0.3)}
    c.seeds = [
        SeedScore(i, sum(lo_hi[j]) / 2, *lo_hi[j], 0.5, 100, [500], "long") for i, j in enumerate(judgements)
    ]
    return c


@pytest.mark.parametrize(
    "verdict,seeds,outcome",
    [
        ("impossible", ["at", "at", "at"], "agrees"),
        ("impossible", ["at", "above", "at"], "disagrees"),
        ("impossible", ["below", "at", "at"], "disagrees"),  # off chance either way tells the label apart
        ("possible", ["at", "tracks", "at"], "agrees"),
        ("possible", ["at", "above", "below"], "learnability"),  # above chance, yet not tracking (< 90%)
        ("open", ["above", "at", "at"], "open"),
        ("possible", [], "missing"),
    ],
)
def test_outcomes(verdict, seeds, outcome):
    assert _cell(verdict, seeds).outcome == outcome


def test_report_sections_and_leaderboard():
    from statetrack.report.leaderboard import leaderboard_html

    results = []
    for job in _jobs("Mamba [0,1]", "parity") + _jobs("Mamba [-1,1]", "parity"):
        good = job.label == "Mamba [-1,1]" and job.seed == 0
        results.append((job, _result(job, [(24 if good else 12, 24)] * 12)))
    vt = verdict_table(STUDY, results)
    cells = {(c.model, c.column): c for c in vt.cells()}
    assert cells[("Mamba [0,1]", "parity")].verdict == "impossible"
    assert cells[("Mamba [0,1]", "parity")].outcome == "agrees"
    assert cells[("Mamba [-1,1]", "parity")].outcome == "agrees"  # possible (T5), tracked by seed 0
    assert vt.counts()["agrees"] == 2 and "2 of 2 decided cells" in vt.summary()
    assert vt.leaderboard()[0][0] == "Mamba [-1,1]"
    page = leaderboard_html(vt, STUDY.title)
    assert page.startswith("<!DOCTYPE html>") and "Mamba [-1,1]" in page and "<script" not in page
    assert {r["judgement"] for r in vt.csv_rows()} == {"at", "above"}


def test_impossible_cells_may_reach_the_quotient_they_can_track():
    """One AUSSM layer cannot track S3 (T5) but tracks its sign, S3 / A3 = C2: on the long draw's uniform
    labels that is worth 1/3 against a chance of 1/6. At 1/3 the cell agrees; well above it, it does not."""
    jobs = _jobs("AUSSM", "S3")
    at_sign = verdict_table(STUDY, [(j, _result(j, [(8, 24)] * 12)) for j in jobs])
    (cell,) = at_sign.cells()
    assert cell.verdict == "impossible" and cell.ceiling == pytest.approx(1 / 3) and cell.quotient == 2
    assert cell.median().judgement == "above" and cell.outcome == "agrees"
    assert "ceiling 33%" in cell.text()
    beyond = verdict_table(STUDY, [(j, _result(j, [(16, 24)] * 12)) for j in jobs])
    assert beyond.cells()[0].outcome == "disagrees"
    # knowing the sign, a layer may name an element of the wrong coset: below chance is within the band
    wrong_coset = verdict_table(STUDY, [(j, _result(j, [(1, 24)] * 12)) for j in jobs])
    assert wrong_coset.cells()[0].median().judgement == "below" and wrong_coset.cells()[0].outcome == "agrees"
    # A5 is perfect: no non-trivial quotient is tracked, the ceiling is chance
    five = [(1, 24)] * 5 + [(0, 24)] * 7  # 5 of 288 right: chance, 1/60
    (a5,) = verdict_table(STUDY, [(j, _result(j, five)) for j in _jobs("AUSSM", "A5")]).cells()
    assert a5.ceiling == pytest.approx(1 / 60) and a5.outcome == "agrees"
    # with no quotient tracked, below chance tells the labels apart: it disagrees
    jobs0 = _jobs("Mamba [0,1]", "parity")
    (low,) = verdict_table(STUDY, [(j, _result(j, [(2, 24)] * 12)) for j in jobs0]).cells()
    assert low.verdict == "impossible" and low.median().judgement == "below" and low.outcome == "disagrees"


def test_the_summary_names_each_disagreeing_seed_and_the_false_alarms_expected():
    from statetrack.report.verdict_tables import VerdictTable

    bad, good = _cell("impossible", ["at", "above", "at"]), _cell("impossible", ["at", "at", "at"])
    vt = VerdictTable("s", ["t"], [("m", [bad]), ("n", [good])])
    text = vt.summary()
    assert "1 of 2 'impossible' cells stay at chance" in text
    assert "(1 do not: m / t seed 1 at 80.0% [70.0-90.0] (chance 50.0%); of the 6 seeds" in text
    assert "about 0.1 fall outside chance by the sampling alone" in text
    assert "(0 do not)" in VerdictTable("s", ["t"], [("n", [good])]).summary()


def test_the_summary_splits_learnability_cells_by_whether_they_fit_the_training_lengths():
    from statetrack.report.verdict_tables import VerdictTable

    fits, never = _cell("possible", ["at", "at"]), _cell("possible", ["above", "at"])
    fits.runs = [(0, 100, 1.0, None), (1, None, 0.8, None)]  # seed 0 learnt in distribution at step 100
    never.runs = [(0, None, 0.6, None), (1, None, 0.5, None)]
    text = VerdictTable("s", ["t"], [("m", [fits]), ("n", [never])]).summary()
    assert "1 of them rose above chance; of the 2 whose runs recorded when they learnt, 1 fit" in text
    assert "1 never fit them" in text
    unrecorded = _cell("possible", ["at"])
    unrecorded.runs = [(0, "n/a", 0.5, None)]
    assert "recorded when" not in VerdictTable("s", ["t"], [("m", [unrecorded])]).summary()
