#!/usr/bin/env python3
"""Benchmark and robustness tier of the SSB reference implementation.

    .venv/bin/python bench/ssb_bench.py                 # handshakes, box stream, certification
    .venv/bin/python bench/ssb_bench.py --quick         # the same, shorter
    .venv/bin/python bench/ssb_bench.py --fuzz 10000    # plus 10000 malformed inputs to a node
    .venv/bin/python bench/ssb_bench.py --json out.json # also write the figures as JSON

Figures and targets (see bench/README.md):

* handshakes/s: ClientHandshake and ServerHandshake driven against each
  other in memory (fresh ephemeral keys each time, all four messages);
  target >= 300/s.
* box stream MB/s: BoxStreamEncoder.encode + BoxStreamDecoder.receive_data
  of 4 KiB messages, beside raw libsodium secretbox (seal + open) of the same
  payloads; target >= 100 MB/s (MB = 10**6 bytes of plaintext).
* certification wall time: ``conformance certify --protocol ssb`` as a
  subprocess; must exit 0; target < 15 s.
* fuzz (``--fuzz N``): N hypothesis-generated malformed inputs (handshake,
  box stream and RPC layers) sent to a reference node subprocess over new
  TCP connections, many at a time. Every connection must be closed by the
  node before a client-side deadline; the node must stay alive, keep
  serving a valid handshake + createHistoryStream (checked every
  ``--check-every`` inputs and at the end), log no unhandled exception and
  keep its RSS growth under 100 MB.

Exit status 0 only if every target passes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import nacl.bindings  # noqa: E402

from reference_impl.ssb import shs  # noqa: E402
from reference_impl.ssb.boxstream import (  # noqa: E402
    BoxStreamDecoder,
    BoxStreamEncoder,
    BoxStreamError,
    increment_nonce,
    seal_box,
    seal_goodbye,
)
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair, feed_id_to_public  # noqa: E402
from reference_impl.ssb.rpc import GOODBYE, RpcDecoder, RpcError  # noqa: E402

HANDSHAKES_TARGET = 300.0  # per second
BOX_TARGET_MB_S = 100.0
CERTIFY_TARGET_S = 15.0
RSS_GROWTH_LIMIT_MB = 100.0
MESSAGE_SIZE = 4096
SEED_MESSAGES = 5


@dataclass
class Row:
    metric: str
    value: str
    target: str
    ok: bool | None  # None: informational, no target
    data: dict = field(default_factory=dict)


# --- handshakes ---------------------------------------------------------------------------


def bench_handshakes(count: int) -> Row:
    """Both roles in one process: msg1..msg4 in memory, fresh ephemerals each time."""
    client_keys = Keypair.generate()
    server_keys = Keypair.generate()
    network_key = MAIN_NETWORK_KEY
    # Warm up (imports, first libsodium calls).
    for _ in range(5):
        _one_handshake(network_key, client_keys, server_keys)
    start = time.perf_counter()
    for _ in range(count):
        _one_handshake(network_key, client_keys, server_keys)
    elapsed = time.perf_counter() - start
    rate = count / elapsed
    print(
        f"handshakes: {count} in {elapsed:.3f} s = {rate:.0f}/s "
        f"({elapsed / count * 1e3:.3f} ms each, both roles)"
    )
    return Row(
        "SHS handshakes/s (both roles, in memory)",
        f"{rate:.0f}",
        f">= {HANDSHAKES_TARGET:.0f}",
        rate >= HANDSHAKES_TARGET,
        {"count": count, "seconds": elapsed, "per_second": rate},
    )


def _one_handshake(network_key: bytes, client_keys: Keypair, server_keys: Keypair) -> None:
    client = shs.ClientHandshake(network_key, client_keys, server_keys.public)
    server = shs.ServerHandshake(network_key, server_keys)
    msg2 = server.receive_data(client.data_to_send())
    msg3 = client.receive_data(msg2)
    msg4 = server.receive_data(msg3)
    client.receive_data(msg4)
    if (
        not (client.complete and server.complete)
        or client.result.encrypt_key != server.result.decrypt_key
    ):
        raise AssertionError("handshake did not agree on keys")


# --- box stream ---------------------------------------------------------------------------


def bench_boxstream(total_bytes: int, repeats: int) -> list[Row]:
    """Box stream encode+decode vs raw secretbox seal+open, 4 KiB plaintexts."""
    key = os.urandom(32)
    nonce = os.urandom(24)
    count = max(1, total_bytes // MESSAGE_SIZE)
    payloads = [os.urandom(MESSAGE_SIZE) for _ in range(64)]
    megabytes = count * MESSAGE_SIZE / 1e6

    def run_boxstream() -> float:
        encoder = BoxStreamEncoder(key, nonce)
        decoder = BoxStreamDecoder(key, nonce)
        encode, decode = encoder.encode, decoder.receive_data
        start = time.perf_counter()
        for index in range(count):
            payload = payloads[index & 63]
            bodies = decode(encode(payload))
            if len(bodies) != 1 or len(bodies[0]) != MESSAGE_SIZE:
                raise AssertionError("box stream round trip failed")
        elapsed = time.perf_counter() - start
        if bodies[0] != payloads[(count - 1) & 63]:
            raise AssertionError("box stream round trip corrupted data")
        return elapsed

    def run_raw() -> float:
        seal, unseal = nacl.bindings.crypto_secretbox, nacl.bindings.crypto_secretbox_open
        counter = int.from_bytes(nonce, "big")
        start = time.perf_counter()
        for index in range(count):
            payload = payloads[index & 63]
            message_nonce = ((counter + index) & ((1 << 192) - 1)).to_bytes(24, "big")
            plaintext = unseal(seal(payload, message_nonce, key), message_nonce, key)
        elapsed = time.perf_counter() - start
        if plaintext != payloads[(count - 1) & 63]:
            raise AssertionError("secretbox round trip corrupted data")
        return elapsed

    run_boxstream(), run_raw()  # warm-up
    box_times, raw_times = [], []
    for _ in range(repeats):  # interleaved, so both see the same machine state
        box_times.append(run_boxstream())
        raw_times.append(run_raw())
    box_rate = megabytes / min(box_times)
    raw_rate = megabytes / min(raw_times)
    ratio = box_rate / raw_rate
    print(
        f"box stream: {count} x 4 KiB ({megabytes:.1f} MB) encode+decode, best of {repeats}: "
        f"{box_rate:.1f} MB/s ({min(box_times) / count * 1e6:.1f} us/message)"
    )
    print(
        f"raw secretbox (nacl.bindings.crypto_secretbox + crypto_secretbox_open), same payloads: "
        f"{raw_rate:.1f} MB/s ({min(raw_times) / count * 1e6:.1f} us/message)"
    )
    print(
        f"box stream / raw secretbox = {ratio:.2f} (a box stream message is two secret boxes: "
        f"34-byte header + body)"
    )
    return [
        Row(
            "box stream MB/s (4 KiB, encode+decode)",
            f"{box_rate:.1f}",
            f">= {BOX_TARGET_MB_S:.0f}",
            box_rate >= BOX_TARGET_MB_S,
            {"messages": count, "seconds": min(box_times), "mb_per_s": box_rate, "runs": box_times},
        ),
        Row(
            "raw secretbox MB/s (4 KiB, seal+open)",
            f"{raw_rate:.1f}",
            "-",
            None,
            {"messages": count, "seconds": min(raw_times), "mb_per_s": raw_rate, "runs": raw_times},
        ),
        Row("box stream / raw secretbox", f"{ratio:.2f}", "-", None, {"ratio": ratio}),
    ]


# --- certification ------------------------------------------------------------------------


def bench_certify() -> Row:
    conformance = Path(sys.executable).parent / "conformance"
    command = [
        str(conformance) if conformance.exists() else shutil.which("conformance") or "conformance",
        "certify",
        "--protocol",
        "ssb",
    ]
    with tempfile.TemporaryDirectory(prefix="ssb-bench-reports-") as reports:
        command += ["--reports-dir", reports]
        start = time.perf_counter()
        try:
            completed = subprocess.run(
                command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600
            )
        except subprocess.TimeoutExpired:
            print("certification: timed out after 600 s")
            return Row(
                "SSB certification wall time (s)",
                "timeout",
                f"< {CERTIFY_TARGET_S:.0f}, exit 0",
                False,
            )
        elapsed = time.perf_counter() - start
    output = completed.stdout + completed.stderr
    reported = re.search(r"wall time ([0-9.]+) s", output)
    verdicts = [line.strip() for line in output.splitlines() if re.search(r"CONFORMANT", line)]
    print(
        f"certification: `{' '.join(command[:4])} --reports-dir <tmp>` exit {completed.returncode}, "
        f"{elapsed:.1f} s measured (harness says: {reported.group(0) if reported else 'no wall time line'})"
    )
    for verdict in verdicts:
        print(f"  {verdict}")
    if completed.returncode != 0:
        print("  --- certify output (tail) ---")
        for line in output.splitlines()[-30:]:
            print(f"  {line}")
    ok = completed.returncode == 0 and elapsed < CERTIFY_TARGET_S
    return Row(
        "SSB certification wall time (s)",
        f"{elapsed:.1f} (exit {completed.returncode})",
        f"< {CERTIFY_TARGET_S:.0f}, exit 0",
        ok,
        {
            "seconds": elapsed,
            "exit": completed.returncode,
            "harness_wall_time_s": float(reported.group(1)) if reported else None,
            "verdicts": verdicts,
        },
    )


# --- fuzz: the inputs ---------------------------------------------------------------------
#
# A case is (layer, ops, ending). The layer says how far the client gets
# legitimately before the malformed part: "handshake" (nothing valid, or a
# valid msg1 then garbage), "box" (a valid handshake, then box stream ops),
# "rpc" (a valid handshake and box stream carrying malformed RPC). Ops are
# plain tuples generated by hypothesis; the crypto they need (ephemeral keys,
# nonces) is done live by the client.

# Curve25519 u-coordinates of small order, and non-canonical ones (>= p).
_P = 2**255 - 19
LOW_ORDER_POINTS = [
    (0).to_bytes(32, "little"),
    (1).to_bytes(32, "little"),
    (325606250916557431795983626356110631294008115727848805560023387167927233504).to_bytes(
        32, "little"
    ),
    (39382357235489614581723060781553021112529911719440698176882885853963445705823).to_bytes(
        32, "little"
    ),
    (_P - 1).to_bytes(32, "little"),
    (_P).to_bytes(32, "little"),
    (_P + 1).to_bytes(32, "little"),
    bytes([0xFF]) * 32,
]
ENDINGS = ("eof", "eof", "goodbye", "goodbye", "abort", "wait")
WEIRD_JSON = [
    "",
    "{",
    "}",
    "[",
    "null",
    "true",
    "0",
    "-0",
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    '"\\ud800"',
    '"\\u0000"',
    "[1,]",
    '{"a":1,}',
    '{"name":',
    '"unterminated',
    "[[[]]]",
    "1 2",
    '{"name":["whoami"],"type":"async","args":[]} trailing',
    "\ufeff{}",
]


def strategies(node_id: str) -> Any:
    """The hypothesis strategy of fuzz cases (imported lazily: only --fuzz needs it)."""
    from hypothesis import strategies as st

    i32 = st.integers(-(2**31), 2**31 - 1)
    req = st.one_of(st.integers(1, 40), st.integers(-40, 0), i32)
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(-(2**63), 2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
    )
    json_values = st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=8,
    )
    random_feed_id = st.binary(min_size=32, max_size=32).map(
        lambda key: "@" + __import__("base64").b64encode(key).decode() + ".ed25519"
    )
    feed_ids = st.one_of(
        st.just(node_id),
        random_feed_id,
        st.sampled_from(
            [
                "",
                "@",
                "@x.ed25519",
                node_id[:-1],
                node_id + " ",
                node_id.upper(),
                "%" + node_id[1:],
                node_id.replace(".ed25519", ".sha256"),
            ]
        ),
        json_values,
    )
    option_values = st.one_of(
        st.integers(-5, 20),
        st.integers(),
        st.floats(),
        st.booleans(),
        st.none(),
        st.text(max_size=10),
        json_values,
    )
    history_options = st.tuples(
        st.one_of(st.just(node_id), feed_ids, st.none()),  # None: no id at all
        st.dictionaries(
            st.sampled_from(
                ["sequence", "seq", "limit", "live", "old", "keys", "reverse", "gt", "lt"]
            )
            | st.text(max_size=6),
            option_values,
            max_size=6,
        ),
    ).map(lambda pair: pair[1] if pair[0] is None else {"id": pair[0], **pair[1]})
    procedure_types = st.one_of(
        st.sampled_from(["source", "async", "sync", "duplex", "sink", "SOURCE", ""]), json_values
    )
    names = st.one_of(
        st.sampled_from(
            [
                ["createHistoryStream"],
                ["whoami"],
                ["publish"],
                ["blobs", "get"],
                [],
                ["createHistoryStream", "x"],
                "createHistoryStream",
            ]
        ),
        st.lists(st.text(max_size=12), max_size=3),
        json_values,
    )
    # The body of a request, as a dict with keys maybe missing.
    call_bodies = st.fixed_dictionaries(
        {},
        optional={
            "name": names,
            "type": procedure_types,
            "args": st.one_of(st.lists(json_values, max_size=3), json_values),
        },
    )

    rpc_ops = st.one_of(
        st.tuples(
            st.just("raw"),
            st.integers(0, 255),
            st.one_of(st.none(), st.integers(0, 2**32 - 1)),
            req,
            st.binary(max_size=200),
        ),
        st.tuples(st.just("call"), req, st.booleans(), call_bodies),
        st.tuples(
            st.just("history"),
            req,
            st.booleans(),
            st.one_of(st.just("source"), procedure_types),
            st.one_of(
                history_options.map(lambda options: [options]),
                st.lists(history_options, max_size=3),
                json_values,
            ),
        ),
        st.tuples(
            st.just("text"),
            req,
            st.integers(0, 15),
            st.one_of(
                st.sampled_from(WEIRD_JSON),
                st.text(max_size=60),
                st.binary(max_size=60).map(lambda raw: raw.decode("latin-1")),
            ),
        ),
        st.tuples(
            st.just("deep"),
            req,
            st.sampled_from(["[", '{"a":', '[{"b":']),
            st.integers(10, 120_000),
        ),
        st.tuples(st.just("end"), req, st.booleans(), json_values),
        st.tuples(st.just("many-streams"), st.integers(1, 90), st.booleans()),
        st.tuples(st.just("rpc-goodbye")),
        st.tuples(st.just("whoami")),
    )
    box_ops = st.one_of(
        st.tuples(st.just("random"), st.binary(min_size=1, max_size=600)),
        st.tuples(st.just("valid"), st.binary(max_size=4096)),
        st.tuples(st.just("whoami")),
        st.tuples(
            st.just("tamper"),
            st.binary(min_size=1, max_size=300),
            st.integers(0, 400),
            st.integers(1, 255),
        ),
        st.tuples(st.just("oversized"), st.integers(4097, 65535), st.booleans()),
        st.tuples(st.just("truncated"), st.binary(min_size=1, max_size=300), st.integers(0, 400)),
        st.tuples(st.just("skip")),
        st.tuples(st.just("replay")),
        st.tuples(st.just("goodbye")),
        st.tuples(st.just("empty")),
    )
    handshake_ops = st.one_of(
        st.tuples(st.just("garbage"), st.binary(max_size=300)),
        st.tuples(
            st.just("tampered-hello"),
            st.lists(st.tuples(st.integers(0, 63), st.integers(1, 255)), min_size=1, max_size=4),
            st.binary(max_size=64),
        ),
        st.tuples(st.just("wrong-network"), st.binary(min_size=32, max_size=32)),
        st.tuples(
            st.just("bad-ephemeral"),
            st.one_of(st.sampled_from(LOW_ORDER_POINTS), st.binary(min_size=32, max_size=32)),
        ),
        st.tuples(st.just("truncated-hello"), st.integers(0, 63)),
        st.tuples(st.just("garbage-msg3"), st.binary(max_size=250)),
        st.tuples(st.just("truncated-msg3"), st.integers(0, 111)),
        st.tuples(
            st.just("forged-msg3"),
            st.one_of(st.binary(min_size=64, max_size=64), st.just(b"wrong-signer")),
            st.one_of(
                st.sampled_from(LOW_ORDER_POINTS),
                st.binary(min_size=32, max_size=32),
                st.just(b"self"),
            ),
        ),
        st.tuples(st.just("tampered-msg3"), st.integers(0, 111), st.integers(1, 255)),
        st.tuples(st.just("msg1-twice")),
    )
    endings = st.sampled_from(ENDINGS)
    return st.one_of(
        st.tuples(st.just("handshake"), st.lists(handshake_ops, min_size=1, max_size=1), endings),
        st.tuples(st.just("box"), st.lists(box_ops, min_size=1, max_size=6), endings),
        st.tuples(
            st.just("rpc"), st.lists(rpc_ops, min_size=1, max_size=8), endings, st.integers(1, 4096)
        ),
    )


class BoxWriter:
    """Boxes with explicit nonce control, so ops can skip, replay and tamper."""

    def __init__(self, key: bytes, nonce: bytes) -> None:
        self.key = key
        self.nonce = nonce
        self.last = b""

    def box(self, body: bytes) -> bytes:
        header, body_ciphertext = seal_box(self.key, self.nonce, body)
        self.nonce = increment_nonce(self.nonce, 2)
        self.last = header + body_ciphertext
        return self.last

    def boxes(self, plaintext: bytes, split: int = 4096) -> bytes:
        return b"".join(
            self.box(plaintext[start : start + split]) for start in range(0, len(plaintext), split)
        )

    def goodbye(self) -> bytes:
        header = seal_goodbye(self.key, self.nonce)
        self.nonce = increment_nonce(self.nonce)
        return header


def rpc_packet(flags: int, req: int, body: bytes, length: int | None = None) -> bytes:
    return (
        bytes([flags])
        + (len(body) if length is None else length).to_bytes(4, "big")
        + (req & 0xFFFFFFFF).to_bytes(4, "big")
        + body
    )


def json_packet(req: int, value: Any, *, stream: bool = False, end: bool = False) -> bytes:
    text = json.dumps(value, separators=(",", ":"))  # NaN/Infinity come out as such: fine
    return rpc_packet(0x02 | (0x08 if stream else 0) | (0x04 if end else 0), req, text.encode())


def build_rpc_plaintext(ops: list[tuple], node_id: str) -> bytes:
    out = bytearray()
    next_req = 1
    for op in ops:
        kind = op[0]
        if kind == "raw":
            _, flags, length, req, body = op
            out += rpc_packet(flags, req, body, length)
        elif kind == "call":
            _, req, stream, body = op
            out += json_packet(req, body, stream=stream)
        elif kind == "history":
            _, req, stream, type_, args = op
            out += json_packet(
                req, {"name": ["createHistoryStream"], "type": type_, "args": args}, stream=stream
            )
        elif kind == "text":
            _, req, flags, text = op
            out += rpc_packet(0x02 | (flags & 0x0C), req, text.encode("utf-8", "surrogatepass"))
        elif kind == "deep":
            _, req, opener, depth = op
            out += rpc_packet(0x02, req, (opener * depth).encode())
        elif kind == "end":
            _, req, json_body, value = op
            body = json.dumps(value).encode() if json_body else b"\xff" * 3
            out += rpc_packet(0x0E if json_body else 0x0C, req, body)
        elif kind == "many-streams":
            _, count, live = op
            for _ in range(count):
                out += json_packet(
                    next_req + 1000,
                    {
                        "name": ["createHistoryStream"],
                        "type": "source",
                        "args": [{"id": node_id, "live": live}],
                    },
                    stream=True,
                )
                next_req += 1
        elif kind == "rpc-goodbye":
            out += GOODBYE
        elif kind == "whoami":
            out += json_packet(next_req + 5000, {"name": ["whoami"], "type": "async", "args": []})
            next_req += 1
    return bytes(out)


def build_box_bytes(ops: list[tuple], writer: BoxWriter) -> bytes:
    out = bytearray()
    for op in ops:
        kind = op[0]
        if kind == "random":
            out += op[1]
        elif kind == "valid":
            out += writer.box(op[1])
        elif kind == "whoami":
            out += writer.box(json_packet(9000, {"name": ["whoami"], "type": "async", "args": []}))
        elif kind == "tamper":
            _, body, index, xor = op
            box = bytearray(writer.box(body))
            box[index % len(box)] ^= xor
            out += box
        elif kind == "oversized":
            _, declared, with_body = op
            header, body_ciphertext = seal_box(writer.key, writer.nonce, bytes(declared))
            writer.nonce = increment_nonce(writer.nonce, 2)
            out += header + (body_ciphertext if with_body else b"")
        elif kind == "truncated":
            _, body, cut = op
            box = writer.box(body)
            out += box[: cut % len(box)]
        elif kind == "skip":
            writer.nonce = increment_nonce(writer.nonce, 2)
        elif kind == "replay":
            out += writer.last or os.urandom(34)
        elif kind == "goodbye":
            out += writer.goodbye()
        elif kind == "empty":
            out += writer.box(b"")
    return bytes(out)


def handshake_bytes(
    op: tuple, network_key: bytes, client_keys: Keypair, server_public: bytes
) -> tuple[bytes, bool, bool]:
    """What to send for a handshake-layer op that needs no reply first:
    ``(data, hello_is_valid, needs_msg2)``. needs_msg2 ops are built by
    the caller after reading msg2."""
    kind = op[0]
    ephemeral = shs.ephemeral_public(shs.generate_ephemeral_secret())
    good_hello = shs.hello(network_key, ephemeral)
    if kind == "garbage":
        return op[1], _hello_valid(op[1], network_key), False
    if kind == "tampered-hello":
        data = bytearray(good_hello)
        for index, xor in op[1]:
            data[index] ^= xor
        data = bytes(data) + op[2]
        return data, _hello_valid(data, network_key), False
    if kind == "wrong-network":
        data = shs.hello(op[1], ephemeral)
        return data, _hello_valid(data, network_key), False
    if kind == "bad-ephemeral":
        return shs.hello(network_key, op[1]), True, False
    if kind == "truncated-hello":
        return good_hello[: op[1]], False, False
    if kind == "garbage-msg3":
        return good_hello + op[1], True, False
    if kind == "msg1-twice":
        return good_hello + good_hello + good_hello[:48], True, False
    return b"", True, True  # truncated-msg3, forged-msg3, tampered-msg3


def _hello_valid(data: bytes, network_key: bytes) -> bool:
    try:
        shs.open_hello(network_key, data[:64])
        return True
    except shs.HandshakeError:
        return False


def msg3_for(
    op: tuple,
    client: shs.ClientHandshake,
    msg2: bytes,
    network_key: bytes,
    client_keys: Keypair,
    server_public: bytes,
    ephemeral_secret: bytes,
) -> bytes:
    """The bad msg3 of a needs_msg2 op, given the server's msg2."""
    kind = op[0]
    msg3 = client.receive_data(msg2)
    if kind == "truncated-msg3":
        return msg3[: op[1]]
    if kind == "tampered-msg3":
        data = bytearray(msg3)
        data[op[1]] ^= op[2]
        return bytes(data)
    # forged-msg3: a correctly boxed msg3 around a wrong signature and/or key.
    server_ephemeral = msg2[32:]
    ab = shs.shared_secret_ab(ephemeral_secret, server_ephemeral)
    aB = shs.client_shared_secret_aB(ephemeral_secret, server_public)
    signature, public = op[1], op[2]
    if public == b"self":
        public = client_keys.public
    if signature == b"wrong-signer":
        signature = shs.client_auth_signature(
            network_key=network_key,
            client_keypair=Keypair.generate(),
            server_public=server_public,
            shared_secret_ab=ab,
        )
    return shs.box_client_auth(
        network_key=network_key,
        shared_secret_ab=ab,
        shared_secret_aB=aB,
        detached_signature_A=signature,
        client_public=public,
    )


