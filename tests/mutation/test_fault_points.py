"""Faults beside their specs, not inside the rules (docs/mutation.md), for
every protocol: each fault changes declared fault points only
(``POINTS`` in ``reference_impl/<protocol>/faults.py``), every point is
changed by some fault and met in the code, a node with no fault changes
nothing, and no core module tests for a fault, so that reading a reference
node teaches the protocol alone.

What each fault does end to end (the cases that catch it, and only those)
is the mutation run's (tests/mutation/test_mutation.py); what some of them
change is checked beside their protocol (tests/<protocol>/test_faults.py)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from conformance.mutation import FAULT_REGISTRIES
from reference_impl.faults import FaultPoints, check_points

REFERENCE = Path(__file__).resolve().parents[2] / "reference_impl"
PROTOCOLS = sorted(FAULT_REGISTRIES)
NOT_CORE = {"__init__.py", "faults.py", "variants.py"}
"""Every other module of a protocol's folder is core: the codecs, the
sans-I/O sessions, the node layer and the command line."""


def registry(protocol: str):
    return importlib.import_module(FAULT_REGISTRIES[protocol])


def core_modules(protocol: str) -> list[Path]:
    return sorted(path for path in (REFERENCE / protocol).glob("*.py") if path.name not in NOT_CORE)


def _mentions_faults(expr: ast.AST) -> bool:
    return any(
        (isinstance(node, ast.Name) and node.id.endswith("faults"))
        or (isinstance(node, ast.Attribute) and node.attr.endswith("faults"))
        for node in ast.walk(expr)
    )


def fault_branches(source: str) -> list[str]:
    """Where ``source`` tests for a fault: a ``Fault.X`` member, a ``_faults``
    set kept to be looked at, a membership test (``in``/``not in``) or an
    intersection (``&``) with a set of faults, a switch named ``insecure_*``.
    Strings and comments do not count: the code is parsed."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and (
            (isinstance(node.value, ast.Name) and node.value.id.endswith("Fault"))
            or node.attr == "_faults"
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
        ):
            if any(_mentions_faults(side) for side in (node.left, *node.comparators)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
            if _mentions_faults(node.left) or _mentions_faults(node.right):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.keyword) and (node.arg or "").startswith("insecure_"):
            found.append((node.value.lineno, f"{node.arg}=..."))
    return [f"line {line}: {text}" for line, text in sorted(found)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_fault_changes_declared_points_only(protocol):
    faults = registry(protocol)
    assert check_points(faults.SPECS, faults.POINTS) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_point_is_changed_by_some_fault(protocol):
    faults = registry(protocol)
    assert {point for spec in faults.SPECS for point in spec.changes} == set(faults.POINTS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_point_is_met_in_the_code(protocol):
    sources = "\n".join(path.read_text(encoding="utf-8") for path in core_modules(protocol))
    unmet = [point for point in registry(protocol).POINTS if f'"{point}"' not in sources]
    assert unmet == [], f"no core module of {protocol} applies these points"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_fault_changes_no_point(protocol):
    faults = registry(protocol)
    points = FaultPoints(faults.SPECS)
    assert not points
    for point in faults.POINTS:
        assert not points.changes(point)
        assert points.apply(point, "the correct value") == "the correct value"


@pytest.mark.parametrize(
    "module",
    [pytest.param(path, id=f"{p}/{path.name}") for p in PROTOCOLS for path in core_modules(p)],
)
def test_core_module_holds_no_fault_branch(module):
    assert fault_branches(module.read_text(encoding="utf-8")) == []


def test_the_branch_finder_finds_the_forms_it_forbids():
    source = (
        "if Fault.NO_AUTH_REQUIRED in self._faults: pass\n"
        "x = self.faults & {1}\n"
        "y = 3 not in session.faults\n"
        "z = [f for f in self.faults]  # iterating is no test\n"
        "w = 'Fault.X in faults'\n"
        "open_auth(key, insecure_skip_signature_check=True)\n"
        "if ClientFault.EXACT_RECEIPTS: pass\n"
    )
    assert [entry.split(":")[0] for entry in fault_branches(source)] == [
        "line 1",
        "line 1",
        "line 1",
        "line 2",
        "line 3",
        "line 6",
        "line 7",
    ]


def test_an_unknown_fault_name_is_refused():
    faults = registry("btp")
    with pytest.raises(ValueError, match="unknown fault"):
        FaultPoints(faults.SPECS, {"no-such-fault"})
