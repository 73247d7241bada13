"""reference_impl/stomp/tls.py: real TLS handshakes on loopback, with
certificates trustme makes for this run.

Profile, STOMP Connections: TLS 1.3 or higher; servers require a trusted
client chain; clients require a trusted server chain and do not verify the
hostname. Each test runs one handshake between a server thread and a client
thread, both with socket deadlines, and then one round trip, since under TLS
1.3 a client learns that the server refused its certificate only when it
next reads."""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from reference_impl.stomp.tls import client_context, server_context

DEADLINE = 10.0


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_cert: Path
    other_key: Path
    """A server/client certificate from a CA nobody here trusts."""
    other_ca: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    directory = tmp_path_factory.mktemp("stomp-pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    # Names no test connects to: a client that checked hostnames against
    # 127.0.0.1 would fail.
    server = ca.issue_cert("stomp-server.invalid")
    client = ca.issue_cert("stomp-client.invalid")
    other = other_ca.issue_cert("stomp-server.invalid", "stomp-client.invalid")
    paths = {}
    for name, blob in (
        ("ca.pem", ca.cert_pem),
        ("other_ca.pem", other_ca.cert_pem),
        ("server.pem", server.cert_chain_pems[0]),
        ("server.key", server.private_key_pem),
        ("client.pem", client.cert_chain_pems[0]),
        ("client.key", client.private_key_pem),
        ("other.pem", other.cert_chain_pems[0]),
        ("other.key", other.private_key_pem),
    ):
        path = directory / name
        blob.write_to_path(str(path))
        if name.endswith(".key"):
            path.chmod(0o600)
        paths[name] = path
    return Pki(
        paths["ca.pem"],
        paths["server.pem"],
        paths["server.key"],
        paths["client.pem"],
        paths["client.key"],
        paths["other.pem"],
        paths["other.key"],
        paths["other_ca.pem"],
    )


@dataclass
class Outcome:
    server_error: BaseException | None = None
    client_error: BaseException | None = None
    version: str | None = None
    client_cert_seen: dict | None = None
    reply: bytes | None = None


def exchange(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_hostname: str | None = None
) -> Outcome:
    """One handshake and one round trip (client "ping", server "pong")."""
    outcome = Outcome()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(DEADLINE)
    port = listener.getsockname()[1]

    def serve() -> None:
        try:
            raw, _ = listener.accept()
            raw.settimeout(DEADLINE)
            with server_ctx.wrap_socket(raw, server_side=True) as conn:
                outcome.version = conn.version()
                outcome.client_cert_seen = conn.getpeercert()
                if conn.recv(4) == b"ping":
                    conn.sendall(b"pong")
        except (OSError, ssl.SSLError) as exc:
            outcome.server_error = exc
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=server_hostname) as conn:
                conn.sendall(b"ping")
                outcome.reply = conn.recv(4)
    except (OSError, ssl.SSLError) as exc:
        outcome.client_error = exc
    thread.join(DEADLINE * 2)
    assert not thread.is_alive(), "server thread did not finish within its deadline"
    return outcome


def tls12_only_client(pki: Pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


def tls12_only_server(pki: Pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    context.load_verify_locations(cafile=str(pki.ca))
    context.verify_mode = ssl.CERT_REQUIRED
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


def test_contexts_say_what_the_profile_asks(pki):
    server = server_context(pki.server_cert, pki.server_key, pki.ca)
    client = client_context(pki.client_cert, pki.client_key, pki.ca)
    for context in (server, client):
        assert context.minimum_version == ssl.TLSVersion.TLSv1_3
        assert context.verify_mode == ssl.CERT_REQUIRED
    assert client.check_hostname is False


def test_mutual_handshake_with_hostname_not_checked(pki):
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca),
        client_context(pki.client_cert, pki.client_key, pki.ca),
    )
    assert (outcome.server_error, outcome.client_error) == (None, None)
    assert outcome.version == "TLSv1.3" and outcome.reply == b"pong"
    # The server saw (and verified) the client's certificate.
    assert outcome.client_cert_seen["subjectAltName"] == (("DNS", "stomp-client.invalid"),)


def test_client_ignores_a_hostname_the_certificate_does_not_name(pki):
    # The server's certificate names stomp-server.invalid only.
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca),
        client_context(pki.client_cert, pki.client_key, pki.ca),
        server_hostname="somewhere-else.example",
    )
    assert (outcome.server_error, outcome.client_error, outcome.reply) == (None, None, b"pong")


def test_server_refuses_a_tls_1_2_client(pki):
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca), tls12_only_client(pki)
    )
    assert isinstance(outcome.server_error, ssl.SSLError)
    assert outcome.server_error.reason == "UNSUPPORTED_PROTOCOL"
    # The client hears a protocol_version alert.
    assert (
        isinstance(outcome.client_error, ssl.SSLError)
        and "VERSION" in outcome.client_error.reason.upper()
    )
    assert outcome.reply is None


def test_client_refuses_a_tls_1_2_server(pki):
    outcome = exchange(
        tls12_only_server(pki), client_context(pki.client_cert, pki.client_key, pki.ca)
    )
    assert isinstance(outcome.client_error, ssl.SSLError)
    assert "VERSION" in outcome.client_error.reason.upper()
    assert outcome.reply is None


def test_server_refuses_a_client_without_certificate(pki):
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca), client_context(None, None, pki.ca)
    )
    assert isinstance(outcome.server_error, ssl.SSLError)
    assert "CERTIFICATE" in outcome.server_error.reason.upper()
    # TLS 1.3: the client hears of it (alert or close) on its first read.
    assert outcome.reply in (None, b"")


def test_server_refuses_an_untrusted_client_certificate(pki):
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca),
        client_context(pki.other_cert, pki.other_key, pki.ca),
    )
    assert isinstance(outcome.server_error, ssl.SSLError)
    assert outcome.server_error.reason == "CERTIFICATE_VERIFY_FAILED"
    assert outcome.reply in (None, b"")


def test_client_refuses_an_untrusted_server(pki):
    outcome = exchange(
        server_context(pki.other_cert, pki.other_key, pki.ca),
        client_context(pki.client_cert, pki.client_key, pki.ca),
    )
    assert isinstance(outcome.client_error, ssl.SSLError)
    assert outcome.client_error.reason == "CERTIFICATE_VERIFY_FAILED"
    assert outcome.reply is None


def test_trust_comes_from_the_given_ca_file_only(pki):
    # A client trusting only the other CA refuses our server, though the
    # certificate is otherwise fine: no system store is consulted either way.
    outcome = exchange(
        server_context(pki.server_cert, pki.server_key, pki.ca),
        client_context(pki.client_cert, pki.client_key, pki.other_ca),
    )
    assert isinstance(outcome.client_error, ssl.SSLError)
    assert outcome.client_error.reason == "CERTIFICATE_VERIFY_FAILED"
