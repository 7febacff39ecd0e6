"""docs/reliability.md links each promise and each fault to the tests that hold it: every test it names
exists. A name is ``tests/FILE.py::TEST``, or ``::TEST`` after such a file in the same paragraph or
table row."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
LINK = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")


def named_tests(text: str) -> list[tuple[str | None, str | None]]:
    """(file, test) for each test the text names; test is None for a whole file, file None for a
    ``::TEST`` with no file before it in its paragraph or table row."""
    out: list[tuple[str | None, str | None]] = []
    for part in re.split(r"\n\s*\n|\n(?=\|)", text):
        file = None
        for m in LINK.finditer(part):
            if m[1]:
                file = m[1]
            out.append((file, m[2] or m[3]))
    return out


def test_named_tests_parse_rows_and_paragraphs():
    text = "| a | `tests/x.py::t1`, `::t2` |\n| b | `::t3` |\n\nSee `tests/y.py`,\n`::t4`."
    assert named_tests(text) == [
        ("tests/x.py", "t1"),
        ("tests/x.py", "t2"),
        (None, "t3"),
        ("tests/y.py", None),
        ("tests/y.py", "t4"),
    ]


def _tests_in(path: Path) -> set[str]:
    return {f.name for f in ast.walk(ast.parse(path.read_text())) if isinstance(f, ast.FunctionDef)}


def test_every_test_the_reliability_doc_names_exists():
    named = named_tests(DOC.read_text())
    assert len(named) > 50  # the doc's tables and paragraphs were read
    missing = [
        f"{file}::{test}"
        for file, test in named
        if file is None or not (ROOT / file).is_file() or (test and test not in _tests_in(ROOT / file))
    ]
    assert not missing, f"docs/reliability.md names tests that do not exist: {missing}"
