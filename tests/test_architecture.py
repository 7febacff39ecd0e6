"""The package's architecture, read from its source with ``ast``: no import cycle, imports flow one way
(from the command line down to the ops), and no package attribute hides the module of the same name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import statetrack
from conftest import SRC

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
    {"theory"},
    {"model"},
    {"training"},
    {"constructions", "analysis"},
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


#: the recurrences of ops/ built on another's folder: ``ops/<name>/`` imports the common modules of ops/ (chunks,
#: consts, conv, cpu_kernels, dispatch, fla, registry, triton_scans) and only the folders named here
#: (docs/architecture.md, "One folder per recurrence")
OPS_BUILT_ON = {
    "selective": {"diag"},  # the diagonal scan with the input x_t (outer) B_t
    "mamba3": {"diag"},  # polar(r, theta) and the complex scan
    "ssd": {"mamba"},  # Mamba's scan, one channel per head channel
    "gated_delta": {"deltanet", "dplr"},  # the delta rule's chunk algebra; dplr's step loop and reference
    "kda": {"deltanet", "gla", "dplr"},  # the gated delta rule's algebra, GLA's sub-chunks; dplr's reference
    "gla": {"dplr"},  # dplr's step loop and reference
}
OPS = "statetrack.ops"
OP_FOLDERS = sorted(m.split(".")[2] for m in PACKAGES if m.startswith(OPS + "."))


def _op_folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if module.startswith(OPS + ".") and parts[2] in OP_FOLDERS else None


def test_ops_folders_import_one_way():
    """Each recurrence's folder imports its own modules, the common modules of ops/ and the folders it is built
    on (OPS_BUILT_ON); a common module imports no folder (the package's ``__init__``, the notebook API, may)."""
    assert OPS_BUILT_ON.keys() <= set(OP_FOLDERS) and set().union(*OPS_BUILT_ON.values()) <= set(OP_FOLDERS)
    wrong = []
    for a, bs in TYPED_GRAPH.items():
        if not a.startswith(OPS + ".") or a == OPS:
            continue
        fa = _op_folder(a)
        allowed = {fa, *OPS_BUILT_ON.get(fa, ())} if fa else set()
        wrong += [
            f"{a} -> {b}" for b in sorted(bs) if (fb := _op_folder(b)) is not None and fb not in allowed
        ]
    assert not wrong, "imports between the folders of ops/ not in OPS_BUILT_ON: " + "; ".join(wrong)


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


def _external(path: Path) -> set[str]:
    """The top-level packages outside statetrack that a module imports anywhere (functions and type hints
    included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"statetrack"}


THEORY = sorted(m for m in MODULES if _unit(m) == "theory")
#: the modules of theory/ that compute with numpy (group tables, representations, float32 holds); this list only
#: shrinks: the rest of theory/ is plain Python over the declarations and the task's algebra
NUMPY_IN_THEORY = {
    "statetrack.theory.actions",
    "statetrack.theory.monoid",
    "statetrack.theory.precision",
    "statetrack.theory.representations",
}


def test_theory_is_pure_math():
    """No module of theory/ imports torch (what needs a model is in ``constructions`` and ``analysis``), and
    numpy only where NUMPY_IN_THEORY says it already did."""
    torch_users = [m for m in THEORY if "torch" in _external(MODULES[m])]
    assert not torch_users, f"theory/ imports torch: {torch_users}"
    numpy_users = {m for m in THEORY if "numpy" in _external(MODULES[m])}
    assert numpy_users <= NUMPY_IN_THEORY, (
        f"numpy in theory/ beyond NUMPY_IN_THEORY: {numpy_users - NUMPY_IN_THEORY}"
    )
    assert numpy_users >= NUMPY_IN_THEORY, f"no numpy left: take them out: {NUMPY_IN_THEORY - numpy_users}"


def test_theory_loads_without_torch():
    """Every module of theory/, and the oracle's calls as the command line makes them (``statetrack oracle``:
    one verdict, and the table), leave torch unloaded, through every package on the way."""
    code = (
        "import importlib, sys\n"
        "import statetrack.theory as t\n"
        f"for m in {THEORY!r}: importlib.import_module(m)\n"
        "t.oracle('mamba,s4d', 'parity'); t.oracle('deltaproduct(nh=3,neg=true)', 'group:A5')\n"
        "t.oracle_table(['mamba*2', 'deltaproduct(nh=2,neg=true)'], ['parity', 'tomita:3', 'group:S3'])\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'safetensors') if m in sys.modules))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "", "PYTHONPATH": SRC}
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[]", p.stdout


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


# -- typed store records (runs.store.RunRecord, MetricRow) ------------------------------------------------
#: the store's readers that return records (``Store.run``, ``runs``, ``find``, ``metrics``,
#: ``split_metrics``; ``cli.args.find_run``)
RECORD_READERS = {"run", "runs", "find", "metrics", "split_metrics", "find_run"}
RECORD_TYPES = {"RunRecord", "MetricRow"}
#: modules outside runs/ still allowed to read store records with string keys. This list only shrinks, and
#: it is empty: every module reads attributes, and the records take no string key any more (the
#: dict-style reading that the conversion kept for a while is gone)
NOT_YET_TYPED: set[str] = set()
#: calls whose result holds what their first argument holds
PASS_THROUGH = {"next", "max", "min", "sorted", "list", "reversed"}


def _reader(node: ast.AST | None) -> str | None:
    """The reader a call is (``store.runs(...)``, ``find_run(...)``), or None."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "subprocess":
        return None
    return name if name in RECORD_READERS else None


