"""core/pcap.py: a case's wire trace as a pcapng capture: the connections
each entry belongs to, TCP segments numbered as a real stream would be in
both directions, secrets masked, WebSocket and TLS as Wireshark reads them.
(tests/report/test_captures.py opens a whole run's captures with tshark.)"""

from __future__ import annotations

import asyncio
import io
import struct

import dpkt

from conformance.core import pcap
from conformance.core.redact import Redactor
from conformance.core.run_folder import RunFolder
from conformance.core.transport import HARNESS, TARGET, TcpConnection, TcpServer, WireTrace

HARNESS_END = ("127.0.0.1", 40001)
TARGET_END = ("127.0.0.1", 61613)


def _segments(data: bytes) -> list[tuple[float, dpkt.tcp.TCP, dpkt.ip.IP]]:
    reader = dpkt.pcapng.Reader(io.BytesIO(data))
    assert reader.datalink() == pcap.LINKTYPE_RAW
    out = []
    for ts, buf in reader:
        ip = dpkt.ip.IP(buf)
        out.append((ts, ip.data, ip))
    return out


def _packet_blocks(data: bytes) -> list[bytes]:
    """The enhanced packet blocks of a pcapng file, whole (with their comments)."""
    blocks, offset = [], 0
    while offset < len(data):
        kind, length = struct.unpack_from("<II", data, offset)
        if kind == 6:
            blocks.append(data[offset : offset + length])
        offset += length
    return blocks


def _flags(segment: dpkt.tcp.TCP) -> str:
    names = [(dpkt.tcp.TH_SYN, "S"), (dpkt.tcp.TH_FIN, "F"), (dpkt.tcp.TH_RST, "R")]
    shown = "".join(letter for bit, letter in names if segment.flags & bit)
    return shown + ("A" if segment.flags & dpkt.tcp.TH_ACK else "")


def _conversation() -> WireTrace:
    trace = WireTrace()
    wire = trace.connect("tcp", HARNESS_END, TARGET_END, HARNESS)
    wire.event("connected")
    wire.record("sent", b"CONNECT\n\n\0", "CONNECT")
    wire.record("received", b"CONNECTED\nversion:1.2\n\n\0")
    wire.record("sent", b"DISCONNECT\n\n\0")
    wire.event("target closed the connection")
    wire.ended(TARGET, "fin")
    return trace


def test_an_empty_trace_is_a_capture_without_packets():
    data = pcap.pcapng(WireTrace(), "case.x")
    assert data[:4] == b"\x0a\x0d\x0d\x0a"  # a pcapng section header
    assert _segments(data) == []
    assert b"case.x" in data


def test_segments_run_on_in_both_directions_after_a_handshake():
    trace = _conversation()
    packets = _segments(pcap.pcapng(trace))
    segments = [segment for _, segment, _ in packets]
    assert [_flags(s) for s in segments[:3]] == ["S", "SA", "A"]
    outbound = [s for s in segments if s.sport == HARNESS_END[1]]
    inbound = [s for s in segments if s.sport == TARGET_END[1]]
    assert {(s.sport, s.dport) for s in outbound} == {(40001, 61613)}
    assert {(s.sport, s.dport) for s in inbound} == {(61613, 40001)}
    # Each side's data follows on from its previous segment; every ACK
    # names exactly what the other side has sent so far.
    sent = {40001: segments[0].seq + 1, 61613: segments[1].seq + 1}
    for segment in segments[2:]:
        other = 61613 if segment.sport == 40001 else 40001
        assert segment.seq == sent[segment.sport], segment
        assert segment.ack == sent[other], segment
        sent[segment.sport] += len(segment.data) + (1 if segment.flags & dpkt.tcp.TH_FIN else 0)
    payload = {
        port: b"".join(s.data for s in segments if s.sport == port) for port in (40001, 61613)
    }
    assert payload == {
        40001: b"CONNECT\n\n\0DISCONNECT\n\n\0",
        61613: b"CONNECTED\nversion:1.2\n\n\0",
    }
    # The target's FIN, as the trace saw it; the harness had not closed.
    assert [_flags(s) for s in inbound if s.flags & dpkt.tcp.TH_FIN] == ["FA"]
    assert not any(s.flags & (dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST) for s in outbound)
    # The trace's times, in order.
    times = [ts for ts, _, _ in packets]
    assert times == sorted(times) and times[0] >= trace.started_wall


