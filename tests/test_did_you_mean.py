"""A misspelt name gets one line with the closest allowed names ("did you mean"), exit code 2."""

import pytest

from statetrack.cli import main
from statetrack.errors import closest, edit_distance

MISTAKES = [
    (["train", "--layers", "mamab"], "unknown mixer 'mamab' (did you mean 'mamba'?)"),
    (
        ["train", "--layers", "rnn", "--task", "partiy"],
        "unknown task family 'partiy' (did you mean 'parity'?)",
    ),
    (["train", "--layers", "rnn", "--d_model", "8"], "--d_model 8 (did you mean '--d-model'?)"),
    (["reproduce", "diag-limits"], "unknown study 'diag-limits' (did you mean 'diag-limits-2026'?)"),
    (
        ["reproduce", "khavari2025-parityy"],
        "unknown study 'khavari2025-parityy' (did you mean 'khavari2025-parity'?)",
    ),
    (["train", "--layers", "mamba(cnv=0)"], "unknown option 'cnv' (did you mean 'conv'?) for mixer 'mamba'"),
    (
        ["train", "--layers", "rnn", "--set", "model.dmodel=3"],
        "unknown key 'model.dmodel' (did you mean 'model.d_model'?)",
    ),
    (["train", "--layers", "rnn", "--step", "5"], "--step 5 (did you mean '--steps'?)"),
    (["trian"], "invalid choice: 'trian' (did you mean 'train'?)"),
    (
        ["construct", "s3-asusm", "--out", "x.safetensors"],
        "unknown construction 's3-asusm' (did you mean 's3-aussm'?)",
    ),
    (["report", "khavari2025-parity", "--scale", "quik"], "unknown scale 'quik' (did you mean 'quick'?)"),
    (["runs", "--status", "complet"], "invalid choice: 'complet' (did you mean 'complete'?)"),
    (
        ["oracle", "--layers", "negmaba", "--task", "parity"],
        "unknown mixer 'negmaba' (did you mean 'negmamba'?)",
    ),
]


@pytest.mark.parametrize("argv,needle", MISTAKES)
def test_misspelt_names_get_the_closest(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = ["--db", str(tmp_path / "r.db")] if argv[0] in ("train", "reproduce", "report") else []
    assert main([*argv, *db]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "allowed" in err or "choose from" in err, err
    assert not (tmp_path / "r.db").exists()


def test_config_file_key(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("lr: 0.01\nmodel:\n  layers: rnn\n  d_modle: 8\n")
    assert main(["train", "--config", str(tmp_path / "run.yaml"), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'model.d_modle' (did you mean 'model.d_model'?)" in err and err.count("\n") == 1


def test_config_file_mistakes_name_the_file_and_key(tmp_path, capsys, monkeypatch):
    """A section given as a name, a mistyped file name, a word for a number, a mistyped task without
    --layers: each one line naming what is wrong and where, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text("task: group:S3\nmodel: rnn\n")
    cases = [
        (
            ["--config", "run.yaml"],
            (
                "config file 'run.yaml': key 'model' must be a mapping of ModelConfig's "
                "fields, e.g. 'model: {layers: ...}', got str 'rnn' (did you mean "
                "'model: {layers: rnn}'?)"
            ),
        ),
        (["--config", "runn.yaml"], "config file 'runn.yaml' not found (did you mean 'run.yaml'?)"),
        (["--task", "partiy"], "unknown task family 'partiy' (did you mean 'parity'?)"),
    ]
    for argv, needle in cases:
        assert main(["train", *argv, "--db", "r.db"]) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, (argv, err)
    (tmp_path / "run.yaml").write_text("task: group:S3\nmodel: {layers: rnn}\nsteps: three hundred\n")
    assert main(["train", "--config", "run.yaml", "--db", "r.db"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            "error: config file 'run.yaml': key 'steps' expects int: Input should be a valid integer"
        )
        and "(got 'three hundred')" in err
        and err.count("\n") == 1
    ), err
    (tmp_path / "run.yaml").write_text("task: group:S3\nmodel: {layers: rnn}\neval: {batch_size: 0}\n")
    assert main(["train", "--config", "run.yaml", "--db", "r.db"]) == 2
    assert (
        "config file 'run.yaml': key 'eval.batch_size' expects int: Input should be greater than or equal "
        "to 1 (got 0)"
    ) in capsys.readouterr().err
    # a file's value is checked as the file is read (a --set of the same key does not hide the file's mistake)
    (tmp_path / "run.yaml").write_text("task: group:S3\nmodel: {layers: rnn}\neval: {batch_size: 2}\n")
    assert (
        main(
            [
                "train",
                "--config",
                "run.yaml",
                "--set",
                "eval.batch_size=3",
                "--set",
                "steps=x",
                "--db",
                "r.db",
            ]
        )
        == 2
    )
    assert "--set: key 'steps' expects int:" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()


def test_no_suggestion_when_nothing_is_close(capsys):
    assert main(["train", "--layers", "xyzzy"]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "allowed: " in err


def test_edit_distance():
    assert edit_distance("mamab", "mamba") == 1  # a swap of neighbours costs one
    assert edit_distance("", "abc") == 3 and edit_distance("kitten", "sitting") == 3
    assert closest("s3", ["S3", "S4", "A4"]) == ["S3"]  # case ignored, ties kept
    assert closest("dfb", ["dfa", "dfc"]) == ["dfa", "dfc"]
    assert closest("qqqqqq", ["parity"]) == []
    # a name given without its end: the names it begins, give or take a third of its characters
    studies = ["diag-limits-2026", "grazzi2024", "grazzi2024-lm", "zoo-parity"]
    assert closest("diag-limits", studies) == ["diag-limits-2026"]
    assert closest("diag-limitz", studies) == ["diag-limits-2026"]
    assert closest("grazzi", studies) == ["grazzi2024", "grazzi2024-lm"]
    assert closest("zoo", studies) == []  # under 4 characters: too short to name a prefix
