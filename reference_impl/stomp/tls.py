"""TLS contexts of the reference STOMP nodes, as the Swaptacular profile asks.

Profile, STOMP Connections: "STOMP connections MUST be secured by using
Transport Layer Security version 1.3 or higher. Both the client and the
server must present a certificate, which the other side verifies before
proceeding with the connection."

- Servers MUST require a trusted client certificate chain: ``CERT_REQUIRED``
  with the node's CA file; a client without a certificate, or with one that
  does not chain to that CA, fails the handshake.
- Clients MUST require a trusted server chain and SHOULD NOT verify the
  hostname: ``CERT_REQUIRED`` with ``check_hostname`` off. Peer nodes are
  found through manifests that may name IP addresses or names that are not
  in the server's certificate; trust comes from the CA alone.

Both sides refuse anything below TLS 1.3. Nothing here reads or logs the
private key beyond handing its path to OpenSSL.
"""

from __future__ import annotations

import ssl
from os import PathLike

StrPath = str | PathLike[str]

MINIMUM_VERSION = ssl.TLSVersion.TLSv1_3


def _base_context(
    purpose: ssl.Purpose, cert_file: StrPath | None, key_file: StrPath | None, ca_file: StrPath
) -> ssl.SSLContext:
    protocol = (
        ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT
    )
    context = ssl.SSLContext(protocol)
    context.minimum_version = MINIMUM_VERSION
    # Only the node's CA: the system store would let any public CA vouch for peers.
    context.load_verify_locations(cafile=str(ca_file))
    if cert_file is not None:
        context.load_cert_chain(str(cert_file), None if key_file is None else str(key_file))
    return context


def server_context(
    cert_file: StrPath, key_file: StrPath | None, ca_file: StrPath
) -> ssl.SSLContext:
    """A server context: TLS 1.3 minimum, presents ``cert_file``, requires a
    client certificate chaining to ``ca_file``."""
    context = _base_context(ssl.Purpose.CLIENT_AUTH, cert_file, key_file, ca_file)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(
    cert_file: StrPath | None, key_file: StrPath | None, ca_file: StrPath
) -> ssl.SSLContext:
    """A client context: TLS 1.3 minimum, presents ``cert_file`` (the profile
    requires it; None only for tests that show a server refusing such a
    client), verifies the server chain against ``ca_file`` and not the
    hostname."""
    context = _base_context(ssl.Purpose.SERVER_AUTH, cert_file, key_file, ca_file)
    # check_hostname must be turned off before verify_mode may be set freely.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    return context
