"""The cases the suites define, read from their source (never imported).

Every ``@requirement(...)`` decorator in ``conformance/suites/*/test_*.py``
and ``conformance/interop/*/`` is read with ``ast``; its case id, level,
citation and role are constant expressions, possibly built from module-level
string constants (``f"{CITE} (...)"``), which are evaluated here; constants
imported from a sibling module of the suite (``from .prerequisites import
TLS``, where a suite keeps the ids its prerequisites name) are read from
that module's source the same way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SuiteCase:
    case_id: str
    level: str
    citation: str
    role: str
    source: str
    """``path:line`` of the decorator, relative to the repository."""
    basis: str = "keyword"
    """What binds the level (requirements.Basis), as written."""
    errata: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        return self.case_id.split(".", 1)[0]


class NotConstant(Exception):
    pass


def _evaluate(node: ast.AST, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in constants:
            return constants[node.id]
        raise NotConstant(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                parts.append(str(_evaluate(value.value, constants)))
            else:
                parts.append(str(_evaluate(value, constants)))
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _evaluate(node.left, constants) + _evaluate(node.right, constants)  # type: ignore[operator]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_evaluate(element, constants) for element in node.elts]
    raise NotConstant(ast.unparse(node))


def _is_requirement_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )
    return name == "requirement"


def module_constants(
    path: Path, tree: ast.Module | None = None, _seen: frozenset[Path] = frozenset()
) -> dict[str, object]:
    """The module-level constants of a suite module, with those it imports
    from sibling modules (``from .x import NAME``, one package level)."""
    if tree is None:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    constants: dict[str, object] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module:
            sibling = path.parent / (statement.module.replace(".", "/") + ".py")
            if sibling.is_file() and sibling not in _seen:
                try:
                    theirs = module_constants(sibling, None, _seen | {path})
                except SyntaxError:
                    continue
                for alias in statement.names:
                    if alias.name in theirs:
                        constants[alias.asname or alias.name] = theirs[alias.name]
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            try:
                constants[statement.targets[0].id] = _evaluate(statement.value, constants)
            except (NotConstant, TypeError):
                pass
    return constants


def cases_in_file(path: Path, repo: Path) -> tuple[list[SuiteCase], list[str]]:
    """The cases of one suite file and the problems reading them."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    constants = module_constants(path, tree)
    cases: list[SuiteCase] = []
    problems: list[str] = []
    relative = path.relative_to(repo).as_posix()
    for node in ast.walk(tree):
        decorators = getattr(node, "decorator_list", None)
        if not decorators:
            continue
        for decorator in decorators:
            if not _is_requirement_call(decorator):
                continue
            where = f"{relative}:{decorator.lineno}"
            try:
                case_id, level, citation = (_evaluate(arg, constants) for arg in decorator.args[:3])
                # Only the role, basis and errata matter here; depends and
                # needs may name constants imported from other modules.
                keywords = {
                    k.arg: _evaluate(k.value, constants)
                    for k in decorator.keywords
                    if k.arg in ("role", "basis", "errata")
                }
            except (NotConstant, ValueError, TypeError) as exc:
                problems.append(
                    f"{where}: @requirement arguments are not constant expressions ({exc})"
                )
                continue
            cases.append(
                SuiteCase(
                    str(case_id),
                    str(level),
                    str(citation),
                    str(keywords.get("role", "server")),
                    where,
                    str(keywords.get("basis", "keyword")),
                    tuple(str(e) for e in keywords.get("errata", ()) or ()),
                )
            )
    return cases, problems


def suite_files(repo: Path) -> list[Path]:
    package = repo / "conformance"
    files = sorted(package.glob("suites/*/test_*.py")) + sorted(package.glob("interop/*/*.py"))
    return [f for f in files if f.name != "__init__.py"]


def collect_cases(repo: Path) -> tuple[dict[str, SuiteCase], list[str]]:
    """Every case id defined by the suites and interop scenarios, and the
    problems found (unreadable decorators, an id defined twice)."""
    found: dict[str, SuiteCase] = {}
    problems: list[str] = []
    for path in suite_files(repo):
        cases, file_problems = cases_in_file(path, repo)
        problems.extend(file_problems)
        for case in cases:
            if case.case_id in found:
                problems.append(
                    f"{case.source}: case id {case.case_id} is also defined at "
                    f"{found[case.case_id].source}"
                )
                continue
            found[case.case_id] = case
    return found, problems
