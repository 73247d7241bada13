"""The Ripple host faults live beside their specs, not inside the rules: every fault
changes only named fault points (reference_impl/ripplehost/faults.py, POINTS), and
the reference cores (session.py, node.py, and the codec under them, frame.py) hold no
fault branch, so that reading them teaches the protocol alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reference_impl.ripplehost.faults import POINTS, SPECS
from reference_impl.faults import FaultPoints, check_points

CORE = Path(__file__).parents[2] / "reference_impl" / "ripplehost"
CORE_MODULES = ("session.py", "node.py", "frame.py")


def _mentions_faults(expr: ast.AST) -> bool:
    return any(
        (isinstance(node, ast.Name) and node.id.endswith("faults"))
        or (isinstance(node, ast.Attribute) and node.attr.endswith("faults"))
        for node in ast.walk(expr)
    )


def fault_branches(source: str) -> list[str]:
    """Where ``source`` tests for a fault: ``Fault.X``, a ``_faults`` set, a
    membership test (``in``/``not in``) or intersection (``&``) with a set
    of faults. Strings and comments do not count (the code is parsed)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and (
            (isinstance(node.value, ast.Name) and node.value.id == "Fault")
            or node.attr == "_faults"
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
        ):
            if any(_mentions_faults(side) for side in (node.left, *node.comparators)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
            if _mentions_faults(node.left) or _mentions_faults(node.right):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda entry: int(entry.split(":")[0].removeprefix("line ")))


def test_every_fault_changes_declared_points_only():
    assert check_points(SPECS, POINTS) == []


def test_every_point_is_changed_by_some_fault():
    changed = {point for spec in SPECS for point in spec.changes}
    assert changed == set(POINTS)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_holds_no_fault_branch(module):
    assert fault_branches((CORE / module).read_text(encoding="utf-8")) == []


def test_the_branch_finder_finds_the_forms_it_forbids():
    source = (
        "if Fault.EVEN_MSGNOS in self._faults: pass\n"
        "x = self.faults & {1}\n"
        "y = 3 not in session.faults\n"
        "z = [f for f in self.faults]  # iterating is no test\n"
        "w = 'Fault.X in faults'\n"
    )
    assert sorted(entry.split(":")[0] for entry in fault_branches(source)) == [
        "line 1",
        "line 1",
        "line 1",
        "line 2",
        "line 3",
    ]


def test_no_fault_changes_no_point():
    points = FaultPoints(SPECS)
    assert not points
    for point in POINTS:
        assert not points.changes(point)
        assert points.apply(point, "the correct value") == "the correct value"
