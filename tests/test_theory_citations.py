"""Every name the code and the docs cite resolves in docs/science.md: the oracle's bases, the
constructions' bases, and every reference key (Author2024 style) in src/, docs/ and README.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = (ROOT / "docs" / "science.md").read_text()
KEY = re.compile(r"\b([A-Z][A-Za-z]+(?:19|20)\d\d)\b")


def _references() -> set[str]:
    refs = SCIENCE.split("## 8. References", 1)[1]
    return set(re.findall(r"^\| (\w+) \|", refs, flags=re.M)) - {"key"}


def _result_names() -> set[str]:
    results = SCIENCE.split("## 4. Results", 1)[1].split("### ", 1)[0]
    return set(re.findall(r"^\| ([\w-]+) \|", results, flags=re.M)) - {"name"}


def test_oracle_and_construction_bases_are_named_in_science_md():
    from statetrack.constructions import REGISTRY
    from statetrack.theory.verdicts import BASES

    names = _result_names()
    assert set(BASES) <= names, set(BASES) - names
    assert {basis for _, basis, *_ in REGISTRY.values()} <= names
    for text in BASES.values():
        assert set(KEY.findall(text)) <= _references(), text


def test_every_cited_key_has_a_reference():
    refs = _references()
    files = [p for p in (ROOT / "src").rglob("*") if p.suffix in (".py", ".yaml")]
    files += list((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    missing = {}
    for p in files:
        for key in set(KEY.findall(p.read_text())) - refs:
            missing.setdefault(key, str(p.relative_to(ROOT)))
    assert not missing, missing
