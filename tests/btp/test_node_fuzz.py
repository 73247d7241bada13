"""Robustness of the reference BTP node against malformed WebSocket frames.

A node runs as a subprocess (``python -m reference_impl.btp serve``), so a
crash shows as a dead process, not as a test exception. Hypothesis generates
binary frames (garbage, valid packets truncated, with flipped bytes, with a
length prefix that lies, with bytes after the envelope (readable when the
rest is: erratum BTP-E3), with non-IA5 names, legacy
types 3-5) and text frames, and sends them on ONE authenticated connection.

After every frame the test sends a probe Message and reads until the
probe's Response. What may arrive before it is decided by our own codec
(the spec's rule, "unreadable packets must be ignored", and "no response"
to unexpected responses): nothing, if the frame is unreadable or is a
response or a legacy packet; exactly one answer with the frame's request
id, if the frame happens to decode as a Message or Transfer. The node must
never close the connection, and its memory must stay bounded.

CI runs ``FUZZ_EXAMPLES`` (default 1000) examples; the nightly profile
(tests/fuzz_budget.py) and the benchmark tier run 10,000
(``CONFORMANCE_FUZZ_EXAMPLES=10000``, see bench/README.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from ..fuzz_budget import examples
from websockets.sync.client import ClientConnection, connect

from reference_impl.btp.packet import (
    BtpDecodeError,
    ContentType,
    Message,
    ProtocolDataEntry,
    Response,
    Transfer,
    decode_packet,
    encode_packet,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = b"fuzz-token"
READ_TIMEOUT = 5.0
FUZZ_EXAMPLES = int(os.environ.get("CONFORMANCE_FUZZ_EXAMPLES", examples(1000)))
PROBE_ID = 0xFFFF_FFF0
"""The probes' request id; generated frames never use it (see _no_probe_id)."""

pytestmark = pytest.mark.timeout(120 + FUZZ_EXAMPLES // 20)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    work = tmp_path_factory.mktemp("btp-fuzz")
    token_file = work / "token"
    token_file.write_bytes(TOKEN)
    # The node prints a line per event: into a file, never into a pipe that
    # nobody reads (a full pipe would block the node, not the code under test).
    log = work / "node.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reference_impl.btp",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--auth-token-file",
                str(token_file),
                "--idle-timeout",
                "600",
            ],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = None
        for _ in range(200):
            ready = [line for line in log.read_text().splitlines() if line.startswith("BTP_READY")]
            if ready:
                url = ready[0].split("url=")[1].split()[0]
                break
            assert process.poll() is None, f"node exited: {log.read_text()}"
            time.sleep(0.05)
        assert url, f"node did not print BTP_READY within 10 s: {log.read_text()}"
        yield process, url
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()


class Session:
    """One authenticated connection, reused by every example."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ws.send(
            encode_packet(
                Message(
                    1,
                    (
                        ProtocolDataEntry("auth", ContentType.APPLICATION_OCTET_STREAM, b""),
                        ProtocolDataEntry("auth_token", ContentType.TEXT_PLAIN_UTF8, TOKEN),
                    ),
                )
            )
        )
        assert decode_packet(self.ws.recv(READ_TIMEOUT)) == Response(1)

    def answers_before_probe(self, frame: bytes | str) -> list[object]:
        """Send ``frame`` then a probe; everything received before the
        probe's Response, decoded."""
        self.ws.send(frame)
        self.ws.send(
            encode_packet(
                Message(PROBE_ID, (ProtocolDataEntry("probe", ContentType.TEXT_PLAIN_UTF8, b"?"),))
            )
        )
        got = []
        for _ in range(10):
            try:
                message = self.ws.recv(READ_TIMEOUT)
            except TimeoutError:
                raise AssertionError(
                    f"no answer to the probe within {READ_TIMEOUT} s after {frame!r}"
                ) from None
            except ConnectionClosed as exc:
                raise AssertionError(f"node closed the connection after {frame!r}: {exc}") from None
            assert isinstance(message, bytes), f"node sent a text message: {message!r}"
            packet = decode_packet(message)  # the node must only send readable packets
            if packet.request_id == PROBE_ID and isinstance(packet, Response):
                return got
            got.append(packet)
        raise AssertionError(f"10 packets and no probe answer after {frame!r}: {got}")


