"""The STOMP part of the preflight: the run's certificates, the harness's TLS
material and the params the cases read must be usable before any case runs.

``prepare(runtime)`` runs before the server is started and before any client
is launched: it makes the run's test PKI (conformance/core/pki.py) and puts
its paths into ``runtime.params`` (``ca_file``, ``server_cert_file``,
``server_key_file``, ``client_cert_file``, ``client_key_file``), so that
launch commands can name them as placeholders. A value the target gives
itself (a param, or a credential of that name) is kept: a node the harness
does not launch trusts its own CA, not the run's.
"""

from __future__ import annotations

from pathlib import Path

from conformance.core.pki import run_pki
from conformance.core.targets import TargetError, TargetRuntime

from .peer import client_context, tls_files

NUMBER_PARAMS = ("idle_seconds", "heart_beat_ms")
"""Params that are positive numbers (see docs/targets.md, STOMP)."""


def prepare(runtime: TargetRuntime) -> None:
    given = set(runtime.params) | {f"{name}_file" for name in runtime.target.credentials}
    for key, value in run_pki().params().items():
        if key not in given:
            runtime.params[key] = value


def preflight(runtime: TargetRuntime, serving: bool = True) -> list[str]:
    problems: list[str] = []
    target = runtime.target
    if target.url:
        problems.append(
            f"url {target.url!r} is not used by STOMP targets: give host and port (STOMP runs over "
            "TLS on a TCP port)"
        )
    for name in NUMBER_PARAMS:
        value = runtime.params.get(name)
        if value is None:
            continue
        try:
            if isinstance(value, bool) or float(value) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            problems.append(f"params.{name} must be a positive number, got {value!r}")
    for name in ("stomp_host", "destination", "login", "node_id"):
        value = runtime.params.get(name)
        if value is not None and (
            not isinstance(value, str) or any(c in value for c in "\r\n\x00")
        ):
            problems.append(f"params.{name} must be a string without CR, LF or NUL, got {value!r}")
    manifest = runtime.params.get("manifest_file")
    if manifest is not None and not Path(str(manifest)).is_file():
        problems.append(f"params.manifest_file {manifest} is not a file")
    if not serving:
        return problems
    launched = target.harness_starts_server
    if not launched:
        # The run's CA is made per run: no node started elsewhere trusts it,
        # nor has its server certificate signed by it.
        if "ca_file" not in target.params:
            problems.append(
                "params.ca_file is missing: the CA file the node's server certificate chains to "
                "(the harness verifies the chain, never the hostname)"
            )
        for name in ("client_cert", "client_key"):
            if name not in target.credentials:
                problems.append(
                    f"credential {name}_file is missing: the harness's client "
                    f"{'certificate' if name == 'client_cert' else 'private key'} "
                    "(PEM), from a CA the node trusts"
                )
        if problems:
            return problems
    try:
        files = tls_files(runtime)
        client_context(files.ca_file, (files.cert_file, files.key_file))
    except TargetError as exc:
        problems.append(str(exc))
    return problems
