"""The RIPP part of the preflight: where the target's consumer listens, and
the schema registry the cases build their Handshakes from."""

from __future__ import annotations

from conformance.core.targets import TargetRuntime

from .registry import RegistryError, load_registry


def preflight(runtime: TargetRuntime, serving: bool = True) -> list[str]:
    problems = []
    if serving and (not runtime.host or not runtime.port):
        problems.append(
            "host and port of the consumer's listener are missing (set them, or have "
            "launch.outputs read the port from the ready line)"
        )
    try:
        load_registry(runtime.params.get("registry_file"))
    except RegistryError as exc:
        problems.append(str(exc))
    return problems