#: the nodes that open a scope of their own: a name bound inside is not the same name outside
SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _own_nodes(scope: ast.AST):
    """The nodes of a scope, less those of the scopes inside it (each of which is yielded, not entered)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def _names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


class _Holders:
    """The names of one function (or module) that hold store records or lists of them, and those that
    hold ``split_metrics``'s dict of them by split (whose string keys are splits, not fields)."""

    def __init__(self, scope: ast.AST, outer: _Holders | None = None, fields: frozenset[str] = frozenset()):
        #: attributes that hold records: the fields a class of the module declares with a record type
        self.fields = outer.fields if outer else fields
        self.records: set[str] = set(outer.records) if outer else set()
        self.by_split: set[str] = set(outer.by_split) if outer else set()
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):  # parameters shadow
            params = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
            self.records -= params
            self.by_split -= params
        for _ in range(3):  # names bound from names: a few passes reach the fixed point
            for node in _own_nodes(scope):
                self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):  # ra, rb = run(1), run(2)
                    for name, value in zip(t.elts, node.value.elts, strict=False):
                        if self.holds(value):
                            self.records |= _names(name)
                elif self.splits(node.value):
                    self.by_split |= _names(t)
                elif self.holds(node.value):
                    # row, same = store.find(ref): the record is the first of the pair
                    pair = isinstance(t, ast.Tuple) and _reader(node.value) is not None
                    self.records |= _names(t.elts[0] if pair else t)  # type: ignore[attr-defined]
        elif isinstance(node, ast.For | ast.comprehension):
            if self.holds(node.iter):
                self.records |= _names(node.target)
            elif isinstance(node, ast.comprehension):  # its variable shadows one outside
                self.records -= _names(node.target)
        elif (
            isinstance(node, ast.arg)
            and node.annotation is not None
            and _names(node.annotation) & RECORD_TYPES
        ):
            self.records.add(node.arg)

    def splits(self, v: ast.AST) -> bool:
        """``v`` is a dict of records by split."""
        return _reader(v) == "split_metrics" or (isinstance(v, ast.Name) and v.id in self.by_split)

    def holds(self, v: ast.AST) -> bool:
        """``v`` is a record or a collection of them."""
        if _reader(v) not in (None, "split_metrics"):
            return True
        if isinstance(v, ast.Name):
            return v.id in self.records
        if isinstance(v, ast.Attribute):  # compared.row, declared `row: RunRecord`
            return v.attr in self.fields
        if isinstance(v, ast.Subscript):  # rows[-1], store.split_metrics(i)[split]; not record["field"]
            field = isinstance(v.slice, ast.Constant) and isinstance(v.slice.value, str)
            return self.splits(v.value) if field else self.holds(v.value) or self.splits(v.value)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("values", "get"):
            # split_metrics(i).get(split, []); a record's .get("field") is a field, not a record
            return self.splits(v.func.value)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in PASS_THROUGH:
            return any(self.holds(a) for a in v.args[:1])
        if isinstance(v, ast.GeneratorExp | ast.ListComp | ast.DictComp):  # {r.id: r for r in rows}
            elt = v.value if isinstance(v, ast.DictComp) else v.elt
            return isinstance(elt, ast.Name) and any(self.holds(g.iter) for g in v.generators)
        if isinstance(v, ast.BoolOp):
            return any(self.holds(x) for x in v.values)
        if isinstance(v, ast.IfExp):
            return self.holds(v.body) or self.holds(v.orelse)
        return False