def _packet() -> st.SearchStrategy[bytes]:
    names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
    entries = st.lists(
        st.builds(ProtocolDataEntry, names, st.integers(0, 2), st.binary(max_size=200)), max_size=4
    )
    request_ids = st.integers(0, PROBE_ID - 1)
    messages = st.builds(Message, request_ids, entries.map(tuple))
    transfers = st.builds(Transfer, request_ids, st.integers(0, 1000), entries.map(tuple))
    responses = st.builds(Response, request_ids, entries.map(tuple))
    return st.one_of(messages, transfers, responses).map(lambda p: encode_packet(p, validate=False))


@st.composite
def malformed_frames(draw) -> bytes | str:
    kind = draw(
        st.sampled_from(
            [
                "garbage",
                "truncated",
                "flipped",
                "length",
                "trailing",
                "non-ia5",
                "legacy",
                "text",
                "empty-ish",
            ]
        )
    )
    if kind == "garbage":
        return draw(st.binary(min_size=1, max_size=300))
    if kind == "text":
        return draw(st.text(max_size=200))
    if kind == "empty-ish":
        return draw(
            st.sampled_from(
                [b"\x00", b"\x06", b"\x06\x00\x00\x00\x01", b"\x06\x00\x00\x00\x01\x80"]
            )
        )
    whole = bytearray(draw(_packet()))
    if kind == "truncated":
        return bytes(whole[: draw(st.integers(1, len(whole) - 1))])
    if kind == "flipped":
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(whole) - 1))
            whole[at] ^= draw(st.integers(1, 255))
        return bytes(whole)
    if kind == "length":
        whole[5] = draw(st.integers(0, 255))  # the envelope's length prefix (first byte)
        return bytes(whole)
    if kind == "trailing":
        return bytes(whole) + draw(st.binary(min_size=1, max_size=20))
    if kind == "non-ia5":
        at = bytes(whole).find(b"\x01", 6)  # somewhere after the header: any byte made >= 0x80
        at = draw(st.integers(6, len(whole) - 1)) if at < 0 else at
        whole[at] |= 0x80
        return bytes(whole)
    # legacy: type 3, 4 or 5 with a plausible body
    whole[0] = draw(st.sampled_from([3, 4, 5]))
    return bytes(whole)


def _expected_answer_id(frame: bytes | str) -> int | None:
    """The request id the node must answer once, or None for silence."""
    if isinstance(frame, str):
        return None
    try:
        packet = decode_packet(frame)
    except BtpDecodeError:
        return None
    return packet.request_id if isinstance(packet, (Message, Transfer)) else None


def _no_probe_id(frame: bytes | str) -> bool:
    return isinstance(frame, str) or len(frame) < 5 or int.from_bytes(frame[1:5], "big") != PROBE_ID


def test_node_ignores_malformed_frames_and_keeps_serving(node):
    process, url = node
    with connect(
        url, open_timeout=READ_TIMEOUT, close_timeout=1, compression=None, ping_interval=None
    ) as ws:
        _fuzz(process, Session(ws))


def _fuzz(process: subprocess.Popen, session: Session) -> None:
    rss_before = _rss_kib(process.pid)
    counts = {"silent": 0, "answered": 0}

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )
    @given(malformed_frames().filter(_no_probe_id))
    def check(frame):
        answers = session.answers_before_probe(frame)
        expected = _expected_answer_id(frame)
        if expected is None:
            assert answers == [], f"node answered a frame it must ignore: {frame!r} -> {answers}"
            counts["silent"] += 1
        else:
            assert [a.request_id for a in answers] == [expected], (
                f"a readable request must get exactly one answer with its id: {frame!r} -> {answers}"
            )
            counts["answered"] += 1

    started = time.monotonic()
    check()
    assert process.poll() is None, f"node exited with {process.returncode}"
    rss_after = _rss_kib(process.pid)
    print(
        f"\nBTP fuzz: {sum(counts.values())} frames ({counts['silent']} to ignore, {counts['answered']} "
        f"readable requests) in {time.monotonic() - started:.1f} s; node RSS {rss_before} -> {rss_after} KiB"
    )
    assert counts["silent"] >= FUZZ_EXAMPLES // 2, (
        counts
    )  # the strategy mostly makes unreadable frames
    # Bounded memory: the node keeps no state per ignored frame.
    assert rss_after - rss_before < 20 * 1024, f"node RSS grew from {rss_before} to {rss_after} KiB"
