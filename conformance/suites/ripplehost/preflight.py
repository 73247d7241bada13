"""The Ripple host part of the preflight: the target's address (and, for a
TLS target, the certificates) must be usable before any case runs.

TLS is optional in the profile (docs/ripplehost-profile.md, section 1). A
target with ``params.tls = true`` is spoken to over TLS: the harness
verifies the acceptor's certificate chain against ``params.ca_file`` (never
the hostname: peers are reached by address), and its launched initiator is
given a harness listener with a certificate from the same CA.

``prepare(runtime)`` runs before the server is started and before any
client is launched: for a TLS target it makes the run's test PKI
(conformance/core/pki.py) and puts its paths into ``runtime.params``
(``ca_file``, ``server_cert_file``, ``server_key_file``), so that launch
commands can name them as placeholders. A param the target gives itself is
kept: a node the harness does not launch has its own CA.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from conformance.core.pki import run_pki
from conformance.core.targets import TargetRuntime


def tls_enabled(runtime: TargetRuntime) -> bool:
    """``params.tls``: true in a targets file, or "true" from launch outputs."""
    value = runtime.params.get("tls", False)
    return value is True or (isinstance(value, str) and value.lower() in ("true", "yes", "1"))


def prepare(runtime: TargetRuntime) -> None:
    if not tls_enabled(runtime):
        return
    for key, value in run_pki().params().items():
        if key not in runtime.params:
            runtime.params[key] = value


def client_context(runtime: TargetRuntime) -> ssl.SSLContext:
    """The harness as the TLS client of the target's acceptor: the chain must
    verify against ``params.ca_file``; hostnames are not checked."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=str(runtime.params["ca_file"]))
    return context


def preflight(runtime: TargetRuntime, serving: bool = True) -> list[str]:
    problems: list[str] = []
    target = runtime.target
    if target.url:
        problems.append(
            f"url {target.url!r} is not used by Ripple host targets: give host and port "
            "(the host protocol runs over TCP)"
        )
    tls = runtime.params.get("tls")
    if (
        tls is not None
        and not isinstance(tls, bool)
        and str(tls).lower() not in ("true", "false", "yes", "no", "1", "0")
    ):
        problems.append(f"params.tls must be true or false, got {tls!r}")
    if serving and not runtime.host:
        problems.append("host is missing (the address the node's acceptor listens on)")
    if tls_enabled(runtime):
        # prepare() filled in the run's CA, which only a node the harness launches can have a certificate from.
        launched = target.harness_starts_server
        ca_file = (
            runtime.params.get("ca_file")
            if launched or not serving
            else target.params.get("ca_file")
        )
        if not ca_file:
            problems.append(
                "params.tls is true but params.ca_file is missing: the CA file the node's "
                "certificate chains to (the harness verifies the chain, never the hostname)"
            )
        elif not Path(str(ca_file)).is_file():
            problems.append(f"params.ca_file {ca_file} is not a file")
        else:
            try:
                client_context(runtime)
            except (ssl.SSLError, OSError) as exc:
                problems.append(f"params.ca_file {ca_file} cannot be loaded: {exc}")
    return problems
