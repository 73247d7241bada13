"""Robustness of the reference SSB node against malformed input (CI-sized fuzzing).

A node runs in-process, on its own event loop in a background thread, with
short handshake and idle timeouts. Hypothesis generates malformed handshake
messages, malformed box streams after a valid handshake, and malformed RPC
inside a valid box stream. For every input the node must close the
connection before DEADLINE (every socket read here has a timeout), send
nothing it must not (nothing after a bad handshake message; only well-formed
boxes and RPC frames otherwise) and log no unhandled exception; and after the
inputs it must still serve a valid session (handshake, createHistoryStream,
goodbye).

bench/ssb_bench.py --fuzz N runs the same kind of inputs at benchmark scale
against a node subprocess, with memory sampling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ssb import shs
from reference_impl.ssb.boxstream import (
    BoxStreamDecoder,
    BoxStreamError,
    increment_nonce,
    seal_box,
    seal_goodbye,
)
from reference_impl.ssb.connection import Closed, SsbConnection, StreamData, StreamEnd
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.node import SsbNode
from reference_impl.ssb.rpc import GOODBYE, RpcDecoder, RpcError

NETWORK_KEY = bytes(range(32))
MESSAGES = 3
NODE_TIMEOUT = 0.5
"""The node's handshake and idle timeouts: a silent client is dropped after this."""
DEADLINE = 3.0
"""Seconds the node gets to close a connection once our input is sent."""
CHECK_EVERY = 25
"""A valid session every this many examples, and at the end of each test."""

FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Curve25519 points of small order (and non-canonical encodings).
_P = 2**255 - 19
LOW_ORDER_POINTS = [
    (value % 2**256).to_bytes(32, "little")
    for value in (
        0,
        1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
        _P - 1,
        _P,
        _P + 1,
    )
]


# --- the node under test ----------------------------------------------------------------------


