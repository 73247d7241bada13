"""A protocol suite's own preflight module,
``conformance/suites/<protocol>/preflight.py``: what must exist before its
nodes start (``prepare``) and the protocol's own definition checks
(``preflight``). Only the project's own suites have one."""

from __future__ import annotations

import importlib
from typing import Any

from ..core.targets import TargetRuntime


def _protocol_preflight_module(protocol: str) -> Any:
    """``conformance/suites/<protocol>/preflight.py``, or None when the
    suite has none."""
    package = f"conformance.suites.{protocol}"
    try:
        return importlib.import_module(package + ".preflight")
    except ModuleNotFoundError as exc:
        if exc.name in (package, package + ".preflight"):
            return None
        raise


def prepare_runtime(runtime: TargetRuntime) -> None:
    """The protocol's ``prepare(runtime)``, when its preflight module has
    one: what must exist before the node starts or a client is launched
    (e.g. the run's TLS certificates, whose paths become params)."""
    module = _protocol_preflight_module(runtime.target.protocol)
    if module is not None and hasattr(module, "prepare"):
        module.prepare(runtime)


def protocol_problems(runtime: TargetRuntime, serving: bool) -> list[str]:
    """The protocol's own definition checks: ``preflight(runtime, serving)``
    in ``conformance/suites/<protocol>/preflight.py``, when the suite has one."""
    module = _protocol_preflight_module(runtime.target.protocol)
    if module is None:
        return []
    return list(module.preflight(runtime, serving=serving))
