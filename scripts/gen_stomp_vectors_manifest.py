#!/usr/bin/env python3
"""Generate vectors/stomp/manifests.json: STOMP servers manifest files (stomp.toml).

Valid manifests come with the node ID to substitute and what a client must
derive from them: the servers (host to connect to, port), each entry's
share of the random choice (repeats weight it), the CONNECT host and login
and the SEND destination after every ``${NODE_ID}`` is replaced, the
passcode as written (the profile asks for no substitution there), and
the content types the node accepts (application/json implied). Invalid ones
name the key at fault (and the list entry) and the reason. Every vector is
checked against reference_impl/stomp/manifest.py while it is generated;
tests/stomp/test_manifest.py checks the module against the committed file
and that this script still reproduces it.

The passcodes here are test values, not secrets.

Usage: scripts/gen_stomp_vectors_manifest.py [--check]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.core.vector_files import write_or_check  # noqa: E402

from reference_impl.stomp.manifest import ManifestError, parse_manifest  # noqa: E402

OUTPUT = REPO_ROOT / "vectors" / "stomp" / "manifests.json"
GENERATOR = "scripts/gen_stomp_vectors_manifest.py"
SPEC = (
    "swaptacular-stomp-transport.txt, STOMP Servers Manifest Files and Example stomp.toml file; "
    "stomp-specification-1.2.md, Value Encoding (CONNECT headers are not escaped)"
)

PROFILE_EXAMPLE = """servers = [
  "server1.example.com:1234",
  "server2.example.com:1234",
  "201.202.203.204:2345",
]
host = "/"
destination = "/exchange/${NODE_ID}"
accepted-content-types = [
  "application/vnd.google.protobuf",
  "application/msgpack",
]
not-described-here = true
"""

VALID: list[dict[str, Any]] = [
    {
        "id": "profile-example",
        "node_id": "12345678",
        "toml": PROFILE_EXAMPLE,
        "description": "The example of the profile, word for word (no trailing spaces).",
    },
    {
        "id": "profile-host-example",
        "node_id": "12345678",
        "toml": 'servers = ["127.0.0.1:61613"]\nhost = "/${NODE_ID}"\ndestination = "/exchange/smp"\n',
        "description": 'The profile\'s host example: "/${NODE_ID}" with node 12345678 gives "host:/12345678".',
    },
    {
        "id": "minimal",
        "node_id": "1",
        "toml": 'servers = ["localhost:61613"]\nhost = "/"\ndestination = "/queue/in"\n',
        "description": "Only the required keys; a single-label hostname; no placeholder anywhere.",
    },
    {
        "id": "login-and-passcode-substituted",
        "node_id": "0123456789abcdef",
        "toml": (
            'servers = ["stomp.example.org:61614"]\nhost = "vhost-${NODE_ID}"\n'
            'login = "node-${NODE_ID}"\npasscode = "pw-${NODE_ID}-test"\n'
            'destination = "/exchange/creditors/${NODE_ID}"\n'
        ),
        "description": (
            "${NODE_ID} in the three substituted keys, and in the passcode, which is sent as written: "
            "the profile states the substitution for host, login and destination only (as swpt_stomp "
            "does)."
        ),
    },
    {
        "id": "every-occurrence-substituted",
        "node_id": "42",
        "toml": (
            'servers = ["a.example:1"]\nhost = "${NODE_ID}${NODE_ID}/${NODE_ID}"\n'
            'destination = "/${NODE_ID}/x/${NODE_ID}"\n'
        ),
        "description": "All occurrences are replaced, adjacent ones too.",
    },
    {
        "id": "near-placeholders-untouched",
        "node_id": "7",
        "toml": (
            'servers = ["a.example:1"]\nhost = "$NODE_ID {NODE_ID} ${node_id} ${ NODE_ID } $${NODE_ID}"\n'
            'destination = "/q"\n'
        ),
        "description": "Only the exact string ${NODE_ID} is a placeholder; the one after the extra $ is replaced.",
    },
    {
        "id": "placeholder-in-servers-not-substituted",
        "node_id": "99",
        "toml": 'servers = ["n1.example:61613"]\nhost = "/"\ndestination = "/q"\nnote = "${NODE_ID}"\n',
        "description": "Keys other than host, login, passcode and destination are not substituted.",
    },
    {
        "id": "repeated-entries-weight",
        "node_id": "1",
        "toml": (
            'servers = ["a.example:1000", "b.example:2000", "a.example:1000", "a.example:1000"]\n'
            'host = "/"\ndestination = "/q"\n'
        ),
        "description": "The same address listed 3 times out of 4 is chosen with probability 3/4.",
    },
    {
        "id": "ipv6-bracketed",
        "node_id": "1",
        "toml": 'servers = ["[::1]:61613", "[2001:db8::5]:443"]\nhost = "/"\ndestination = "/q"\n',
        "description": "IPv6 addresses in brackets; the host to connect to is written without them.",
    },
    {
        "id": "port-bounds",
        "node_id": "1",
        "toml": 'servers = ["h.example:1", "h.example:65535"]\nhost = "/"\ndestination = "/q"\n',
        "description": "Ports 1 and 65535 are valid.",
    },
    {
        "id": "fqdn-trailing-dot",
        "node_id": "1",
        "toml": 'servers = ["server1.example.com.:1234"]\nhost = "/"\ndestination = "/q"\n',
        "description": "An absolute domain name with its trailing dot.",
    },
    {
        "id": "json-listed-keeps-order",
        "node_id": "1",
        "toml": (
            'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\n'
            'accepted-content-types = ["application/msgpack", "application/json"]\n'
        ),
        "description": "When application/json is listed, the list's order stands.",
    },
    {
        "id": "empty-content-types",
        "node_id": "1",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\naccepted-content-types = []\n',
        "description": '"an empty (or missing) list means that only application/json is supported".',
    },
    {
        "id": "extra-keys-allowed",
        "node_id": "1",
        "toml": (
            'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\nversion = 3\n'
            '[not-described]\nnested = ["x"]\n'
        ),
        "description": '"MAY contain additional key/value pairs": extra keys and tables are kept, not refused.',
    },
    {
        "id": "empty-login-and-passcode",
        "node_id": "5",
        "toml": 'servers = ["h.example:1"]\nhost = ""\nlogin = ""\npasscode = ""\ndestination = "/q"\n',
        "description": "Empty strings are values (the profile sets no minimum length); login and passcode are sent empty.",
    },
    {
        "id": "unicode-node-id",
        "node_id": "n\u00f6de",
        "toml": 'servers = ["h.example:1"]\nhost = "/${NODE_ID}"\ndestination = "/q/${NODE_ID}"\n',
        "description": "Node IDs are substituted as text, non-ASCII included.",
    },
]

INVALID: list[dict[str, Any]] = [
    {"id": "not-toml", "toml": "servers = [\n", "key": None, "description": "Not valid TOML."},
    {
        "id": "servers-missing",
        "toml": 'host = "/"\ndestination = "/q"\n',
        "key": "servers",
        "description": "servers is one of the configuration keys a manifest contains.",
    },
    {
        "id": "servers-not-array",
        "toml": 'servers = "h.example:1"\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "description": "servers is a list, not a string.",
    },
    {
        "id": "servers-empty",
        "toml": 'servers = []\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "description": "An empty list names no server to connect to.",
    },
    {
        "id": "server-not-string",
        "toml": 'servers = [61613]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "A list entry that is not a string.",
    },
    {
        "id": "server-no-port",
        "toml": 'servers = ["h.example:1", "h.example"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 1,
        "description": '"hostname:port" without the port.',
    },
    {
        "id": "server-port-zero",
        "toml": 'servers = ["h.example:0"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "Port 0 is no TCP port a server listens on.",
    },
    {
        "id": "server-port-too-big",
        "toml": 'servers = ["h.example:65536"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "Port above 65535.",
    },
    {
        "id": "server-port-not-decimal",
        "toml": 'servers = ["h.example:0x10"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "A port that is not a decimal number.",
    },
    {
        "id": "server-port-signed",
        "toml": 'servers = ["h.example:+80"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "A sign before the port.",
    },
    {
        "id": "server-empty-hostname",
        "toml": 'servers = [":61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "No hostname before the colon.",
    },
    {
        "id": "server-scheme",
        "toml": 'servers = ["stomp://h.example:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": 'A URL, not "hostname:port".',
    },
    {
        "id": "server-ipv6-unbracketed",
        "toml": 'servers = ["::1:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "IPv6 without brackets: the port cannot be told apart.",
    },
    {
        "id": "server-ipv6-bad",
        "toml": 'servers = ["[::g]:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "Brackets around something that is not an IPv6 address.",
    },
    {
        "id": "server-ipv4-bad",
        "toml": 'servers = ["256.1.1.1:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "An all-numeric name that is not an IPv4 address.",
    },
    {
        "id": "server-hostname-underscore",
        "toml": 'servers = ["bad_name.example:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "An underscore is not allowed in a host name.",
    },
    {
        "id": "server-hostname-empty-label",
        "toml": 'servers = ["a..example:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "An empty label.",
    },
    {
        "id": "server-hostname-space",
        "toml": 'servers = ["a example:61613"]\nhost = "/"\ndestination = "/q"\n',
        "key": "servers",
        "index": 0,
        "description": "A space in the host name.",
    },
    {
        "id": "host-missing",
        "toml": 'servers = ["h.example:1"]\ndestination = "/q"\n',
        "key": "host",
        "description": "host is one of the configuration keys (STOMP 1.2 requires the host header in CONNECT).",
    },
    {
        "id": "host-not-string",
        "toml": 'servers = ["h.example:1"]\nhost = 1\ndestination = "/q"\n',
        "key": "host",
        "description": "host must be a string.",
    },
    {
        "id": "host-with-newline",
        "toml": 'servers = ["h.example:1"]\nhost = "a\\nb"\ndestination = "/q"\n',
        "key": "host",
        "description": "LF cannot be carried in a CONNECT header (CONNECT frames are not escaped).",
    },
    {
        "id": "login-not-string",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\nlogin = ["x"]\ndestination = "/q"\n',
        "key": "login",
        "description": "login must be a string.",
    },
    {
        "id": "passcode-with-cr",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\npasscode = "pw\\rx"\ndestination = "/q"\n',
        "key": "passcode",
        "description": "CR cannot be carried in a CONNECT header; the message must not show the value.",
    },
    {
        "id": "passcode-not-string",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\npasscode = 1234\ndestination = "/q"\n',
        "key": "passcode",
        "description": "passcode must be a string.",
    },
    {
        "id": "destination-missing",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\n',
        "key": "destination",
        "description": "destination is one of the configuration keys (SEND requires a destination header).",
    },
    {
        "id": "destination-not-string",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\ndestination = { queue = "q" }\n',
        "key": "destination",
        "description": "destination must be a string.",
    },
    {
        "id": "destination-with-nul",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q\\u0000x"\n',
        "key": "destination",
        "description": "NUL has no place in a header value.",
    },
    {
        "id": "content-types-not-array",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\naccepted-content-types = "application/json"\n',
        "key": "accepted-content-types",
        "description": "A list of MIME types, not a string.",
    },
    {
        "id": "content-type-not-mime",
        "toml": (
            'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\n'
            'accepted-content-types = ["application/msgpack", "json"]\n'
        ),
        "key": "accepted-content-types",
        "index": 1,
        "description": '"json" is not a MIME type.',
    },
    {
        "id": "content-type-not-string",
        "toml": 'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\naccepted-content-types = [1]\n',
        "key": "accepted-content-types",
        "index": 0,
        "description": "An entry that is not a string.",
    },
]


def expected(vector: dict[str, Any]) -> dict[str, Any]:
    manifest = parse_manifest(vector["toml"])
    sub = manifest.substituted(vector["node_id"])
    counts = Counter(s.entry for s in manifest.servers)
    total = len(manifest.servers)
    return {
        "servers": [{"entry": s.entry, "host": s.host, "port": s.port} for s in manifest.servers],
        "choice_probability": {entry: str(Fraction(n, total)) for entry, n in counts.items()},
        "host": sub.host,
        "login": sub.login,
        "passcode": sub.passcode,
        "destination": sub.destination,
        "content_types": list(sub.content_types()),
        "extra_keys": sorted(manifest.extra),
    }


def build() -> dict[Path, str]:
    valid = []
    for vector in VALID:
        valid.append(
            {
                "id": vector["id"],
                "description": vector["description"],
                "toml": vector["toml"],
                "node_id": vector["node_id"],
                "expected": expected(vector),
            }
        )
    invalid = []
    for vector in INVALID:
        try:
            parse_manifest(vector["toml"])
        except ManifestError as exc:
            if exc.key != vector["key"] or exc.index != vector.get("index"):
                raise SystemExit(
                    f"{vector['id']}: expected key {vector['key']!r} index {vector.get('index')}, "
                    f"the module blames {exc.key!r} index {exc.index}: {exc}"
                ) from exc
            reason = exc.reason
        else:
            raise SystemExit(f"{vector['id']}: the module accepts it")
        invalid.append(
            {
                "id": vector["id"],
                "description": vector["description"],
                "toml": vector["toml"],
                "key": vector["key"],
                "index": vector.get("index"),
                "reason": reason,
            }
        )
    document = {
        "protocol": "stomp",
        "component": "manifest",
        "spec": SPEC,
        "generator": GENERATOR,
        "description": (
            "STOMP servers manifest files. valid: node_id is substituted for every ${NODE_ID} in "
            "host, login and destination (not in passcode); choice_probability is each distinct entry's "
            "chance under a uniform choice among the list entries; content_types has "
            "application/json implied. invalid: key (null: the file as a whole) and index (the list "
            "entry, or null) at fault; reason is the reference module's ManifestError.reason."
        ),
        "valid": valid,
        "invalid": invalid,
    }
    return {OUTPUT: json.dumps(document, indent=2, ensure_ascii=False) + "\n"}


if __name__ == "__main__":
    sys.exit(write_or_check(__doc__.splitlines()[0], build))