class _ErrorLog(logging.Handler):
    """Collects ERROR records of reference_impl.ssb: unhandled session exceptions."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


@dataclass
class RunningNode:
    node: SsbNode
    port: int
    loop: asyncio.AbstractEventLoop
    errors: _ErrorLog
    examples: int = 0

    @property
    def public(self) -> bytes:
        return self.node.keypair.public


@pytest.fixture(scope="module")
def running_node() -> Iterator[RunningNode]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzzed-node", daemon=True)
    thread.start()
    node = SsbNode(
        Keypair.generate(), NETWORK_KEY, handshake_timeout=NODE_TIMEOUT, idle_timeout=NODE_TIMEOUT
    )
    for number in range(1, MESSAGES + 1):
        node.publish({"type": "post", "text": f"post {number}"})
    errors = _ErrorLog()
    errors.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger("reference_impl.ssb")
    logger.addHandler(errors)
    try:
        _, port = asyncio.run_coroutine_threadsafe(node.start("127.0.0.1", 0), loop).result(10)
        yield RunningNode(node, port, loop, errors)
    finally:
        logger.removeHandler(errors)
        asyncio.run_coroutine_threadsafe(node.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# --- a blocking client, every read bounded ----------------------------------------------------


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    end = time.monotonic() + DEADLINE
    while len(data) < size:
        sock.settimeout(max(0.01, end - time.monotonic()))
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_until_closed(sock: socket.socket, on_data=None) -> int:
    """Read until the node closes the connection; fail if it has not by DEADLINE.
    Returns the number of bytes read."""
    received = 0
    end = time.monotonic() + DEADLINE
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            pytest.fail(f"the node did not close the connection within {DEADLINE} s")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            pytest.fail(f"the node did not close the connection within {DEADLINE} s")
        except ConnectionError:
            return received  # reset: closed with our data unread
        if not chunk:
            return received
        received += len(chunk)
        if on_data is not None:
            on_data(chunk)


def send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except ConnectionError:
        pass  # the node hung up first: fine, it only has to close


def half_close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class BoxWriter:
    """Our direction of the box stream, with explicit nonces so ops can break it."""

    def __init__(self, key: bytes, nonce: bytes) -> None:
        self.key, self.nonce, self.last = key, nonce, b""

    def box(self, body: bytes) -> bytes:
        header, ciphertext = seal_box(self.key, self.nonce, body)
        self.nonce = increment_nonce(self.nonce, 2)
        self.last = header + ciphertext
        return self.last

    def boxes(self, plaintext: bytes, split: int = 4096) -> bytes:
        return b"".join(self.box(plaintext[i : i + split]) for i in range(0, len(plaintext), split))

    def goodbye(self) -> bytes:
        header = seal_goodbye(self.key, self.nonce)
        self.nonce = increment_nonce(self.nonce)
        return header


class OutputChecker:
    """Decodes what the node sends: it must be valid boxes carrying valid RPC frames."""

    def __init__(self, key: bytes, nonce: bytes) -> None:
        self.boxes = BoxStreamDecoder(key, nonce)
        self.rpc = RpcDecoder(max_body=1 << 22)
        self.messages = []

    def __call__(self, chunk: bytes) -> None:
        try:
            for body in self.boxes.receive_data(chunk):
                self.messages += self.rpc.receive_data(body)
        except BoxStreamError as exc:
            pytest.fail(f"the node's box stream does not decode: {exc.reason}")
        except RpcError as exc:
            pytest.fail(f"the node's RPC framing is broken: {exc}")


def open_box_stream(running: RunningNode, sock: socket.socket) -> tuple[BoxWriter, OutputChecker]:
    client = shs.ClientHandshake(NETWORK_KEY, Keypair.generate(), running.public)
    sock.sendall(client.data_to_send())
    sock.sendall(client.receive_data(recv_exactly(sock, shs.HELLO_SIZE)))
    client.receive_data(recv_exactly(sock, shs.SERVER_ACCEPT_SIZE))
    params = client.result
    return BoxWriter(params.encrypt_key, params.encrypt_nonce), OutputChecker(
        params.decrypt_key, params.decrypt_nonce
    )


VALID_SESSION_TIMEOUT = 10.0
"""The node's handshake and idle timeouts while a valid session runs (the
node's defaults): the session checks that the node still works after the
fuzzing, not how fast this process (the client and the node share its
GIL) gets through a handshake on a loaded machine; at NODE_TIMEOUT the node
hung up on a valid client between its messages under a full test tier."""


@contextmanager
def patient_node(running: RunningNode) -> Iterator[None]:
    """The node's timeouts at VALID_SESSION_TIMEOUT for the sessions that
    start inside (a session reads them when it starts and at each read),
    NODE_TIMEOUT again after."""
    node = running.node
    node.handshake_timeout = node.idle_timeout = VALID_SESSION_TIMEOUT
    try:
        yield
    finally:
        node.handshake_timeout = node.idle_timeout = NODE_TIMEOUT


def assert_valid_session(running: RunningNode) -> None:
    """Handshake, createHistoryStream of the node's feed, goodbyes: all must work."""
    with patient_node(running):
        _valid_session(running)
    assert_no_node_errors(running)


def _valid_session(running: RunningNode) -> None:
    with connect(running.port) as sock:
        conn = SsbConnection.client(NETWORK_KEY, Keypair.generate(), running.public)
        sock.sendall(conn.data_to_send())
        events = []
        end = time.monotonic() + DEADLINE
        req = None
        while True:
            sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                data = sock.recv(65536)
            except TimeoutError:
                pytest.fail("valid session: no answer from the node")
            new = conn.receive_data(data) if data else conn.receive_eof()
            assert not any(isinstance(event, Closed) and event.failed for event in new), new
            events += new
            if req is None and conn.is_open:
                req = conn.request(
                    ["createHistoryStream"], [{"id": running.node.feed_id}], "source"
                )
            if req is not None and any(isinstance(e, StreamEnd) and e.req == -req for e in events):
                break
            assert data, "valid session: the node hung up"
            sock.sendall(conn.data_to_send())
        items = [
            event.msg.json()
            for event in events
            if isinstance(event, StreamData) and event.req == -req
        ]
        assert [item["value"]["sequence"] for item in items] == list(range(1, MESSAGES + 1))
        conn.close()
        sock.sendall(conn.data_to_send())
        read_until_closed(sock)


def assert_no_node_errors(running: RunningNode) -> None:
    """No unhandled exception logged by the node since the last check.

    Waits first for the node's sessions to end: a session logs its exception
    after hanging up, so the client can see the close before the log."""
    end = time.monotonic() + DEADLINE
    while running.node._sessions and time.monotonic() < end:
        time.sleep(0.002)
    records, running.errors.records = running.errors.records, []
    assert records == [], "\n".join(records)


def after_example(running: RunningNode) -> None:
    assert_no_node_errors(running)
    running.examples += 1
    if running.examples % CHECK_EVERY == 0:
        assert_valid_session(running)


