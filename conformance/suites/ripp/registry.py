"""The schema registry the RIPP cases build their Handshakes from.

A consumer target is configured with a registry (output name -> reader
schema). The harness must declare writer schemas the target can read, and
schemas it cannot: it reads the same registry, ``registry.json`` beside this
module unless the target's ``params.registry_file`` names another (same
form: ``{"<output>": {"schema_name", "version", "fields": [{"name", "type",
"default"}]}}``, docs/ripp-profile.md P3/P5)."""

from __future__ import annotations

import json
from pathlib import Path

from reference_impl.ripp.payloads import Schema, schema_from_json

DEFAULT_REGISTRY = Path(__file__).resolve().parent / "registry.json"
MAX_REGISTRY_BYTES = 1 << 20


class RegistryError(ValueError):
    pass


def load_registry(path: str | Path | None = None) -> dict[str, Schema]:
    """``output -> Schema`` from a registry file (the default one when None)."""
    file = Path(path) if path else DEFAULT_REGISTRY
    try:
        if file.stat().st_size > MAX_REGISTRY_BYTES:
            raise RegistryError(f"registry file {file} is over {MAX_REGISTRY_BYTES} bytes")
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RegistryError(f"registry file {file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RegistryError(f"registry file {file} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise RegistryError(f"registry file {file} must map output names to schemas")
    try:
        return {str(name): schema_from_json(schema) for name, schema in data.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistryError(f"registry file {file}: a schema is malformed ({exc})") from None
