"""STOMP servers manifest files (``stomp.toml``): parse, validate, substitute, choose.

Profile, "STOMP Servers Manifest Files": a TOML file with

- ``servers``: a list of ``"hostname:port"``; the hostname a fully
  qualified domain name or an IP address. Read here: a DNS name in RFC 1123
  syntax (one or more labels of letters, digits and hyphens; a trailing dot
  allowed; single-label names such as ``localhost`` accepted, since test
  setups use them and nothing is gained by refusing them), an IPv4 address,
  or an IPv6 address in brackets (``[::1]:61613``; without brackets its
  colons could not be told from the port's). ``port`` is decimal, 1..65535.
  The list MAY repeat an address "which would simply increase the
  probability for that address to be chosen": :func:`choose_server` picks
  uniformly among the *entries*, repeats included. An empty list is refused:
  a client could not connect anywhere.
- ``host``: the ``host`` header of CONNECT; ``login`` and ``passcode``
  optional CONNECT headers; ``destination``: the ``destination`` header of
  SEND. In host, login and destination every ``${NODE_ID}`` is replaced by
  the client node's ID (:meth:`Manifest.substituted`). The passcode is sent
  as written: the profile asks for the substitution under host, login and
  destination only, and swpt_stomp (the Swaptacular node's STOMP component,
  ``peer_data._parse_stomp_toml``) substitutes those three and not the
  passcode. CONNECT frames are not escaped (STOMP
  1.2, Value Encoding), so CR, LF and NUL cannot be carried in host, login
  or passcode; SEND headers are escaped, but the grammar still has no room
  for NUL. Values holding those are refused, and so are node IDs holding
  them.
- ``accepted-content-types``: optional list of MIME types, most preferred
  first; ``application/json`` is implied (:meth:`Manifest.content_types`).
- Any other key is allowed and kept in ``extra``.

A :class:`ManifestError` names the key at fault (and the list index, for a
list entry). The passcode is a secret: it appears in no ``repr``/``str`` of
a manifest and in no error message.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

NODE_ID_PLACEHOLDER = "${NODE_ID}"
JSON_CONTENT_TYPE = "application/json"
RECOMMENDED_FILE_NAME = "stomp.toml"

# Bounds: a manifest comes from a peer; nothing in it needs to be large.
MAX_MANIFEST_BYTES = 256 * 1024
MAX_SERVERS = 1024
MAX_VALUE_CHARS = 4096
MAX_CONTENT_TYPES = 64

DESCRIBED_KEYS = ("servers", "host", "login", "passcode", "destination", "accepted-content-types")
SUBSTITUTED_KEYS = ("host", "login", "destination")

_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_PORT = re.compile(r"^[0-9]{1,5}$")
# RFC 6838 restricted-name for type and subtype, then optional parameters.
_RESTRICTED_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MIME_TYPE = re.compile(rf"^({_RESTRICTED_NAME})/({_RESTRICTED_NAME})\s*(;.*)?$")
_FORBIDDEN_CONNECT = ("\r", "\n", "\x00")


class ManifestError(ValueError):
    """An invalid manifest. ``key`` is the key at fault (None when the file
    as a whole is unreadable), ``index`` the list entry at fault."""

    def __init__(self, key: str | None, reason: str, index: int | None = None) -> None:
        self.key = key
        self.reason = reason
        self.index = index
        where = "stomp.toml" if key is None else f"stomp.toml key {key!r}"
        if index is not None:
            where += f" entry {index}"
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class ServerAddress:
    """One entry of ``servers``. ``host`` is what to connect to (an IPv6
    address without its brackets); ``entry`` the text as written."""

    host: str
    port: int
    entry: str

    def __str__(self) -> str:
        return self.entry


@dataclass(frozen=True)
class Manifest:
    servers: tuple[ServerAddress, ...]
    host: str
    destination: str
    login: str | None = None
    passcode: str | None = field(default=None, repr=False)
    accepted_content_types: tuple[str, ...] = ()
    """As written (possibly empty); see :meth:`content_types`."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def __repr__(self) -> str:
        # Written out so that the passcode and the values of undescribed
        # keys (which may be anything) stay out of logs.
        passcode = "None" if self.passcode is None else "'<redacted>'"
        return (
            f"Manifest(servers={[s.entry for s in self.servers]!r}, host={self.host!r}, "
            f"destination={self.destination!r}, login={self.login!r}, passcode={passcode}, "
            f"accepted_content_types={list(self.accepted_content_types)!r}, "
            f"extra_keys={sorted(self.extra)!r})"
        )

    __str__ = __repr__

    def content_types(self) -> tuple[str, ...]:
        """The MIME types the node accepts, most preferred first:
        ``application/json`` is implied, last unless listed."""
        listed = tuple(self.accepted_content_types)
        if any(_media_type(t) == JSON_CONTENT_TYPE for t in listed):
            return listed
        return listed + (JSON_CONTENT_TYPE,)

    def accepts(self, content_type: str) -> bool:
        """Whether ``content_type`` (type/subtype compared case-insensitively,
        parameters ignored) is one the node accepts."""
        wanted = _media_type(content_type)
        return any(_media_type(t) == wanted for t in self.content_types())

    def substituted(self, node_id: str) -> Manifest:
        """The manifest with every ``${NODE_ID}`` in host, login and
        destination replaced by ``node_id`` (the passcode is kept as written:
        see the module docstring)."""
        if not isinstance(node_id, str) or not node_id:
            raise ValueError("node_id must be a non-empty string")
        if any(c in node_id for c in _FORBIDDEN_CONNECT):
            raise ValueError(
                "node_id must not contain CR, LF or NUL (it goes into CONNECT headers)"
            )

        def sub(value: str | None) -> str | None:
            return None if value is None else value.replace(NODE_ID_PLACEHOLDER, node_id)

        return replace(
            self, host=sub(self.host), login=sub(self.login), destination=sub(self.destination)
        )

    def connect_headers(self) -> tuple[tuple[str, str], ...]:
        """host, then login and passcode when given, for a CONNECT/STOMP frame
        (call on a substituted manifest)."""
        headers = [("host", self.host)]
        if self.login is not None:
            headers.append(("login", self.login))
        if self.passcode is not None:
            headers.append(("passcode", self.passcode))
        return tuple(headers)