# --- strategies -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
requests = st.one_of(st.integers(1, 30), st.integers(-30, 0), st.integers(-(2**31), 2**31 - 1))


def rpc_packet(flags: int, req: int, body: bytes, length: int | None = None) -> bytes:
    return (
        bytes([flags])
        + (len(body) if length is None else length).to_bytes(4, "big")
        + (req & 0xFFFFFFFF).to_bytes(4, "big")
        + body
    )


def json_packet(req: int, value, *, stream: bool = False) -> bytes:
    return rpc_packet(0x02 | (0x08 if stream else 0), req, json.dumps(value).encode())


@st.composite
def rpc_inputs(draw, feed_id: str) -> bytes:
    """One malformed (or odd but well-framed) RPC packet's bytes."""
    kind = draw(
        st.sampled_from(["raw", "huge-length", "bad-json", "deep", "history", "call", "end"])
    )
    req = draw(requests)
    if kind == "raw":  # any flags, including unknown body type 3 and the unused bits
        return rpc_packet(draw(st.integers(0, 255)), req, draw(st.binary(max_size=64)))
    if kind == "huge-length":
        return rpc_packet(
            draw(st.integers(0, 255)), req, b"", draw(st.integers(256 * 1024, 2**32 - 1))
        )
    if kind == "bad-json":
        text = draw(
            st.sampled_from(["", "{", "[1,]", "NaN", "1e400", '"\\ud800"', '{"name":'])
            | st.text(max_size=30)
        )
        return rpc_packet(0x02 | draw(st.sampled_from([0, 0x08])), req, text.encode())
    if kind == "deep":
        return rpc_packet(
            0x02,
            req,
            (draw(st.sampled_from(["[", '{"a":'])) * draw(st.integers(500, 40_000))).encode(),
        )
    if kind == "history":
        options = draw(
            st.dictionaries(
                st.sampled_from(["sequence", "seq", "limit", "live", "old", "keys"])
                | st.text(max_size=5),
                st.integers()
                | st.floats()
                | st.booleans()
                | st.none()
                | st.text(max_size=8)
                | json_values,
                max_size=4,
            )
        )
        feed = draw(st.sampled_from([feed_id, "@x.ed25519", feed_id[:-1], None]) | json_values)
        if feed is not None:
            options["id"] = feed
        args = draw(st.sampled_from([[options], options, [], [options, options], "args"]))
        type_ = draw(st.sampled_from(["source", "async", "duplex", "sink"]) | json_values)
        body = {"name": ["createHistoryStream"], "type": type_, "args": args}
        return json_packet(req, body, stream=draw(st.booleans()))
    if kind == "call":  # unknown procedures and wrong shapes
        body = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from([["whoami"], ["nope"], ["blobs", "get"], [], "whoami"])
                    | json_values,
                    "type": st.sampled_from(["async", "source", "sync", "x"]) | json_values,
                    "args": st.lists(json_values, max_size=2) | json_values,
                },
            )
        )
        return json_packet(req, body, stream=draw(st.booleans()))
    return rpc_packet(0x0E, req, json.dumps(draw(json_values)).encode())  # end packet, any request


# --- malformed handshakes ---------------------------------------------------------------------

handshake_inputs = st.one_of(
    st.tuples(st.just("garbage"), st.binary(max_size=200)),
    st.tuples(st.just("tampered-hello"), st.integers(0, 63), st.integers(1, 255)),
    st.tuples(st.just("wrong-network"), st.binary(min_size=32, max_size=32)),
    st.tuples(st.just("bad-ephemeral"), st.sampled_from(LOW_ORDER_POINTS)),
    st.tuples(st.just("truncated-hello"), st.integers(0, 63)),
    st.tuples(st.just("garbage-msg3"), st.binary(min_size=1, max_size=200)),
    st.tuples(st.just("truncated-msg3"), st.integers(0, 111)),
    st.tuples(st.just("tampered-msg3"), st.integers(0, 111), st.integers(1, 255)),
    st.tuples(
        st.just("forged-msg3"),
        st.binary(min_size=64, max_size=64),
        st.sampled_from(LOW_ORDER_POINTS) | st.binary(min_size=32, max_size=32),
    ),
)