def _keyed(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(base, key) of ``base["key"]`` or ``base.get("key", ...)``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base, key = node.value, node.slice.value
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        base, key = node.func.value, node.args[0].value
    else:
        return None
    return (base, key) if isinstance(key, str) else None


def _string_key_lookups(source: str, where: str) -> list[str]:
    """``record["name"]`` and ``record.get("name")`` on what holds store records, each with its line."""
    out: dict[tuple[int, int], str] = {}

    tree = ast.parse(source)
    fields = frozenset(
        n.target.id
        for c in ast.walk(tree)
        if isinstance(c, ast.ClassDef)
        for n in c.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and _names(n.annotation) & RECORD_TYPES
    )

    def visit(scope: ast.AST, outer: _Holders | None) -> None:
        holders = _Holders(scope, outer, fields)
        for node in _own_nodes(scope):
            keyed = _keyed(node)
            if keyed is not None and holders.holds(keyed[0]):
                out[(node.lineno, node.col_offset)] = f"{where}:{node.lineno} {ast.unparse(node)}"
            if isinstance(node, SCOPES):
                visit(node, holders)

    visit(tree, None)
    return [out[k] for k in sorted(out)]


def _lookups(module: str) -> list[str]:
    path = MODULES[module]
    return _string_key_lookups(path.read_text(), str(path.relative_to(ROOT)))


def test_store_records_are_read_by_attribute():
    """Outside runs/, a store record's field is an attribute (``r.summary``), never a string key
    (``r["summary"]``), but in the modules of NOT_YET_TYPED."""
    found = [x for m in sorted(MODULES) if _unit(m) != "runs" and m not in NOT_YET_TYPED for x in _lookups(m)]
    assert not found, f"string keys on store records (read the attribute instead): {found}"


def test_the_untyped_list_only_shrinks():
    """Every module of NOT_YET_TYPED still reads records by string key: a converted one leaves the list."""
    stale = [m for m in sorted(NOT_YET_TYPED) if m not in MODULES or not _lookups(m)]
    assert not stale, f"no string key on a store record left: take them out of NOT_YET_TYPED: {stale}"


def test_the_record_check_sees_each_way_a_name_holds_a_record():
    src = """
class Compared:
    row: RunRecord


def f(store, ref, r0: RunRecord, db, c: Compared):
    row, _ = store.find(ref)
    rows = store.runs(key="k")
    last = next((r for r in rows if r["id"] > 1), None)
    ms = store.metrics(1)
    acc = [m["accuracy"] for m in store.split_metrics(1).get("long", [])]
    done = sorted(rows, key=len)[-1]
    cfg = {"status": 1}
    labels = {r["label"] for r in [{"label": 1}]}  # another r, a dict
    by_id = {r.id: r for r in rows}
    ra, n = store.run(1), 2
    return (
        row["status"], last.get("summary"), r0["config"], store.run(3)["label"], ms[0],
        done["wall_time"], find_run(db, ref)["checkpoint"], cfg["status"], acc, c.row["id"],
        by_id[3]["error"], ra["uuid"],
    )
"""
    found = [x.split(" ", 1)[1] for x in _string_key_lookups(src, "probe")]
    assert found == [
        "r['id']",
        "m['accuracy']",
        "row['status']",
        "last.get('summary')",
        "r0['config']",
        "store.run(3)['label']",
        "done['wall_time']",
        "find_run(db, ref)['checkpoint']",
        "c.row['id']",
        "by_id[3]['error']",
        "ra['uuid']",
    ], found


def _commands() -> dict[str, object]:
    """Every command of the parser (``statetrack NAME``) and the function it runs."""
    import argparse

    from statetrack.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p.get_default("fn") for name, p in sub.choices.items()}


