"""No import circle between the modules of the harness and the reference nodes.

A circle (``a`` imports ``b``, which imports ``a``) makes the order of
imports matter, hides which module owns what, and is what function-local
imports are written to dodge. This test builds the import graph of every
module under conformance/ and reference_impl/ from the source (``ast``, so
nothing is imported and an optional dependency missing does not matter),
finds its strongly connected components, and fails naming every circle.

What counts as an edge ``a -> b`` (b one of the project's modules):

* every ``import`` statement anywhere in ``a``: at module level, in a
  function, under ``if TYPE_CHECKING:`` (a circle that only typing closes is
  still two modules that each need the other);
* ``import p.q.r`` is an edge to ``p.q.r``;
  ``from p.q import r`` to ``p.q.r`` when that is a module, else to ``p.q``
  (``r`` is a name ``p.q`` defines); relative imports are resolved against
  the importing module's package.

What does not: the packages Python runs on the way to a submodule
(``import p.q.r`` also runs ``p/__init__`` and ``p/q/__init__``). A package
whose ``__init__`` re-exports its submodules' names (``from .tool import
Coverage``) imports those submodules, and each submodule "imports" its
package that way; counting that would make every re-exporting package a
circle, though nothing in it depends on the order. It is a circle only when
the submodule takes a name the package's ``__init__`` defines or re-exports
(``from conformance.coverage import Coverage`` inside conformance/coverage/):
that is an explicit ``from p import name`` edge, and it is counted.

Imports by computed name (``importlib.import_module(package + ".preflight")``)
are not seen: they name no module in the source.
"""

from __future__ import annotations

import ast
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
ROOTS = ("conformance", "reference_impl")


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module in ``path`` (a package's ``__init__.py``
    is the package), relative to the folder ``root`` that holds the top
    packages."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules(root: Path, top_packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module of the top packages under ``root``: name -> file."""
    modules: dict[str, Path] = {}
    for top in top_packages:
        for path in sorted((root / top).rglob("*.py")):
            modules[module_name(root, path)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (in ``path``) imports
    anywhere in its source, by the rules of this file's docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                if submodule in modules:
                    found.add(submodule)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def import_graph(root: Path, top_packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module name -> the project's modules it imports."""
    modules = find_modules(root, top_packages)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, iterative: the graph is deeper than Python's recursion limit
    allows for in the worst case). A module importing itself is dropped by
    imported_modules, so a single module is never a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            if successors:
                successor = successors.pop(0)
                if successor not in graph:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, sorted(graph[successor])))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def describe(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    """The modules of a circle and, for each, which of the others it imports."""
    lines = [f"circle of {len(component)} modules:"]
    for member in sorted(component):
        inside = sorted(graph[member] & component)
        lines.append(f"  {member} imports {', '.join(inside)}")
    return "\n".join(lines)


def test_no_import_circle():
    """Issue 29 removed the last four (cli, mutation and the cross-check;
    core targets, containers and readiness; aggregate matrix and html; the
    STOMP suite's adapter and peer): none may come back."""
    graph = import_graph(REPO, ROOTS)
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(
        describe(c, graph) for c in sorted(found, key=sorted)
    )


def write_package(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_detector_finds_circles_in_a_synthetic_package(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from .api import run\n",
            "pkg/api.py": "from pkg import helpers\n\ndef run():\n    return helpers.go()\n",
            # Closed by a function-level relative import: still a circle.
            "pkg/helpers.py": "def go():\n    from .api import run\n    return run\n",
            # A two-level relative import, closed under TYPE_CHECKING.
            "pkg/sub/__init__.py": "",
            "pkg/sub/left.py": "from ..sub import right\n",
            "pkg/sub/right.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..sub.left import X\n"
            ),
            # Uses a name the package __init__ re-exports: a circle with it.
            "pkg/uses_init.py": "from pkg import run\n",
            "pkg/leaf.py": "import os\nimport pkg.api\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg"] == {"pkg.api"}
    assert graph["pkg.api"] == {"pkg.helpers"}  # a submodule, not the package
    assert graph["pkg.leaf"] == {"pkg.api"}
    assert graph["pkg.uses_init"] == {"pkg"}
    assert set(circles(graph)) == {
        frozenset({"pkg.api", "pkg.helpers"}),
        frozenset({"pkg.sub.left", "pkg.sub.right"}),
    }
    # pkg.uses_init imports pkg, which does not import it back: no circle.
    # Make the package import it and the three are one.
    write_package(tmp_path, {"pkg/__init__.py": "from .api import run\nfrom . import uses_init\n"})
    graph = import_graph(tmp_path, ("pkg",))
    assert frozenset({"pkg", "pkg.uses_init"}) in circles(graph)
    assert "pkg.uses_init imports pkg" in describe(frozenset({"pkg", "pkg.uses_init"}), graph)