@settings(FUZZ_SETTINGS, max_examples=examples(60))
@given(case=handshake_inputs)
def test_malformed_handshake_is_dropped_silently(running_node: RunningNode, case: tuple) -> None:
    kind = case[0]
    keys = Keypair.generate()
    with connect(running_node.port) as sock:
        ephemeral_secret = shs.generate_ephemeral_secret()
        client = shs.ClientHandshake(NETWORK_KEY, keys, running_node.public, ephemeral_secret)
        msg1 = client.data_to_send()
        allowed = 0  # bytes the node may still send: msg2 only, and only for a valid msg1
        if kind == "garbage":
            data = case[1]
            allowed = shs.HELLO_SIZE if _valid_hello(data) else 0
        elif kind == "tampered-hello":
            tampered = bytearray(msg1)
            tampered[case[1]] ^= case[2]
            data = bytes(tampered)
        elif kind == "wrong-network":
            data = shs.hello(case[1], msg1[32:])
            allowed = shs.HELLO_SIZE if case[1] == NETWORK_KEY else 0
        elif kind == "bad-ephemeral":
            data = shs.hello(NETWORK_KEY, case[1])
        elif kind == "truncated-hello":
            data = msg1[: case[1]]
        elif kind == "garbage-msg3":
            data = msg1 + case[1]
            allowed = shs.HELLO_SIZE
        else:  # the rest need the node's msg2 first
            send(sock, msg1)
            msg2 = recv_exactly(sock, shs.HELLO_SIZE)
            msg3 = client.receive_data(msg2)
            if kind == "truncated-msg3":
                data = msg3[: case[1]]
            elif kind == "tampered-msg3":
                tampered = bytearray(msg3)
                tampered[case[1]] ^= case[2]
                data = bytes(tampered)
            else:  # forged-msg3: correctly boxed, with a bad signature and/or key
                ab = shs.shared_secret_ab(ephemeral_secret, msg2[32:])
                aB = shs.client_shared_secret_aB(ephemeral_secret, running_node.public)
                data = shs.box_client_auth(
                    network_key=NETWORK_KEY,
                    shared_secret_ab=ab,
                    shared_secret_aB=aB,
                    detached_signature_A=case[1],
                    client_public=case[2],
                )
        send(sock, data)
        half_close(sock)  # truncated input: the node must give up on EOF
        received = read_until_closed(sock)
    assert received <= allowed, f"the node answered a bad handshake with {received} byte(s)"
    after_example(running_node)


def _valid_hello(data: bytes) -> bool:
    try:
        shs.open_hello(NETWORK_KEY, data[:64])
        return True
    except shs.HandshakeError:
        return False


# --- malformed box streams --------------------------------------------------------------------

box_ops = st.one_of(
    st.tuples(st.just("random"), st.binary(min_size=1, max_size=300)),
    st.tuples(st.just("whoami")),
    st.tuples(
        st.just("tamper"),
        st.binary(min_size=1, max_size=100),
        st.integers(0, 200),
        st.integers(1, 255),
    ),
    st.tuples(st.just("oversized"), st.integers(4097, 65535), st.booleans()),
    st.tuples(st.just("truncated"), st.binary(min_size=1, max_size=100), st.integers(0, 200)),
    st.tuples(st.just("skip-nonce")),
    st.tuples(st.just("replay")),
    st.tuples(st.just("goodbye")),
    st.tuples(st.just("empty-body")),
)


@settings(FUZZ_SETTINGS, max_examples=examples(60))
@given(ops=st.lists(box_ops, min_size=1, max_size=5), end_with_goodbye=st.booleans())
def test_malformed_box_stream_ends_the_connection(
    running_node: RunningNode, ops: list, end_with_goodbye: bool
) -> None:
    with connect(running_node.port) as sock:
        writer, checker = open_box_stream(running_node, sock)
        data = bytearray()
        for op in ops:
            kind = op[0]
            if kind == "random":
                data += op[1]
            elif kind == "whoami":
                data += writer.box(
                    json_packet(100, {"name": ["whoami"], "type": "async", "args": []})
                )
            elif kind == "tamper":
                box = bytearray(writer.box(op[1]))
                box[op[2] % len(box)] ^= op[3]
                data += box
            elif kind == "oversized":  # a header declaring more than 4096 bytes
                header, ciphertext = seal_box(writer.key, writer.nonce, bytes(op[1]))
                writer.nonce = increment_nonce(writer.nonce, 2)
                data += header + (ciphertext if op[2] else b"")
            elif kind == "truncated":
                box = writer.box(op[1])
                data += box[: op[2] % len(box)]
            elif kind == "skip-nonce":
                writer.nonce = increment_nonce(writer.nonce, 2)
            elif kind == "replay":
                data += writer.last or bytes(34)
            elif kind == "goodbye":
                data += writer.goodbye()
            else:
                data += writer.box(b"")
        if end_with_goodbye:
            data += writer.boxes(GOODBYE) + writer.goodbye()
        send(sock, bytes(data))
        half_close(sock)
        read_until_closed(sock, checker)
    after_example(running_node)


