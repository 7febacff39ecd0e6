"""The recurrences' registry (``statetrack.ops.recurrences``): every folder of ``ops`` is a registered recurrence
whose fast forms match its float64 step-by-step reference and whose transitions' eigenvalues lie in the range
it declares; and the recipe of docs/extending.md ("A recurrence"), one folder and one line, followed as
written."""

from __future__ import annotations

import dataclasses
import re
import runpy
import sys
from pathlib import Path

import pytest

from statetrack.ops import recurrences
from statetrack.ops.recurrences import Disc, RealRange

OPS = Path(recurrences.__file__).parent
DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def test_every_folder_is_a_registered_recurrence():
    """A folder of ops/ is a recurrence: its reference, its declaration, and its name in BUILTIN."""
    folders = sorted(p.name for p in OPS.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(recurrences.BUILTIN)
    for name in folders:
        assert (OPS / name / "reference.py").is_file() and (OPS / name / "declaration.py").is_file(), name
    assert list(recurrences.registered())[: len(recurrences.BUILTIN)] == list(recurrences.BUILTIN)


@pytest.mark.parametrize("name", recurrences.BUILTIN)
def test_forms_match_the_reference_and_eigenvalues_lie_in_the_declared_range(name):
    rec = recurrences.recurrence(name)
    recurrences.check(rec)
    assert {form for form, _ in recurrences.form_errors(rec)} == set(rec.forms)
    assert (rec.eigenvalues is None) == (name == "slstm")  # sLSTM is the one non-linear recurrence


def test_the_checks_can_fail():
    """A form off by 0.1% fails the float32 check; a range narrower than the eigenvalues fails the range
    check, each named."""
    rec = recurrences.recurrence("gla")
    good = rec.forms["chunked"]
    off = dataclasses.replace(rec, forms={"off": lambda *x: tuple(o * 1.001 for o in good(*x))})
    with pytest.raises(AssertionError, match=r"gla: forms off the reference in torch.float64 .*'off', 1\)"):
        recurrences.check(off)
    with pytest.raises(AssertionError, match=r"gla: eigenvalues outside RealRange\(low=0.0, high=0.5\)"):
        recurrences.check(dataclasses.replace(rec, eigenvalue_range=RealRange(0.0, 0.5)))
    with pytest.raises(AssertionError, match="eigenvalues outside Disc"):
        recurrences.check(dataclasses.replace(recurrences.recurrence("diag"), eigenvalue_range=Disc(0.9)))


def test_an_unknown_name_says_the_allowed_ones():
    with pytest.raises(Exception, match="'mambo'.*did you mean 'mamba'") as e:
        recurrences.recurrence("mambo")
    assert "diag" in str(e.value)


def _documented_folder() -> dict[str, str]:
    """docs/extending.md's files of the folder leaky/, by name."""
    return dict(re.findall(r"```python\n# leaky/([\w.]+)\n(.*?)```", DOC.read_text(), re.S))


@pytest.fixture
def package(tmp_path, monkeypatch):
    """Write docs/extending.md's folder as ``mypackage.leaky`` (``edit`` changes a file's text first), on
    sys.path, with the registry and the imported modules restored afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(recurrences, "_REGISTERED", dict(recurrences.registered()))
    written: list[str] = []

    def write(name: str = "mypackage", edit: dict[str, tuple[str, str]] | None = None) -> Path:
        folder = tmp_path / name / "leaky"
        folder.mkdir(parents=True)
        (tmp_path / name / "__init__.py").write_text("")
        (folder / "__init__.py").write_text("")
        for file, text in _documented_folder().items():
            old, new = (edit or {}).get(file, ("", ""))
            assert old in text, (file, old)
            (folder / file).write_text(text.replace(old, new) if old else text)
        written.append(name)
        return folder

    yield write
    for m in [m for m in sys.modules if m.split(".")[0] in written]:
        del sys.modules[m]


def test_the_documented_recurrence_is_one_folder_and_one_line(package):
    files = _documented_folder()
    assert set(files) == {"reference.py", "scan.py", "declaration.py", "check.py"}
    assert len([line for line in files["check.py"].splitlines() if "recurrences.load(" in line]) == 1
    folder = package()
    runpy.run_path(str(folder / "check.py"))  # registers it, and runs the registry's checks
    rec = recurrences.recurrence("leaky")
    assert rec.forms.keys() == {"scan"} and rec.eigenvalue_range == RealRange(0.0, 1.0)
    assert max(recurrences.form_errors(rec).values()) < 1e-5
    assert recurrences.outside_range(rec) == []
    with pytest.raises(ValueError, match="'leaky' is already registered"):
        recurrences.load("mypackage.leaky")


@pytest.mark.parametrize(
    "edit,said",
    [
        (
            {"scan.py": ("diag_scan(torch.sigmoid(z), b, h0)", "diag_scan(torch.sigmoid(z) * 0.99, b, h0)")},
            "forms off",
        ),
        ({"declaration.py": ("RealRange(0.0, 1.0)", "RealRange(0.0, 0.5)")}, "eigenvalues outside"),
    ],
)
def test_the_checks_fail_on_a_wrong_folder(package, edit, said):
    package("wrongpackage", edit)
    with pytest.raises(AssertionError, match=f"leaky: {said}"):
        recurrences.check(recurrences.load("wrongpackage.leaky"))