# --- fuzz: running the inputs -------------------------------------------------------------


class BadOutput(Exception):
    """The node sent something it must not have."""


class HandshakeRefused(Exception):
    """The valid handshake that precedes a box or RPC layer input failed."""


@dataclass
class FuzzContext:
    host: str
    port: int
    node_id: str
    server_public: bytes
    deadline: float
    network_key: bytes = MAIN_NETWORK_KEY
    client_keys: list[Keypair] = field(
        default_factory=lambda: [Keypair.generate() for _ in range(4)]
    )
    rotation: Any = field(default_factory=itertools.count)


async def _read_exactly(reader: asyncio.StreamReader, size: int) -> bytes:
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise ConnectionResetError(f"closed after {len(exc.partial)} of {size} bytes") from None


async def run_case(case: tuple, ctx: FuzzContext) -> str:
    """Send one malformed input; return the outcome.

    Two phases, each bounded by ctx.deadline: connecting and sending the
    input (including any valid handshake before it), then waiting for the
    node to close the connection. "closed" and "aborted" are fine. Failures:
    "hung" (the node did not close the connection within the deadline after
    the input), HandshakeRefused (the valid handshake before a box or RPC
    input failed or stalled), "connect-failed", BadOutput (the node sent
    what it must not).
    """
    try:
        async with asyncio.timeout(ctx.deadline):
            reader, writer = await asyncio.open_connection(ctx.host, ctx.port)
    except (OSError, TimeoutError):
        return "connect-failed"
    try:
        try:
            async with asyncio.timeout(ctx.deadline):
                sent = await _send_input(case, ctx, reader, writer)
        except TimeoutError:
            raise HandshakeRefused(f"sending the input took over {ctx.deadline:g} s") from None
        except (ConnectionError, OSError):
            return "closed"  # reset by the node while we wrote
        if sent is None:
            return "aborted"
        decoder, allowed_output = sent
        try:
            async with asyncio.timeout(ctx.deadline):
                await _await_close(reader, decoder, allowed_output)
        except TimeoutError:
            return "hung"
        except (ConnectionError, OSError):
            pass  # reset by the node: closed too
        return "closed"
    finally:
        writer.transport.abort()


