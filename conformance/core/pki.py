"""Per-run test certificates for protocols that run over TLS with
certificates on both sides (the Swaptacular STOMP profile).

A run makes its own certificate authority (with ``cryptography``, as
``trustme`` would: ECDSA P-256 keys, leaves for server and client
authentication), so no key outlives the run and nothing depends on the
machine's trust store. Leaf
certificates name hosts that are never dialled (``*.invalid``): a peer that
checks the hostname against the address it connects to (127.0.0.1) fails,
which is what a client-role case needs to see whether a client skips that
check, as the profile asks. A second authority that nobody trusts signs the
"untrusted" certificates of the negative cases.

Private keys are written 0600 into a private directory and never read into
a message or a report.

Every leaf's subject is a Swaptacular distinguished name (swpt_stomp's
swpt-certificates.rst, "Subject's and issuer's distinguished names":
O=Swaptacular Nodes Registry, OU=<node type>, serialNumber=<node id>), so
the harness is a peer a Swaptacular node can identify: swpt_stomp's server
takes the peer's node id from the client certificate's ``serialNumber``
and refuses a certificate without it, and its client refuses a server
whose ``serialNumber`` is not the peer's id (swpt_stomp common.py
``get_peer_serial_number``, server.py and client.py). The server
certificates name the accounting authority ``00000001`` (HARNESS_AA_NODE_ID:
the one that manages the debtor ids of the harness's SMP examples,
0x00000001xxxxxxxx); the client certificates a creditors agent whose id is
derived from its key as the document says (the highest 128 bits of the
SHA-256 of the DER public key). Implementations that do not look at the
subject see no difference.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

SERVER_NAME = "stomp-server.invalid"
CLIENT_NAME = "stomp-client.invalid"

SWAPTACULAR_ORGANIZATION = "Swaptacular Nodes Registry"
HARNESS_AA_NODE_ID = "00000001"
"""The serialNumber of the run's server certificates: the harness, as a
server, is the accounting authority of debtor ids 0x00000001xxxxxxxx (the
debtor_id 4294967297 of reference_impl.stomp.smp's examples)."""


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
        return {
            "ca_file": str(self.ca_file),
            "server_cert_file": str(self.server_cert_file),
            "server_key_file": str(self.server_key_file),
            "client_cert_file": str(self.client_cert_file),
            "client_key_file": str(self.client_key_file),
        }

    def cert_pair(self, which: str) -> tuple[Path, Path]:
        pairs = {
            "server": (self.server_cert_file, self.server_key_file),
            "client": (self.client_cert_file, self.client_key_file),
            "untrusted-server": (self.untrusted_server_cert_file, self.untrusted_server_key_file),
            "untrusted-client": (self.untrusted_client_cert_file, self.untrusted_client_key_file),
            "loopback-server": (self.loopback_server_cert_file, self.loopback_server_key_file),
        }
        if which not in pairs:
            raise ValueError(f"no certificate {which!r}; one of {sorted(pairs)}")
        return pairs[which]


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def swaptacular_node_id(public_key) -> str:
    """A creditors or debtors agent's node id as swpt-certificates.rst
    ("Creditors/debtors agent nodes' serial numbers") derives it: the
    highest 128 bits of the SHA-256 of the DER public key, lowercase hex."""
    import hashlib

    from cryptography.hazmat.primitives import serialization

    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).digest()[:16].hex()


def certificate_node_id(cert_file: Path | str) -> str | None:
    """The ``serialNumber`` of the first certificate's subject in a PEM file
    (the Swaptacular node id it names), or None."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    values = cert.subject.get_attributes_for_oid(NameOID.SERIAL_NUMBER)
    return str(values[0].value) if values else None


def _make_ca():
    """A self-signed test CA: (certificate, key)."""
    import datetime
    import secrets

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "conformance harness"),
            x509.NameAttribute(
                NameOID.ORGANIZATIONAL_UNIT_NAME, f"Testing CA #{secrets.token_hex(8)}"
            ),
        ]
    )
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
        .not_valid_after(datetime.datetime(3000, 1, 1, tzinfo=datetime.timezone.utc))
        .add_extension(x509.BasicConstraints(ca=True, path_length=9), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(ca, names: tuple[str, ...], unit: str, node_id: str | None):
    """A leaf for ``names`` (DNS names or IP addresses) with a Swaptacular
    subject (OU ``unit``; serialNumber ``node_id``, or derived from the
    key): (PEM certificate, PEM key)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, SWAPTACULAR_ORGANIZATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(
                NameOID.SERIAL_NUMBER, node_id or swaptacular_node_id(key.public_key())
            ),
        ]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def make_pki(directory: Path | str) -> TestPki:
    """A fresh CA, server and client certificates, and an untrusted CA with
    its own server and client certificates, written into ``directory``."""
    from cryptography.hazmat.primitives import serialization

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    files: dict[str, Path] = {}
    for prefix in ("", "untrusted-"):
        ca = _make_ca()
        files[f"{prefix}ca"] = _write(
            directory / f"{prefix}ca.pem", ca[0].public_bytes(serialization.Encoding.PEM)
        )
        for role, names, unit, node_id in (
            ("server", (SERVER_NAME,), "Accounting Authorities", HARNESS_AA_NODE_ID),
            ("client", (CLIENT_NAME,), "Creditors Agents", None),
            (
                "loopback-server",
                ("127.0.0.1", "::1", "localhost"),
                "Accounting Authorities",
                HARNESS_AA_NODE_ID,
            ),
        ):
            cert_pem, key_pem = _issue(ca, names, unit, node_id)
            files[f"{prefix}{role}.pem"] = _write(directory / f"{prefix}{role}.pem", cert_pem)
            files[f"{prefix}{role}.key"] = _write(
                directory / f"{prefix}{role}.key", key_pem, private=True
            )
    return TestPki(
        directory=directory,
        ca_file=files["ca"],
        server_cert_file=files["server.pem"],
        server_key_file=files["server.key"],
        client_cert_file=files["client.pem"],
        client_key_file=files["client.key"],
        untrusted_ca_file=files["untrusted-ca"],
        untrusted_server_cert_file=files["untrusted-server.pem"],
        untrusted_server_key_file=files["untrusted-server.key"],
        untrusted_client_cert_file=files["untrusted-client.pem"],
        untrusted_client_key_file=files["untrusted-client.key"],
        loopback_server_cert_file=files["loopback-server.pem"],
        loopback_server_key_file=files["loopback-server.key"],
    )


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


def harness_client_context(
    pki: TestPki,
    *,
    cert: str | None = "client",
    trust: str = "ca",
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
    maximum: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
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


def harness_server_context(
    pki: TestPki,
    *,
    cert: str = "server",
    minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
    maximum: ssl.TLSVersion | None = None,
    require_client_cert: bool = True,
) -> ssl.SSLContext:
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
