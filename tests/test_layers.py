"""The harness's import graph, read from the source with `ast`: no cycle, and the shared types at the bottom.
 Every `import harness...` and `from harness... import ...` statement is an edge (`from harness.pkg import name` goes
to `harness.pkg.name` where that is a module, else to `harness.pkg`). The rule chosen: the graph has no cycle, both
among module-level imports (those under `if TYPE_CHECKING:` included: a type a module names belongs below it) and
with the lazy ones (inside a function) added. A lazy import defers a cost (a framework, the report's libraries, a
telemetry back-end) to the process that needs it; it is not a way around a cycle, so it points down like any other.
Allowing lazy cycles would have hidden the one this test was written against: `matrix` and `companion_matrix`
imported each other, one side inside a function. Plug-ins loaded by a name built at run time
(`importlib.import_module(f"harness.models.{model}.{fw}")`) are not edges; tests/test_contracts.py checks those.
 With no cycle every module has a floor: 0 for one that imports nothing of the harness's, else one above the highest
it imports, so every import points down. "No module imports one above it" also needs the bottom to stay the
bottom, so the shared types (SHARED) may import only each other.

`python tests/test_layers.py [ROOT]` prints the graph, the floors and the cycles of ROOT/harness (default: this
checkout's).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What every layer reads, made by the matrix module and the runner: cells, their ids and settings, errors, the child's
# context, the plug-in contracts and the event log the contracts name.
SHARED = {"harness.config.cell", "harness.config.cellid", "harness.config.spec", "harness.errors", "harness.config.context", "harness.contracts",  # noqa: E501
          "harness.results.eventlog", "harness.paths"}


def modules(root: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for every module and package of root/harness."""
    out = {}
    for path in sorted((root / "harness").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def edges(root: Path = REPO) -> set[tuple[str, str, str]]:
    """(importer, imported, how) for every harness import; how: `module`, `types` (TYPE_CHECKING) or `lazy`."""
    mods = modules(root)

    def owner(name: str) -> str:  # the module a dotted name lives in
        while name not in mods:
            name = name.rpartition(".")[0]
        return name

    out: set[tuple[str, str, str]] = set()

    def walk(node: ast.AST, name: str, how: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = how
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                here = "lazy"
            elif isinstance(child, ast.If) and how == "module" and "TYPE_CHECKING" in ast.unparse(child.test):
                here = "types"
            if isinstance(child, ast.Import):
                out.update((name, owner(a.name), here) for a in child.names if a.name.split(".")[0] == "harness")
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module \
                    and child.module.split(".")[0] == "harness":
                for a in child.names:
                    full = f"{child.module}.{a.name}"
                    out.add((name, full if full in mods else owner(child.module), here))
            walk(child, name, here)

    for name, path in mods.items():
        walk(ast.parse(path.read_text(), str(path)), name, "module")
    return {e for e in out if e[0] != e[1]}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def graph_of(all_edges: set[tuple[str, str, str]], kinds: tuple[str, ...]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b, how in all_edges:
        if how in kinds:
            out.setdefault(a, set()).add(b)
    return out


def floors(graph: dict[str, set[str]], names) -> dict[str, int]:
    """0 for a module that imports nothing of the harness's, else one above its highest import (graph acyclic)."""
    out: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in out:
            out[v] = 1 + max((floor(w) for w in graph.get(v, ())), default=-1)
        return out[v]

    for v in names:
        floor(v)
    return out


MODULE_LEVEL = ("module", "types")
ALL = ("module", "types", "lazy")


def test_module_level_imports_have_no_cycle():
    found = cycles(graph_of(edges(), MODULE_LEVEL))
    assert not found, f"module-level import cycles: {found}"


def test_lazy_imports_point_down_too():
    found = cycles(graph_of(edges(), ALL))
    assert not found, f"import cycles with the lazy imports: {found}"


def test_shared_types_import_only_shared_types():
    upward = sorted((a, b, how) for a, b, how in edges() if a in SHARED and b not in SHARED)
    assert not upward, f"shared types importing from above them (importer, imported, how): {upward}"


def folder(name: str) -> str:
    """The folder of an axis a module lives in (`harness.config.cell` -> `config`), or the top-level module's own
    name (`harness.contracts` -> `contracts`)."""
    return name.split(".")[1] if "." in name else name


def folder_edges(all_edges: set[tuple[str, str, str]]) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """(importing folder, imported folder) -> the module imports that make the arrow, lazy ones included."""
    out: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for a, b, how in sorted(all_edges):
        if folder(a) != folder(b):
            out.setdefault((folder(a), folder(b)), []).append((a, b, how))
    return out


# The folder-level arrows that may run back up, each closing a cycle of folders, with what it waits for: none now
# (the last, config -> claims, went when the paper's compared settings moved to harness/config/study.py). An arrow
# back added here needs its reason; one that is gone is struck, so that it cannot come back.
BACK: dict[tuple[str, str], str] = {}


def test_folders_import_each_other_in_no_cycle_but_the_known_arrows_back():
    arrows = folder_edges(edges())
    graph: dict[str, set[str]] = {}
    for a, b in set(arrows) - set(BACK):
        graph.setdefault(a, set()).add(b)
    found = cycles(graph)
    assert not found, "folders importing each other in a cycle: " + "; ".join(
        f"{c}: " + ", ".join(f"{a}->{b} ({arrows[a, b][0][0]} imports {arrows[a, b][0][1]})"
                             for a in c for b in c if (a, b) in arrows and (a, b) not in BACK) for c in found)
    gone = sorted(set(BACK) - set(arrows))
    assert not gone, f"arrows back that are gone (strike them from BACK): {gone}"


def main(root: Path) -> None:
    all_edges = edges(root)
    names = sorted(modules(root))
    print(f"import graph of {root / 'harness'} ({len(names)} modules, {len(all_edges)} edges)")
    for name in names:
        out = sorted((b, how) for a, b, how in all_edges if a == name)
        if out:
            print(f"  {name} -> " + ", ".join(b if how == "module" else f"{b} ({how})" for b, how in out))
    for label, kinds in (("module-level", MODULE_LEVEL), ("lazy included", ALL)):
        print(f"cycles, {label}: {cycles(graph_of(all_edges, kinds)) or 'none'}")
    print("shared types importing from above:",
          sorted((a, b) for a, b, _ in all_edges if a in SHARED and b not in SHARED) or "none")
    for label, kinds in (("lazy included", ALL), ("module-level", MODULE_LEVEL)):
        graph = graph_of(all_edges, kinds)
        if not cycles(graph):  # the floors of the widest graph that has them
            print(f"floors ({label}):")
            by_floor: dict[int, list[str]] = {}
            for name, f in floors(graph, names).items():
                by_floor.setdefault(f, []).append(name.removeprefix("harness."))
            for f in sorted(by_floor):
                print(f"  {f}: {' '.join(sorted(by_floor[f]))}")
            break


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO)
