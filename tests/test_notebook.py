"""docs/tutorial.ipynb: committed without outputs, and executed top to bottom in a fresh folder (slow:
it trains two small models; nbclient and ipykernel are test requirements)."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "tutorial.ipynb"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_notebook_is_committed_without_outputs():
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 6
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    text = "\n".join("".join(c["source"]) for c in code)
    for needle in (
        "run(",
        "oracle(",
        "counterexample(",
        "spectrum(",
        'test_split="long"',
        "compare_runs(",
        "runs_figure(",
    ):
        assert needle in text, needle
    # one folder, stated and printed, whatever folder Jupyter was started in
    assert 'OUT = Path(os.environ.get("STATETRACK_TUTORIAL_DIR") or Path.home()' in text
    assert 'print("this notebook writes into", OUT)' in text and "runs/" not in text


def test_notebook_writes_into_the_folder_it_states(tmp_path, monkeypatch):
    """The first code cell, run from another folder: it writes only into OUT, the folder it prints."""
    nb = json.loads(NOTEBOOK.read_text())
    first = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    out, started = tmp_path / "out", tmp_path / "started-here"
    started.mkdir()
    monkeypatch.chdir(started)
    monkeypatch.setenv("STATETRACK_TUTORIAL_DIR", str(out))
    names: dict = {}
    exec(compile(first, "tutorial-cell-1", "exec"), names)
    assert names["DB"] == str(out / "tutorial.db") and out.is_dir() and list(started.iterdir()) == []


@pytest.mark.slow
def test_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    shutil.copy(NOTEBOOK, tmp_path / NOTEBOOK.name)
    # the kernel imports this checkout's statetrack, and writes only in its own folder
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("STATETRACK_TUTORIAL_DIR", str(tmp_path / "out"))
    nb = nbformat.read(tmp_path / NOTEBOOK.name, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [
        "".join(o.get("text", "")) + json.dumps(o.get("data", {}))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    ]
    text = "\n".join(outputs)
    assert not any(
        o.get("output_type") == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert re.search(r"mamba,s4d +impossible", text) and re.search(r"negmamba +possible", text)  # the oracle
    assert text.count('"image/png"') == 2  # the spectrum and the comparison figure, drawn inline
    assert "beyond the intervals" in text and (tmp_path / "out" / "tutorial.db").is_file()
    assert f"this notebook writes into {tmp_path / 'out'}" in text and not (tmp_path / "runs").exists()