class _Chooser(Protocol):
    def choice(self, seq: Sequence[Any]) -> Any: ...


def choose_server(manifest: Manifest, rng: _Chooser) -> tuple[str, int]:
    """One server (host, port), chosen uniformly among the entries of
    ``servers``: an address listed twice is twice as likely."""
    address = rng.choice(manifest.servers)
    return address.host, address.port


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


# --- parsing ----------------------------------------------------------------------------------


def parse_server_address(entry: Any, index: int | None = None) -> ServerAddress:
    """``"hostname:port"`` -> ServerAddress, or ManifestError for key ``servers``."""

    def fail(reason: str) -> ManifestError:
        return ManifestError("servers", reason, index)

    if not isinstance(entry, str):
        raise fail(f'must be a string "hostname:port", not a TOML {_toml_type(entry)}')
    if len(entry) > MAX_VALUE_CHARS:
        raise fail(f"longer than {MAX_VALUE_CHARS} characters")
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0 or entry[close + 1 : close + 2] != ":":
            raise fail(f'{entry!r}: an IPv6 address must be written "[address]:port"')
        host, port_text = entry[1:close], entry[close + 2 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise fail(f"{entry!r}: {host!r} in brackets is not an IPv6 address") from None
    else:
        host, colon, port_text = entry.rpartition(":")
        if not colon:
            raise fail(f'{entry!r} has no ":port"')
        if ":" in host:
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise fail(f'{entry!r} is not "hostname:port": {host!r} holds a colon') from None
            raise fail(f'{entry!r}: an IPv6 address must be in brackets, "[address]:port"')
        if not host:
            raise fail(f"{entry!r} has no hostname")
        _check_hostname(host, entry, fail)
    if not _PORT.match(port_text):
        raise fail(f"{entry!r}: port {port_text!r} is not a decimal number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise fail(f"{entry!r}: port {port} is outside 1..65535")
    return ServerAddress(host, port, entry)


def _check_hostname(host: str, entry: str, fail: Any) -> None:
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if all(label.isdigit() for label in labels if label):
        # All-numeric: meant as an IPv4 address (RFC 1123 2.1: a name's top
        # label is not all-numeric), so it must be a valid one.
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise fail(f"{entry!r}: {host!r} is not a valid IPv4 address") from None
        return
    if len(host.rstrip(".")) > 253:
        raise fail(f"{entry!r}: hostname longer than 253 characters")
    for label in labels:
        if not _LABEL.match(label):
            raise fail(
                f"{entry!r}: {host!r} is neither a domain name (labels of letters, digits and "
                "inner hyphens, 1..63 characters) nor an IP address"
            )


def _toml_type(value: Any) -> str:
    return {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "float",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


def _string(
    document: Mapping[str, Any],
    key: str,
    *,
    required: bool,
    secret: bool = False,
    forbid_nul_only: bool = False,
) -> str | None:
    if key not in document:
        if required:
            raise ManifestError(key, "required key is missing")
        return None
    value = document[key]
    if not isinstance(value, str):
        raise ManifestError(key, f"must be a string, not a TOML {_toml_type(value)}")
    if len(value) > MAX_VALUE_CHARS:
        raise ManifestError(key, f"longer than {MAX_VALUE_CHARS} characters")
    forbidden = ("\x00",) if forbid_nul_only else _FORBIDDEN_CONNECT
    for char in forbidden:
        if char in value:
            what = {"\r": "CR", "\n": "LF", "\x00": "NUL"}[char]
            frame = (
                "a SEND header"
                if forbid_nul_only
                else "a CONNECT header (CONNECT frames are not escaped)"
            )
            shown = "" if secret else f" {value!r}"
            raise ManifestError(key, f"value{shown} contains {what}, which {frame} cannot carry")
    return value


def parse_manifest_document(document: Mapping[str, Any]) -> Manifest:
    """Validate an already parsed TOML document."""
    if "servers" not in document:
        raise ManifestError("servers", "required key is missing")
    servers_value = document["servers"]
    if not isinstance(servers_value, list):
        raise ManifestError(
            "servers",
            f'must be an array of "hostname:port" strings, not a TOML {_toml_type(servers_value)}',
        )
    if not servers_value:
        raise ManifestError("servers", "the list is empty: a client could connect to no server")
    if len(servers_value) > MAX_SERVERS:
        raise ManifestError("servers", f"more than {MAX_SERVERS} entries")
    servers = tuple(parse_server_address(entry, index) for index, entry in enumerate(servers_value))
    host = _string(document, "host", required=True)
    login = _string(document, "login", required=False)
    passcode = _string(document, "passcode", required=False, secret=True)
    destination = _string(document, "destination", required=True, forbid_nul_only=True)
    types: tuple[str, ...] = ()
    key = "accepted-content-types"
    if key in document:
        value = document[key]
        if not isinstance(value, list):
            raise ManifestError(
                key, f"must be an array of MIME type strings, not a TOML {_toml_type(value)}"
            )
        if len(value) > MAX_CONTENT_TYPES:
            raise ManifestError(key, f"more than {MAX_CONTENT_TYPES} entries")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise ManifestError(key, f"must be a string, not a TOML {_toml_type(item)}", index)
            if len(item) > MAX_VALUE_CHARS or not _MIME_TYPE.match(item):
                raise ManifestError(key, f'{item[:200]!r} is not a MIME type "type/subtype"', index)
        types = tuple(value)
    extra = {k: v for k, v in document.items() if k not in DESCRIBED_KEYS}
    assert host is not None and destination is not None
    return Manifest(
        servers=servers,
        host=host,
        destination=destination,
        login=login,
        passcode=passcode,
        accepted_content_types=types,
        extra=MappingProxyType(extra),
    )


def parse_manifest(text: str | bytes) -> Manifest:
    """Parse and validate the text of a ``stomp.toml`` (str, or bytes in UTF-8
    as TOML requires)."""
    if isinstance(text, bytes):
        if len(text) > MAX_MANIFEST_BYTES:
            raise ManifestError(None, f"larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError(
                None, f"not UTF-8 (TOML files are UTF-8): byte {exc.start}"
            ) from None
    elif len(text.encode("utf-8", "surrogatepass")) > MAX_MANIFEST_BYTES:
        raise ManifestError(None, f"larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message names a line and column, never a value.
        raise ManifestError(None, f"not valid TOML: {exc}") from None
    return parse_manifest_document(document)


def load_manifest(path: Any) -> Manifest:
    with open(path, "rb") as handle:
        data = handle.read(MAX_MANIFEST_BYTES + 1)
    return parse_manifest(data)


# --- writing (for tests and the harness, which hand manifests to client targets) -------------


def _toml_string(value: str) -> str:
    out = ['"']
    for char in value:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def render_manifest(
    servers: Sequence[str],
    host: str,
    destination: str,
    *,
    login: str | None = None,
    passcode: str | None = None,
    accepted_content_types: Sequence[str] | None = None,
) -> str:
    """The TOML text of a manifest with these values (not validated here:
    tests write invalid ones on purpose)."""
    lines = [
        "servers = [" + ", ".join(_toml_string(s) for s in servers) + "]",
        f"host = {_toml_string(host)}",
    ]
    if login is not None:
        lines.append(f"login = {_toml_string(login)}")
    if passcode is not None:
        lines.append(f"passcode = {_toml_string(passcode)}")
    lines.append(f"destination = {_toml_string(destination)}")
    if accepted_content_types is not None:
        lines.append(
            "accepted-content-types = ["
            + ", ".join(_toml_string(t) for t in accepted_content_types)
            + "]"
        )
    return "\n".join(lines) + "\n"