def test_a_client_role_connection_is_opened_by_the_target_and_a_reset_ends_it():
    trace = WireTrace()
    wire = trace.connect("tcp", TARGET_END, HARNESS_END, TARGET, "client")
    wire.record("received", b"CONNECT\n\n\0")
    wire.ended(HARNESS, "rst")
    segments = [s for _, s, _ in _segments(pcap.pcapng(trace))]
    assert (segments[0].sport, _flags(segments[0])) == (HARNESS_END[1], "S")
    assert (segments[-1].sport, _flags(segments[-1])) == (TARGET_END[1], "RA")


def test_long_writes_are_cut_into_segments():
    trace = WireTrace()
    wire = trace.connect("tcp", HARNESS_END, TARGET_END)
    wire.record("sent", bytes(range(256)) * 200)
    data = [s.data for _, s, _ in _segments(pcap.pcapng(trace)) if s.data]
    assert [len(d) for d in data] == [pcap.SEGMENT_BYTES] * 3 + [51200 - 3 * pcap.SEGMENT_BYTES]
    assert b"".join(data) == bytes(range(256)) * 200


def test_secrets_are_masked_in_payloads_and_comments():
    secret = b"passcode-0123456789"
    trace = WireTrace(redactor=Redactor([secret]))
    wire = trace.connect("tcp", HARNESS_END, TARGET_END)
    wire.record(
        "sent", b"CONNECT\npasscode:" + secret + b"\n\n\0", f"CONNECT with {secret.decode()}"
    )
    wire.record("sent-plain", b"body " + secret, "the plaintext")
    wire.event(f"the target echoed {secret.hex()}")
    data = pcap.pcapng(trace)
    assert secret not in data and secret.hex().encode() not in data
    payload = b"".join(s.data for _, s, _ in _segments(data))
    assert payload == b"CONNECT\npasscode:" + b"*" * len(secret) + b"\n\n\0"
    assert b"[redacted]" in data and b"** ** **" in data


def test_plaintext_entries_are_comments_not_payload():
    trace = WireTrace()
    wire = trace.connect("tcp", HARNESS_END, TARGET_END)
    wire.record("sent-plain", b"rpc request", "RPC")
    wire.record("sent", b"\x01\x02box stream bytes")
    data = pcap.pcapng(trace)
    payload = b"".join(s.data for _, s, _ in _segments(data))
    assert payload == b"\x01\x02box stream bytes"
    assert b"harness -> target plaintext, 11 bytes: RPC" in data


def test_tls_is_written_as_its_decrypted_stream_and_says_so():
    trace = WireTrace()
    wire = trace.connect("tls", HARNESS_END, TARGET_END, detail="TLSv1.3 (TLS_AES_128_GCM_SHA256)")
    wire.record("sent", b"CONNECT\n\n\0")
    data = pcap.pcapng(trace)
    assert b"CONNECT\n\n\0" in b"".join(s.data for _, s, _ in _segments(data))
    assert b"decrypted application stream" in data and b"no session keys" in data


def test_websocket_messages_are_frames_after_an_upgrade():
    trace = WireTrace()
    wire = trace.connect("websocket", HARNESS_END, ("127.0.0.1", 8080))
    wire.connection.path = "/btp"
    wire.record("sent", b"\x01\x02", "binary message: hello")
    wire.record("received", b"hi", "text message")
    segments = [s for _, s, _ in _segments(pcap.pcapng(trace))]
    client = b"".join(s.data for s in segments if s.sport == HARNESS_END[1])
    server = b"".join(s.data for s in segments if s.sport == 8080)
    assert client.startswith(b"GET /btp HTTP/1.1\r\n") and b"Upgrade: websocket" in client
    assert server.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    # The client's binary frame masked (zero key), the server's text frame not.
    assert client.endswith(b"\x82\x82\0\0\0\0\x01\x02")
    assert server.endswith(b"\x81\x02hi")