async def _send_input(
    case: tuple, ctx: FuzzContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> tuple[BoxStreamDecoder | None, int] | None:
    """Connect-side half of a case. Returns None if the case ends by aborting
    the connection, else (decoder of the node's box stream or None, bytes the
    node may still send in the handshake layer)."""
    layer, ops, ending = case[0], case[1], case[2]
    started = time.monotonic()
    # Not the random module: hypothesis, generating in another thread, rejects its use.
    keys = ctx.client_keys[next(ctx.rotation) % len(ctx.client_keys)]
    decoder: BoxStreamDecoder | None = None
    allowed_output = 0
    box_writer: BoxWriter | None = None
    if layer == "handshake":
        op = ops[0]
        data, hello_valid, needs_msg2 = handshake_bytes(
            op, ctx.network_key, keys, ctx.server_public
        )
        if needs_msg2:
            ephemeral_secret = shs.generate_ephemeral_secret()
            client = shs.ClientHandshake(ctx.network_key, keys, ctx.server_public, ephemeral_secret)
            writer.write(client.data_to_send())
            try:
                msg2 = await _read_exactly(reader, shs.HELLO_SIZE)
            except ConnectionError as exc:
                raise HandshakeRefused(
                    f"no msg2 for a valid msg1 after {time.monotonic() - started:.3f} s: {exc}"
                ) from None
            data = msg3_for(
                op, client, msg2, ctx.network_key, keys, ctx.server_public, ephemeral_secret
            )
            allowed_output = 0  # nothing after msg2 for a bad msg3
        else:
            allowed_output = shs.HELLO_SIZE if hello_valid else 0
        writer.write(data)
    else:
        client = shs.ClientHandshake(ctx.network_key, keys, ctx.server_public)
        writer.write(client.data_to_send())
        try:
            writer.write(client.receive_data(await _read_exactly(reader, shs.HELLO_SIZE)))
            client.receive_data(await _read_exactly(reader, shs.SERVER_ACCEPT_SIZE))
        except (ConnectionError, shs.HandshakeError) as exc:
            raise HandshakeRefused(
                f"valid handshake failed after {time.monotonic() - started:.3f} s: {exc!r}"
            ) from None
        params = client.result
        box_writer = BoxWriter(params.encrypt_key, params.encrypt_nonce)
        decoder = BoxStreamDecoder(params.decrypt_key, params.decrypt_nonce)
        if layer == "box":
            writer.write(build_box_bytes(ops, box_writer))
        else:
            plaintext = build_rpc_plaintext(ops, ctx.node_id)
            # Small boxes exercise re-assembly; at most ~64 of them per input.
            writer.write(box_writer.boxes(plaintext, max(case[3], -(-len(plaintext) // 64))))
    if ending == "abort":
        return None
    if ending == "goodbye" and box_writer is not None:
        writer.write(box_writer.boxes(GOODBYE) + box_writer.goodbye())
    elif ending in ("eof", "goodbye") and writer.can_write_eof():
        writer.write_eof()
    return decoder, allowed_output


async def _await_close(
    reader: asyncio.StreamReader, decoder: BoxStreamDecoder | None, allowed_output: int
) -> None:
    """Read until the node closes the connection (error, EOF, goodbye or its
    own timeout), checking what it says meanwhile."""
    rpc_decoder = RpcDecoder(max_body=1 << 22)
    received = 0
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return
        received += len(chunk)
        if decoder is None:
            if received > allowed_output:
                raise BadOutput(
                    f"{received} byte(s) from the node after a bad handshake message "
                    f"(at most {allowed_output} allowed)"
                )
            continue
        try:
            for body in decoder.receive_data(chunk):
                rpc_decoder.receive_data(body)
        except BoxStreamError as exc:
            raise BadOutput(f"node's box stream does not decode: {exc.reason}") from None
        except RpcError as exc:
            raise BadOutput(f"node's RPC framing broken: {exc}") from None


@dataclass
class FuzzStats:
    outcomes: Counter = field(default_factory=Counter)
    by_layer: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    health_checks: int = 0
    health_failures: list[str] = field(default_factory=list)
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


BAD_OUTCOMES = ("hung", "handshake-refused", "connect-failed", "bad-output", "client-error")


def _rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def health_check(ctx: FuzzContext, timeout: float) -> str | None:
    """A valid handshake + createHistoryStream of the node's feed; None if fine."""
    from reference_impl.ssb.node import ReplicationError, replicate

    try:
        messages = await replicate(
            ctx.host,
            ctx.port,
            network_key=ctx.network_key,
            keypair=Keypair.generate(),
            peer_public=ctx.server_public,
            feed_id=ctx.node_id,
            timeout=timeout,
        )
    except ReplicationError as exc:
        return f"{exc.kind}: {exc}"
    if len(messages) != SEED_MESSAGES:
        return f"expected {SEED_MESSAGES} messages, got {len(messages)}"
    return None


def start_node(
    workdir: Path, handshake_timeout: float, idle_timeout: float
) -> tuple[subprocess.Popen, Path, str, int, str]:
    stderr_path = workdir / "node-stderr.log"
    command = [
        sys.executable,
        "-m",
        "reference_impl.ssb",
        "serve",
        "--key-file",
        str(workdir / "secret"),
        "--create-key",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--seed-messages",
        str(SEED_MESSAGES),
        "--handshake-timeout",
        str(handshake_timeout),
        "--idle-timeout",
        str(idle_timeout),
        "--log-level",
        "ERROR",
    ]
    stderr = open(stderr_path, "wb")  # noqa: SIM115 - the node keeps it
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    stderr.close()
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(30)
    line = ready[0] if ready else ""
    match = re.match(r"SSB_READY host=(\S+) port=(\d+) id=(\S+)", line)
    if not match:
        process.kill()
        raise RuntimeError(
            f"node did not start: {line!r}; stderr: {stderr_path.read_text()[-2000:]}"
        )
    return process, stderr_path, match.group(1), int(match.group(2)), match.group(3)


def run_fuzz(
    count: int,
    *,
    concurrency: int,
    deadline: float,
    handshake_timeout: float,
    idle_timeout: float,
    check_every: int,
    seed: int | None,
) -> list[Row]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    workdir = Path(tempfile.mkdtemp(prefix="ssb-fuzz-"))
    process, stderr_path, host, port, node_id = start_node(workdir, handshake_timeout, idle_timeout)
    ctx = FuzzContext(host, port, node_id, feed_id_to_public(node_id), deadline)
    stats = FuzzStats()
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, name="fuzz-loop", daemon=True)
    loop_thread.start()
    slots = threading.BoundedSemaphore(concurrency)
    in_flight: set = set()
    stop_sampling = threading.Event()
    close_times: list[float] = []

    def sample_rss() -> None:
        while not stop_sampling.is_set():
            rss = _rss_kb(process.pid)
            if rss is not None:
                with stats.lock:
                    stats.rss_samples.append((time.monotonic(), rss))
            stop_sampling.wait(0.2)

    def run_health(label: str) -> None:
        if process.poll() is not None:
            stats.health_failures.append(f"{label}: node exited with status {process.returncode}")
            return
        try:
            problem = asyncio.run_coroutine_threadsafe(health_check(ctx, 10.0), loop).result(15)
        except Exception as exc:  # noqa: BLE001 - report, don't die
            problem = f"health check raised {exc!r}"
        stats.health_checks += 1
        if problem:
            stats.health_failures.append(f"{label}: {problem}")

    async def timed_case(case: tuple) -> str:
        start = time.monotonic()
        outcome = await run_case(case, ctx)
        if outcome == "closed":
            close_times.append(time.monotonic() - start)
        return outcome

    def on_done(case: tuple, future: Any) -> None:
        try:
            outcome = future.result()
        except BadOutput as exc:
            outcome = "bad-output"
            detail = f"{exc} <- {_describe(case)}"
        except HandshakeRefused as exc:
            outcome = "handshake-refused"
            detail = f"{exc} <- {_describe(case)}"
        except Exception:  # noqa: BLE001
            outcome = "client-error"
            detail = f"{traceback.format_exc(limit=3)} <- {_describe(case)}"
        else:
            detail = f"{outcome} <- {_describe(case)}"
        with stats.lock:
            stats.outcomes[outcome] += 1
            stats.by_layer[case[0]] += 1
            if outcome in BAD_OUTCOMES and len(stats.failures) < 20:
                stats.failures.append(detail)
            in_flight.discard(future)
        slots.release()

    submitted = 0

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=strategies(node_id))
    def feed(case: tuple) -> None:
        nonlocal submitted
        entered = time.perf_counter()
        timing["generating"] += entered - timing["left"]
        slots.acquire()
        timing["waiting"] += time.perf_counter() - entered
        future = asyncio.run_coroutine_threadsafe(timed_case(case), loop)
        with stats.lock:
            in_flight.add(future)
        future.add_done_callback(lambda done, case=case: on_done(case, done))
        submitted += 1
        if submitted % check_every == 0:
            run_health(f"after input {submitted}")
        timing["left"] = time.perf_counter()

    if seed is not None:
        feed = hypothesis_seed(seed)(feed)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    time.sleep(0.3)
    start_rss = _rss_kb(process.pid) or 0
    sampler.start()
    print(
        f"fuzz: node pid {process.pid} on {host}:{port} ({node_id}), node timeouts {handshake_timeout:g} s (handshake), "
        f"{idle_timeout:g} s (idle), "
        f"client deadline {deadline:g} s per connection, {concurrency} connections at a time, "
        f"health check every {check_every} inputs"
    )
    run_health("before fuzzing")
    start = time.perf_counter()
    timing = {"generating": 0.0, "waiting": 0.0, "left": start}
    try:
        feed()
    finally:
        for _ in range(concurrency):  # wait for the inputs still in flight
            slots.acquire(timeout=deadline + 5)
        elapsed = time.perf_counter() - start
        for _ in range(concurrency):
            slots.release()
    time.sleep(
        max(1.0, handshake_timeout, idle_timeout) + 0.5
    )  # let sessions end before the final look
    run_health("at the end")
    alive = process.poll() is None
    end_rss = _rss_kb(process.pid) or 0
    stop_sampling.set()
    sampler.join()
    process.send_signal(signal.SIGTERM)
    try:
        exit_status = process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        exit_status = process.wait()
    loop.call_soon_threadsafe(loop.stop)
    loop_thread.join(5)
    node_log = stderr_path.read_text(errors="replace")
    node_errors = [
        line for line in node_log.splitlines() if " ERROR " in line or "Traceback" in line
    ]
    if node_errors:
        kept = Path(tempfile.gettempdir()) / f"ssb-fuzz-node-{process.pid}.log"
        shutil.copyfile(stderr_path, kept)
        print(f"fuzz: node log with errors kept at {kept}")
        error_types = Counter(
            line
            for line in node_log.splitlines()
            if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", line)
        )
        for line, times in error_types.most_common(10):
            print(f"  NODE EXCEPTION x{times}: {line[:200]}")
    shutil.rmtree(workdir, ignore_errors=True)

    done = sum(stats.outcomes.values())
    bad = sum(stats.outcomes[name] for name in BAD_OUTCOMES)
    peak_rss = max([rss for _, rss in stats.rss_samples] + [start_rss, end_rss])
    growth_mb = (peak_rss - start_rss) / 1024
    rate = done / elapsed if elapsed else 0.0
    print(
        f"fuzz: {done} inputs in {elapsed:.1f} s = {rate:.0f} inputs/s "
        f"(by layer: {dict(stats.by_layer)})"
    )
    print(f"fuzz outcomes: {dict(stats.outcomes)}")
    print(
        f"fuzz: client spent {timing['generating']:.1f} s generating inputs (hypothesis) and "
        f"{timing['waiting']:.1f} s waiting for one of the {concurrency} connection slots"
    )
    if close_times:
        ordered = sorted(close_times)
        print(
            f"fuzz: time from connect to close by the node: median {statistics.median(ordered) * 1e3:.0f} ms, "
            f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1e3:.0f} ms, max {ordered[-1] * 1e3:.0f} ms"
        )
    print(
        f"fuzz: node RSS start {start_rss / 1024:.1f} MB, peak {peak_rss / 1024:.1f} MB, "
        f"end {end_rss / 1024:.1f} MB ({len(stats.rss_samples)} samples)"
    )
    print(
        f"fuzz: {stats.health_checks} health checks (handshake + createHistoryStream), "
        f"{len(stats.health_failures)} failed; node alive at the end: {alive}; "
        f"exit status on SIGTERM: {exit_status}; node ERROR log lines: {len(node_errors)}"
    )
    for failure in stats.failures[:10]:
        print(f"  FAILED INPUT: {failure}")
    for failure in stats.health_failures[:10]:
        print(f"  FAILED HEALTH CHECK: {failure}")
    for line in node_errors[:15]:
        print(f"  NODE LOG: {line}")
    checks = [
        (
            f"fuzz inputs handled ({done}/{count})",
            f"{done} ({rate:.0f}/s)",
            f"{count}, no client errors",
            done == count and not stats.outcomes["client-error"],
        ),
        ("fuzz: node alive (no crash)", str(alive), "True, clean exit", alive and exit_status == 0),
        (
            "fuzz: connections not closed by deadline",
            str(stats.outcomes["hung"]),
            f"0 (deadline {deadline:g} s)",
            stats.outcomes["hung"] == 0,
        ),
        (
            "fuzz: other bad outcomes",
            str(bad - stats.outcomes["hung"]),
            "0 (refused/bad output)",
            bad - stats.outcomes["hung"] == 0,
        ),
        (
            "fuzz: valid sessions after fuzz",
            f"{stats.health_checks - len(stats.health_failures)}/{stats.health_checks}",
            "all",
            not stats.health_failures and stats.health_checks > 0,
        ),
        ("fuzz: node unhandled errors logged", str(len(node_errors)), "0", not node_errors),
        (
            "fuzz: node RSS growth MB (peak - start)",
            f"{growth_mb:.1f}",
            f"<= {RSS_GROWTH_LIMIT_MB:.0f}",
            growth_mb <= RSS_GROWTH_LIMIT_MB,
        ),
    ]
    rows = [Row(metric, value, target, ok) for metric, value, target, ok in checks]
    rows[0].data = {
        "inputs": done,
        "seconds": elapsed,
        "per_second": rate,
        "outcomes": dict(stats.outcomes),
        "by_layer": dict(stats.by_layer),
    }
    rows[-1].data = {
        "start_mb": start_rss / 1024,
        "peak_mb": peak_rss / 1024,
        "end_mb": end_rss / 1024,
    }
    for row in rows:
        print(f"{'PASS' if row.ok else 'FAIL'}: {row.metric} = {row.value} (target {row.target})")
    return rows


def _describe(case: tuple) -> str:
    text = repr(case)
    return text if len(text) <= 300 else text[:300] + "..."


# --- main ----------------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    widths = [
        max(len(row.metric) for row in rows),
        max(len(row.value) for row in rows),
        max(len(row.target) for row in rows),
    ]
    header = f"{'metric':<{widths[0]}}  {'value':>{widths[1]}}  {'target':<{widths[2]}}  result"
    print()
    print(header)
    print("-" * len(header))
    for row in rows:
        verdict = "-" if row.ok is None else ("PASS" if row.ok else "FAIL")
        print(
            f"{row.metric:<{widths[0]}}  {row.value:>{widths[1]}}  {row.target:<{widths[2]}}  {verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short run (fewer iterations)")
    parser.add_argument(
        "--fuzz",
        type=int,
        default=0,
        metavar="N",
        help="also send N malformed inputs to a node (benchmark tier: 10000+; default off)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--skip-certify", action="store_true", help="do not run the certification")
    parser.add_argument("--fuzz-only", action="store_true", help="only the fuzz tier")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="fuzz connections at a time (default 32)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=2.0,
        help="seconds the node gets to close each fuzz connection (default 2)",
    )
    parser.add_argument(
        "--node-handshake-timeout",
        type=float,
        default=1.0,
        help="the fuzzed node's --handshake-timeout (default 1; valid handshakes of a "
        "loaded client must fit in it)",
    )
    parser.add_argument(
        "--node-idle-timeout",
        type=float,
        default=0.5,
        help="the fuzzed node's --idle-timeout (default 0.5)",
    )
    parser.add_argument(
        "--check-every",
        type=int,
        default=200,
        help="a valid session every this many fuzz inputs (default 200)",
    )
    parser.add_argument("--seed", type=int, help="hypothesis seed for a reproducible fuzz run")
    args = parser.parse_args(argv)

    rows: list[Row] = []
    if not args.fuzz_only:
        rows.append(bench_handshakes(300 if args.quick else 3000))
        rows.extend(
            bench_boxstream((8 if args.quick else 64) * 1024 * 1024, 2 if args.quick else 3)
        )
        if not args.skip_certify:
            rows.append(bench_certify())
    if args.fuzz:
        rows.extend(
            run_fuzz(
                args.fuzz,
                concurrency=args.concurrency,
                deadline=args.deadline,
                handshake_timeout=args.node_handshake_timeout,
                idle_timeout=args.node_idle_timeout,
                check_every=args.check_every,
                seed=args.seed,
            )
        )
    print_table(rows)
    failed = [row for row in rows if row.ok is False]
    print(
        f"\n{'FAIL' if failed else 'PASS'}: {len(rows) - len(failed)} of {len(rows)} figures "
        "within target (or informational)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "python": sys.version.split()[0],
                    "quick": args.quick,
                    "fuzz": args.fuzz,
                    "passed": not failed,
                    "metrics": [
                        {
                            "metric": row.metric,
                            "value": row.value,
                            "target": row.target,
                            "pass": row.ok,
                            **({"data": row.data} if row.data else {}),
                        }
                        for row in rows
                    ],
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
