"""The package's import graph, drawn: one box per unit (a root module or a sub-package), one arrow per unit
that imports another, units in rows by their depth (a unit sits above every unit it imports).

    python bench/import_graph.py [--src src/statetrack] [--out graph.svg] [--modules]

Prints the units from the top down with what each imports, the number of root modules and their lines, and
any cycle; ``--out`` draws the graph (svg, png or pdf, by matplotlib). ``--modules`` draws one box per
module instead of per unit. Read from the source with ``ast``: nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
        out[".".join(parts)] = p
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere, those under ``if TYPE_CHECKING:`` included."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in known else base)
    return {m for m in out if m in known and m != name}


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(package)"


def depths(graph: dict[str, set[str]]) -> dict[str, int]:
    """A node's depth: 0 for a node importing nothing, else 1 + the deepest node it imports (cycles cut)."""
    out: dict[str, int] = {}

    def visit(v: str, seen: frozenset[str]) -> int:
        if v in out:
            return out[v]
        d = 1 + max((visit(w, seen | {v}) for w in graph[v] if w not in seen), default=-1)
        out[v] = d
        return d

    for v in graph:
        visit(v, frozenset())
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
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
            while (w := stack.pop()) != v:
                on.discard(w)
                comp.append(w)
            on.discard(v)
            if comp:
                found.append(sorted([v, *comp]))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def draw(graph: dict[str, set[str]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depth = depths(graph)
    rows: dict[int, list[str]] = defaultdict(list)
    for v in sorted(graph):
        rows[depth[v]].append(v)
    width = max(len(r) for r in rows.values())
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * width), 0.9 * (len(rows) + 1)))
    pos = {v: ((i + 0.5) * width / len(row), d) for d, row in rows.items() for i, v in enumerate(row)}
    for v, ws in graph.items():
        for w in ws:
            (x0, y0), (x1, y1) = pos[v], pos[w]
            ax.annotate(
                "",
                (x1, y1 + 0.15),
                (x0, y0 - 0.15),
                arrowprops={
                    "arrowstyle": "->",
                    "color": "red" if depth[w] >= depth[v] else "0.6",
                    "lw": 0.6,
                    "shrinkA": 0,
                    "shrinkB": 0,
                },
            )
    for v, (x, y) in pos.items():
        ax.text(
            x,
            y,
            v,
            ha="center",
            va="center",
            fontsize=7,
            bbox={"boxstyle": "round", "fc": "#eef3fb", "ec": "#4a6fa5"},
        )
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(-0.7, max(rows) + 0.7)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src" / "statetrack")
    p.add_argument("--out", type=Path, help="draw the graph to this file (svg, png, pdf)")
    p.add_argument("--modules", action="store_true", help="one box per module, not per unit")
    args = p.parse_args()
    known = modules(args.src)
    by_module = {m: imports(m, path, known) for m, path in known.items()}
    key = (lambda m: m.removeprefix("statetrack.")) if args.modules else unit
    graph: dict[str, set[str]] = defaultdict(set)
    for m, deps in by_module.items():
        graph[key(m)] |= {key(d) for d in deps if key(d) != key(m)}
    graph = dict(graph)
    depth = depths(graph)
    root = [p for m, p in known.items() if m.count(".") == 1 and p.name != "__init__.py"]
    packages = [m for m, p in known.items() if m.count(".") == 1 and p.name == "__init__.py"]
    lines = sum(len(p.read_text().splitlines()) for p in root)
    print(
        f"{len(known)} modules; the root: {len(root)} modules ({lines} lines) beside {len(packages)} packages"
    )
    for v in sorted(graph, key=lambda v: (-depth[v], v)):
        print(f"  [{depth[v]:2d}] {v} -> {', '.join(sorted(graph[v])) or '-'}")
    found = cycles(graph)
    print(f"cycles: {found or 'none'}")
    if args.out:
        draw(graph, args.out, f"{args.src}: {len(graph)} {'modules' if args.modules else 'units'}")
        print(f"drawn to {args.out}")


if __name__ == "__main__":
    main()