def _names_reached(fn) -> set[str]:
    """The names a command's function uses, with those of the functions of its own module it calls, and
    theirs (a command's helpers: ``_sweep``, ``_write``)."""
    import inspect

    module = inspect.getmodule(fn)
    tree = ast.parse(inspect.getsource(module))
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo, names = set(), [fn.__name__], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name):
                names.add(node.id)
                if node.id in defs:
                    todo.append(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.rsplit(".", 1)[-1])
    return names


def test_every_command_calls_the_function_docs_name_for_it():
    page = (ROOT.parent.parent / "docs" / "architecture.md").read_text()
    table = dict(re.findall(r"^\| `([a-z-]+)` \| `(statetrack[\w.]+)` \|$", page, re.M))
    commands = _commands()
    assert set(table) == set(commands), "docs/architecture.md's table of commands and the parser differ"
    for command, target in table.items():
        module, _, name = target.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), target
        assert name in _names_reached(commands[command]), f"statetrack {command} does not call {target}"


def test_a_file_name_names_one_concept():
    """No two modules share a file name across packages, except ``__init__`` and ``base`` (a package's
    base classes), a mixer's name (its layer, its construction), and the files of the op folders
    (``ops/<recurrence>/reference.py`` beside each other, ``ops/fla.py`` shared by each folder's
    ``fla.py``, as flash-linear-attention lays them out)."""
    from statetrack.layers import _BUILTIN

    where: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        folder = path.parent.relative_to(ROOT).as_posix()
        if folder.startswith("ops"):  # the op folders and the modules they share: one package
            folder = "ops"
        where.setdefault(path.stem, set()).add(folder)
    allowed = {"__init__", "base", *_BUILTIN}
    repeated = {name: sorted(f) for name, f in where.items() if len(f) > 1 and name not in allowed}
    assert not repeated, f"file names used in more than one package: {repeated}"


#: a module longer than this many lines is split, or says why not in a ``# long: REASON`` first line
MAX_MODULE_LINES = 500


def test_a_long_module_says_why():
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        if len(lines) > MAX_MODULE_LINES and not lines[0].startswith("# long: "):
            unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert not unexplained, (
        f"over {MAX_MODULE_LINES} lines without a '# long: REASON' first line: {unexplained}"
    )


def test_a_plain_run_loads_no_machinery_it_does_not_name(tmp_path):
    """A run with no construction, study or oracle loads none of them: the constructions, the theory, the
    studies and the reports stay unimported (a run that names one loads it then)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from statetrack.config import EvalConfig, ModelConfig, TrainConfig\n"
        "from statetrack.runs.runner import run\n"
        "cfg = TrainConfig(task='parity', model=ModelConfig(layers='rnn', d_model=4, d_state=4), steps=2, "
        "eval_every=2, batch_size=4, val_sequences=4)\n"
        f"run(cfg, EvalConfig(lengths=[8], batch_size=4), db={str(tmp_path / 'r.db')!r})\n"
        "print(' '.join(m for m in sys.modules if m.startswith('statetrack.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    for unit in ("constructions", "theory", "experiments", "report", "analysis"):
        assert not {m for m in loaded if m.startswith(f"statetrack.{unit}")}, unit
    assert "statetrack.runs.runner" in loaded  # the probe did run
