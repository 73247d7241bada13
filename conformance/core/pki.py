"""Per-run test certificates for protocols that run over TLS with
certificates on both sides (the Swaptacular STOMP profile).

A run makes its own certificate authority with ``trustme``, so no key
outlives the run and nothing depends on the machine's trust store. Leaf
certificates name hosts that are never dialled (``*.invalid``): a peer that
checks the hostname against the address it connects to (127.0.0.1) fails,
which is what a client-role case needs to see whether a client skips that
check, as the profile asks. A second authority that nobody trusts signs the
"untrusted" certificates of the negative cases.

Private keys are written 0600 into a private directory and never read into
a message or a report.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

SERVER_NAME = "stomp-server.invalid"
CLIENT_NAME = "stomp-client.invalid"


@dataclass(frozen=True)
class TestPki:
    """Paths of one run's certificates and keys (PEM)."""

    __test__ = False  # not a pytest test class despite the name

    directory: Path
    ca_file: Path
    server_cert_file: Path
    server_key_file: Path
    client_cert_file: Path
    client_key_file: Path
    untrusted_ca_file: Path
    untrusted_server_cert_file: Path
    untrusted_server_key_file: Path
    untrusted_client_cert_file: Path
    untrusted_client_key_file: Path
    loopback_server_cert_file: Path
    loopback_server_key_file: Path
    """From the run's CA, naming 127.0.0.1, ::1 and localhost: a client that
    checks hostnames accepts it too, so client-role cases other than the
    hostname one are not decided by that SHOULD."""

    def params(self) -> dict[str, str]:
        """The paths as target params (launch placeholders such as
        ``{server_cert_file}``): paths, not secrets."""
        return {"ca_file": str(self.ca_file), "server_cert_file": str(self.server_cert_file),
                "server_key_file": str(self.server_key_file), "client_cert_file": str(self.client_cert_file),
                "client_key_file": str(self.client_key_file)}

    def cert_pair(self, which: str) -> tuple[Path, Path]:
        pairs = {"server": (self.server_cert_file, self.server_key_file),
                 "client": (self.client_cert_file, self.client_key_file),
                 "untrusted-server": (self.untrusted_server_cert_file, self.untrusted_server_key_file),
                 "untrusted-client": (self.untrusted_client_cert_file, self.untrusted_client_key_file),
                 "loopback-server": (self.loopback_server_cert_file, self.loopback_server_key_file)}
        if which not in pairs:
            raise ValueError(f"no certificate {which!r}; one of {sorted(pairs)}")
        return pairs[which]


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def make_pki(directory: Path | str) -> TestPki:
    """A fresh CA, server and client certificates, and an untrusted CA with
    its own server and client certificates, written into ``directory``."""
    import trustme  # imported here: only TLS protocols need it

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    files: dict[str, Path] = {}
    for prefix, ca in (("", trustme.CA()), ("untrusted-", trustme.CA())):
        files[f"{prefix}ca"] = _write(directory / f"{prefix}ca.pem", ca.cert_pem.bytes())
        for role, names in (("server", (SERVER_NAME,)), ("client", (CLIENT_NAME,)),
                            ("loopback-server", ("127.0.0.1", "::1", "localhost"))):
            leaf = ca.issue_cert(*names)
            chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
            files[f"{prefix}{role}.pem"] = _write(directory / f"{prefix}{role}.pem", chain)
            files[f"{prefix}{role}.key"] = _write(directory / f"{prefix}{role}.key",
                                                  leaf.private_key_pem.bytes(), private=True)
    return TestPki(directory=directory, ca_file=files["ca"],
                   server_cert_file=files["server.pem"], server_key_file=files["server.key"],
                   client_cert_file=files["client.pem"], client_key_file=files["client.key"],
                   untrusted_ca_file=files["untrusted-ca"],
                   untrusted_server_cert_file=files["untrusted-server.pem"],
                   untrusted_server_key_file=files["untrusted-server.key"],
                   untrusted_client_cert_file=files["untrusted-client.pem"],
                   untrusted_client_key_file=files["untrusted-client.key"],
                   loopback_server_cert_file=files["loopback-server.pem"],
                   loopback_server_key_file=files["loopback-server.key"])


_RUN_PKI: TestPki | None = None


def run_pki() -> TestPki:
    """The certificates of this process's run: made on first use in a
    private temporary directory, deleted at exit. One per process, so that
    the two nodes of an interop run trust each other."""
    global _RUN_PKI
    if _RUN_PKI is None:
        # A work dir: removed at exit, or by the next run if this one is
        # SIGKILLed (its CA key is a secret too; docs/targets.md, "Work dirs").
        from .targets import make_work_dir  # here: targets imports much this module does not need
        _RUN_PKI = make_pki(make_work_dir("pki"))
    return _RUN_PKI


def harness_client_context(pki: TestPki, *, cert: str | None = "client", trust: str = "ca",
                           minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
                           maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """The harness as a TLS client. ``cert``: "client", "untrusted-client"
    or None (no certificate); ``trust``: "ca" (the run's CA) or a path. The
    harness never checks hostnames: the leaf names ``*.invalid`` hosts."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.minimum_version = minimum
    if maximum is not None:
        context.maximum_version = maximum
    context.load_verify_locations(cafile=str(pki.ca_file if trust == "ca" else trust))
    if cert is not None:
        cert_file, key_file = pki.cert_pair(cert)
        context.load_cert_chain(str(cert_file), str(key_file))
    return context


def harness_server_context(pki: TestPki, *, cert: str = "server",
                           minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
                           maximum: ssl.TLSVersion | None = None,
                           require_client_cert: bool = True) -> ssl.SSLContext:
    """The harness as a TLS server (client-role cases). ``cert``: "server"
    or "untrusted-server". The default minimum is TLS 1.2 so that a case can
    see which version a target's client settles for; a case capping
    ``maximum`` at 1.2 checks that the client refuses it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = minimum
    if maximum is not None:
        context.maximum_version = maximum
    cert_file, key_file = pki.cert_pair(cert)
    context.load_cert_chain(str(cert_file), str(key_file))
    context.load_verify_locations(cafile=str(pki.ca_file))
    context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return context