# --- malformed RPC ----------------------------------------------------------------------------


@settings(FUZZ_SETTINGS, max_examples=examples(80))
@given(
    data=st.data(),
    split=st.integers(1, 4096),
    ending=st.sampled_from(["goodbye", "eof", "whoami+goodbye"]),
)
def test_malformed_rpc_is_answered_or_ends_the_connection(
    running_node: RunningNode, data, split: int, ending: str
) -> None:
    packets = data.draw(st.lists(rpc_inputs(running_node.node.feed_id), min_size=1, max_size=4))
    plaintext = b"".join(packets)
    with connect(running_node.port) as sock:
        writer, checker = open_box_stream(running_node, sock)
        wire = writer.boxes(plaintext, max(split, -(-len(plaintext) // 32)))
        if ending == "whoami+goodbye":
            wire += writer.boxes(
                json_packet(10**6, {"name": ["whoami"], "type": "async", "args": []})
            )
        if ending != "eof":
            wire += writer.boxes(GOODBYE) + writer.goodbye()
        send(sock, wire)
        half_close(sock)
        read_until_closed(sock, checker)
    after_example(running_node)


# --- specific inputs the fuzzing found, and the timeouts --------------------------------------


def _session_with(running: RunningNode, plaintext: bytes) -> list:
    """Send ``plaintext`` as RPC, then whoami, then goodbye; return the node's RPC messages."""
    with connect(running.port) as sock:
        writer, checker = open_box_stream(running, sock)
        whoami = json_packet(10**6, {"name": ["whoami"], "type": "async", "args": []})
        send(
            sock,
            writer.boxes(plaintext)
            + writer.boxes(whoami)
            + writer.boxes(GOODBYE)
            + writer.goodbye(),
        )
        read_until_closed(sock, checker)
    assert_no_node_errors(running)
    return checker.messages


@pytest.mark.parametrize(
    "body",
    [
        {
            "name": ["whoami"],
            "type": [],
            "args": [],
        },  # unhashable type: was a TypeError in the node
        {"name": ["createHistoryStream"], "type": {"a": 1}, "args": [{}]},
    ],
)
def test_request_with_non_string_type_is_a_violation_not_a_crash(
    running_node: RunningNode, body
) -> None:
    messages = _session_with(running_node, json_packet(1, body, stream=True))
    assert any(message.req == -(10**6) and not message.end for message in messages), messages


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deeply_nested_json_is_a_violation_not_a_crash(
    running_node: RunningNode, opener: str
) -> None:
    # Was a RecursionError escaping the RPC layer.
    messages = _session_with(running_node, rpc_packet(0x02, 1, (opener * 50_000).encode()))
    assert any(message.req == -(10**6) and not message.end for message in messages), messages


def test_request_sharing_a_read_with_a_bad_box(running_node: RunningNode) -> None:
    # Was a RuntimeError: the node answered a request from the same read
    # after the bad box had failed the connection.
    with connect(running_node.port) as sock:
        writer, checker = open_box_stream(running_node, sock)
        whoami = writer.box(json_packet(1, {"name": ["whoami"], "type": "async", "args": []}))
        bad = bytearray(writer.box(b"x"))
        bad[0] ^= 1
        send(sock, whoami + bytes(bad))  # one write: the node reads both at once
        read_until_closed(sock, checker)
    assert_no_node_errors(running_node)
    assert_valid_session(running_node)


@pytest.mark.parametrize("stage", ["handshake", "box stream"])
def test_silent_client_is_dropped_by_the_node_timeouts(
    running_node: RunningNode, stage: str
) -> None:
    with connect(running_node.port) as sock:
        if stage == "handshake":
            send(sock, bytes(10))  # part of a hello, then nothing
        else:
            open_box_stream(running_node, sock)
        started = time.monotonic()
        read_until_closed(sock)
    assert NODE_TIMEOUT * 0.8 <= time.monotonic() - started < DEADLINE
    assert_valid_session(running_node)


def test_node_still_serves_after_the_fuzzing(running_node: RunningNode) -> None:
    assert_valid_session(running_node)