async def test_connections_know_their_number_and_ends_and_render_names_them_when_several():
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        trace = WireTrace()
        first = await TcpConnection.open("127.0.0.1", port, trace, deadline=2.0)
        await first.send(b"ping")
        assert await first.receive_exactly(4, "echo") == b"ping"
        assert await first.await_close(2.0) == (True, b"")
        single = trace.render()
        second = await TcpConnection.open("127.0.0.1", port, trace, deadline=2.0)
        second.abort()
    one, two = trace.connections
    assert (one.number, two.number) == (1, 2)
    assert one.peer == ("127.0.0.1", port) and one.local and one.local[0] == "127.0.0.1"
    assert [(end.by, end.how) for end in one.ends] == [(TARGET, "fin")]
    assert [(end.by, end.how) for end in two.ends] == [(HARNESS, "rst")]
    assert {e.connection for e in trace.entries} == {1, 2}
    # One connection: the text as before; two: each line names its own.
    assert "[connection" not in single and "connections:" not in single
    several = trace.render()
    assert "harness -> target  4 bytes  [connection 1]" in several
    assert f"connection 2: harness {two.local[0]}:{two.local[1]} <-> target" in several
    # The capture holds both, the second reset by the harness.
    segments = [s for _, s, _ in _segments(pcap.pcapng(trace))]
    assert {s.sport for s in segments if s.flags == dpkt.tcp.TH_SYN} == {
        one.local[1],
        two.local[1],
    }
    assert any(s.flags & dpkt.tcp.TH_RST and s.sport == two.local[1] for s in segments)


async def test_an_accepted_connection_is_opened_by_the_target():
    trace = WireTrace()
    async with TcpServer(trace, deadline=2.0) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        conn = await server.accept(2.0)
        writer.write(b"hello")
        assert await conn.receive_exactly(5, "hello") == b"hello"
        writer.close()
    (connection,) = trace.connections
    assert connection.initiator == TARGET and connection.local[1] == server.listen_port
    assert connection.peer == writer.get_extra_info("sockname")[:2]
    event = next(e for e in trace.entries if e.note.startswith("target connected from"))
    assert event.connection == 1


def test_the_capture_lies_beside_the_text_trace(tmp_path):
    folder = RunFolder(tmp_path)
    text = folder.case_trace("stomp.x", "reference-stomp")
    capture = folder.case_capture("stomp.x", "reference-stomp")
    assert capture.parent == text.parent == folder.traces("reference-stomp")
    assert capture.suffix == ".pcapng" and capture.stem == text.stem == "stomp.x"
    assert folder.capture_beside(text.relative_to(tmp_path)) == capture
    capture.parent.mkdir(parents=True)
    capture.write_bytes(b"")
    assert folder.captures() == [capture]


def test_decrypted_bytes_read_are_noted_on_the_packet_that_carried_them():
    trace = WireTrace()
    wire = trace.connect("tcp", HARNESS_END, TARGET_END)
    wire.record("received", b"\x10encrypted box")
    wire.record("received-plain", b"rpc answer", "RPC answer")
    wire.record("sent", b"\x20next box")
    data = pcap.pcapng(trace)
    carrying = next(b for b in _packet_blocks(data) if b"\x10encrypted box" in b)
    assert b"target -> harness plaintext, 10 bytes: RPC answer" in carrying


def test_a_half_closed_end_still_acknowledges_what_it_reads():
    trace = WireTrace()
    wire = trace.connect("tcp", HARNESS_END, TARGET_END)
    wire.record("sent", b"SEND\n\n\0")
    wire.ended(HARNESS, "fin")
    wire.record("received", b"RECEIPT\n\n\0")
    segments = [s for _, s, _ in _segments(pcap.pcapng(trace))]
    fin = next(i for i, s in enumerate(segments) if s.flags & dpkt.tcp.TH_FIN)
    after = segments[fin + 1 :]
    assert [(s.sport, _flags(s), len(s.data)) for s in after] == [
        (TARGET_END[1], "A", 0),  # the FIN acknowledged
        (TARGET_END[1], "A", 10),  # the answer
        (HARNESS_END[1], "A", 0),  # acknowledged by the half-closed harness
    ]
    assert after[-1].ack == after[-2].seq + 10


def test_ipv6_ends_are_written_as_ipv6():
    trace = WireTrace()
    wire = trace.connect("tcp", ("::1", 40001), ("::1", 61613))
    wire.record("sent", b"hello")
    reader = dpkt.pcapng.Reader(io.BytesIO(pcap.pcapng(trace)))
    packets = [dpkt.ip6.IP6(buf) for _, buf in reader]
    assert {p.src for p in packets} == {b"\0" * 15 + b"\1"}
    assert b"".join(p.data.data for p in packets) == b"hello"
