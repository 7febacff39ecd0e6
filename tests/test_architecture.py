"""The package's architecture, read from its source with ``ast``: no import cycle, imports flow one way
(from the command line down to the ops), and no package attribute hides the module of the same name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import statetrack

ROOT = Path(statetrack.__file__).parent

#: the package's units from the bottom up: a module may import its own unit and the units below it (the
#: table of docs/architecture.md)
LAYERS = [
    {"errors", "version", "files", "progress", "untrusted"},
    {"spec", "algebra", "plugins"},
    {"ops"},
    {"config"},
    {"layers"},
    {"lm"},
    {"tasks"},
    {"model"},
    {"training"},
    {"theory"},
    {"runs"},
    {"experiments"},
    {"report"},
    {"reproduce", "scorecard"},
    {"cli"},
    {""},  # the package itself: the notebook API re-exports from every layer
]
RANK = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path, typing: bool = False) -> set[str]:
    """Modules of the package that ``name`` imports anywhere (functions included); those under
    ``if TYPE_CHECKING:`` only with ``typing``."""
    tree = ast.parse(path.read_text())
    hidden = (
        set()
        if typing
        else {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
    )
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in MODULES else base)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}
#: with the imports made for type hints only: a module pair that needs each other's types is a circle too
TYPED_GRAPH = {name: _imports(name, path, typing=True) for name, path in MODULES.items()}
PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py")


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return cycles


def test_every_unit_has_a_layer():
    assert {_unit(m) for m in MODULES} <= set(RANK), sorted({_unit(m) for m in MODULES} - set(RANK))


def test_no_import_cycle():
    assert not _cycles(TYPED_GRAPH), f"import cycles: {_cycles(TYPED_GRAPH)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_cycle_between_the_parts_of_a_package(package):
    """Inside each package (report/, theory/, cli/, ...), its modules and sub-packages, each taken as one
    part, import one another one way: no two parts need each other, even through a third."""
    depth = package.count(".") + 1

    def part(module: str) -> str | None:
        return module.split(".")[depth] if module.startswith(package + ".") else None

    parts: dict[str, set[str]] = {}
    for a, bs in TYPED_GRAPH.items():
        if (pa := part(a)) is not None:
            parts.setdefault(pa, set()).update(pb for b in bs if (pb := part(b)) not in (None, pa))
    assert not _cycles(parts), f"{package}: parts that import each other: {_cycles(parts)}"


def test_imports_flow_down():
    upward = sorted(f"{a} -> {b}" for a, bs in GRAPH.items() for b in bs if RANK[_unit(b)] > RANK[_unit(a)])
    assert not upward, "upward imports: " + "; ".join(upward)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_attribute_shadows_its_submodule(package):
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("__"):  # __main__ runs the command line
            continue
        mod = importlib.import_module(f"{package}.{info.name}")
        attr = getattr(pkg, info.name)
        assert attr is mod, f"{package}.{info.name} is {attr!r}, not the module {mod.__name__}"


def test_the_architecture_page_is_this_layering():
    """docs/architecture.md's table lists LAYERS, bottom up, row by row."""
    page = (ROOT.parents[1] / "docs" / "architecture.md").read_text()
    rows = [line for line in page.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [set(re.findall(r"`([a-z_]+)`", r.split("|")[2])) or {""} for r in rows] == LAYERS


def test_variants_are_types():
    """No branch on a language-modelling 'kind' string; no mixer declares its properties with strings."""
    for name, path in MODULES.items():
        text = path.read_text()
        assert not re.search(r"""kind [!=]= ["']lm["']""", text), name
        if name.startswith("statetrack.layers."):
            assert not re.search(r"""(eigenvalues|structure)=["']""", text), name


#: a function longer than this many lines is split, or says why not in a ``# long: REASON`` comment on the
#: line above its ``def`` (or above its first decorator)
MAX_LINES = 60


def test_a_long_function_says_why():
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_LINES:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if not lines[first - 2].strip().startswith("# long: "):
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not unexplained, f"over {MAX_LINES} lines without a '# long: REASON' line above: {unexplained}"
