"""A pcapng capture of a case, made from its wire trace, for Wireshark.

The harness does not sniff the network: it records what it wrote and read
on each connection (core/transport.py :class:`WireTrace`). This module
writes that record as a capture: per connection of the case, synthesised
IPv4 (or IPv6) TCP segments between the connection's real addresses and
ports (loopback, as the harness's sockets named them), in both directions:

- a three-way handshake when the connection was opened, from whichever end
  opened it;
- each chunk the harness wrote or read as data segments (cut at
  :data:`SEGMENT_BYTES`), at the trace's time for it, with sequence and
  acknowledgement numbers that run on over the connection, and an ACK from
  the other end;
- a FIN or RST for each end the trace saw close or reset the connection
  (a connection still open when the trace was taken has none).

What the payload is depends on the connection (``TraceConnection.kind``):

- TCP: the bytes as they crossed the socket (for SSB, the encrypted box
  stream; the decrypted ``-plain`` entries become packet comments);
- TLS: the decrypted application stream the harness wrote and read, said
  so in a comment. The TLS records are not kept, and no session keys are
  written: with them, a reader could decrypt what this file masks;
- WebSocket: the messages as RFC 6455 frames (a client's masked, with a
  zero key so that the hex reads as the payload) after a synthesised HTTP
  upgrade, so Wireshark's WebSocket dissector reads them;
- relayed (interop relays): what the relay forwarded between the two
  nodes, from the client's end to the server.

Secrets the trace masks (its :class:`~conformance.core.redact.Redactor`)
are replaced by ``*`` bytes here too, in payloads and in comments: a
capture shows what a rendered trace shows, never more. Times are the
harness's: when it wrote a chunk, and when a read returned one (with an
impairment relay in between, what it delivered and when; the relay keeps
no times of its own).
"""

from __future__ import annotations

import base64
import hashlib
import io
import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import dpkt
from dpkt.pcapng import (
    PCAPNG_OPT_COMMENT,
    PCAPNG_OPT_ENDOFOPT,
    EnhancedPacketBlockLE,
    InterfaceDescriptionBlockLE,
    PcapngOptionLE,
    SectionHeaderBlockLE,
    Writer,
)

from .transport import (
    HARNESS,
    TARGET,
    ConnectionEnd,
    TraceConnection,
    TraceEntry,
    WireTrace,
    hexdump,
)

MEDIA_TYPE = "application/x-pcapng"
"""The MIME type of a capture attached to an Allure result (with
:data:`EXTENSION`, a browser downloads it as a ``.pcapng`` file)."""
EXTENSION = "pcapng"

LINKTYPE_RAW = 101
"""Packets begin with their IP header (v4 or v6): no link layer to invent."""
SNAPLEN = 262144
SEGMENT_BYTES = 16384
"""Largest TCP payload per synthesised segment."""
WINDOW = 65535
UNKNOWN_LOCAL_PORT = 40000
UNKNOWN_PEER_PORT = 9
"""Ports of an end the trace does not know (entries recorded without a
connection): any port, the discard service's for the peer."""
MASK_BYTE = ord("*")
"""What a secret's bytes become in a capture (a trace's hex dump prints ``**``)."""
COMMENT_HEX_BYTES = 1024
"""Plaintext (``-plain`` entries) shown as hex in a packet comment, at most."""
WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
"""RFC 6455 section 1.3: what Sec-WebSocket-Accept hashes the key with."""

_FROM_LOCAL = {"sent", "sent-plain", "client->server"}
_FROM_PEER = {"received", "received-plain", "server->client"}
_LOCAL_SIDES = {HARNESS, "client"}
"""``ConnectionEnd.by`` values that name the connection's local end."""


def from_local(direction: str) -> bool | None:
    """Whether an entry's bytes went from the connection's local end (the
    harness; a relay's client) to its peer; None for an event. The SSB
    MITM's legs name the relay itself: ``relay -> client``, ``server -> relay``."""
    if direction in _FROM_LOCAL or direction.startswith("relay -> "):
        return True
    if direction in _FROM_PEER or direction.endswith(" -> relay"):
        return False
    return None


def masked_bytes(data: bytes, positions: Iterable[int]) -> bytes:
    """``data`` with the bytes at ``positions`` replaced by ``*``."""
    out = bytearray(data)
    for i in positions:
        if 0 <= i < len(out):
            out[i] = MASK_BYTE
    return bytes(out)


def websocket_frame(payload: bytes, text: bool, masked: bool) -> bytes:
    """One final RFC 6455 frame: text (opcode 1) or binary (2); a client's
    frame is masked, with an all-zero key (its payload bytes unchanged)."""
    first = 0x80 | (0x1 if text else 0x2)
    mask_bit = 0x80 if masked else 0
    size = len(payload)
    if size < 126:
        header = bytes([first, mask_bit | size])
    elif size < 1 << 16:
        header = bytes([first, mask_bit | 126]) + struct.pack(">H", size)
    else:
        header = bytes([first, mask_bit | 127]) + struct.pack(">Q", size)
    return header + (b"\0\0\0\0" if masked else b"") + payload


def websocket_upgrade(host: str, port: int, path: str, number: int) -> tuple[bytes, bytes]:
    """A synthesised HTTP upgrade (request, response) for connection
    ``number``: the trace keeps messages, not the HTTP exchange, and
    Wireshark needs it to read the frames after it as WebSocket."""
    key = base64.b64encode(hashlib.sha256(b"conformance-ws-%d" % number).digest()[:16])
    accept = base64.b64encode(hashlib.sha1(key + WEBSOCKET_GUID).digest())
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    request = (
        f"GET {path or '/'} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    response = (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept.decode()}\r\n\r\n"
    ).encode()
    return request, response


@dataclass
class _Flow:
    """One connection's TCP state while its packets are written."""

    connection: TraceConnection
    local: tuple[bytes, int, int]
    """(packed address, port, IP version)"""
    peer: tuple[bytes, int, int]
    seq: dict[bool, int] = field(default_factory=lambda: {True: 1000, False: 5000})
    """Next sequence number, keyed by "from the local end"."""
    opened: bool = False
    finished: dict[bool, bool] = field(default_factory=lambda: {True: False, False: False})
    reset: bool = False
    comments: list[str] = field(default_factory=list)
    """Events and plaintext waiting for the connection's next packet."""
    last_packet: int | None = None
    """Index (in the writer's list) of the connection's latest packet."""
    last_data: dict[bool, int] = field(default_factory=dict)
    """Index of the latest data packet from each end (keyed like ``seq``)."""
    told_tls: bool = False
    """The first data packet of a TLS connection says what its payload is."""


def _address(value: tuple[str, int] | None, fallback_port: int) -> tuple[bytes, int, int]:
    host, port = value if value is not None else ("127.0.0.1", fallback_port)
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        # A host name (an interop relay's server given by name): loopback,
        # as the harness's targets run.
        ip = ipaddress.ip_address("127.0.0.1")
    return ip.packed, port, ip.version


class _Capture:
    """The packets of one trace's capture, written as the trace is walked
    in time order (:func:`pcapng`)."""

    def __init__(self, trace: WireTrace) -> None:
        self.trace = trace
        self.redactor = trace.redactor
        self.packets: list[tuple[float, bytes, list[str]]] = []
        """(time, IP packet, its comments)"""
        self.last_ts = 0.0
        self.ip_id = 0
        self.connections = {c.number: c for c in trace.connections}
        self.flows: dict[int, _Flow] = {}
        self.unattached: list[str] = []
        """Events of no known connection: in the section comment."""

    def flow(self, number: int | None) -> _Flow:
        """The flow of connection ``number``; entries of no known
        connection (a trace recorded without them) share flow 0."""
        key = number if number in self.connections else 0
        if key not in self.flows:
            connection = self.connections.get(key) or TraceConnection(
                0, "tcp", "entries of no known connection", None, None, HARNESS, 0.0
            )
            self.flows[key] = _Flow(
                connection,
                _address(connection.local, UNKNOWN_LOCAL_PORT),
                _address(connection.peer, UNKNOWN_PEER_PORT),
            )
        return self.flows[key]

    def entry(self, entry: TraceEntry) -> None:
        """One entry of the trace: data segments, or a packet comment."""
        if entry.direction == "event":
            if entry.connection in self.connections:
                self.flow(entry.connection).comments.append(self.redactor.text(entry.note))
            else:
                self.unattached.append(self.redactor.text(entry.note))
            return
        local_sends = from_local(entry.direction)
        flow = self.flow(entry.connection)
        self.open(flow, entry.at)
        masked = self.redactor.masked_positions(entry.data) | entry.masked
        data = masked_bytes(entry.data, masked)
        note = self.redactor.text(entry.note)
        if entry.direction.endswith("-plain"):
            comment = (
                f"{'harness -> target' if local_sends else 'target -> harness'} plaintext, "
                f"{len(data)} bytes{': ' + note if note else ''}\n"
                + hexdump(data, limit=COMMENT_HEX_BYTES, masked=masked)
            )
            if local_sends is False and False in flow.last_data:
                # Decrypted after it was read: on the latest bytes the peer sent.
                self.packets[flow.last_data[False]][2].append(comment)
            else:
                # Encrypted before it is sent: on the connection's next packet.
                flow.comments.append(comment)
            return
        if note:
            flow.comments.append(note)
        if flow.connection.kind == "tls" and not flow.told_tls:
            flow.told_tls = True
            flow.comments.append(
                f"TLS ({flow.connection.detail}): this is the decrypted application stream as "
                "the harness wrote and read it; the TLS records are not kept and no session keys "
                "are written (they would decrypt what the capture masks)"
            )
        sender_is_local = local_sends is not False
        if flow.connection.kind == "websocket" and not entry.framed:
            client_sends = sender_is_local == (flow.connection.initiator != TARGET)
            data = websocket_frame(data, entry.note.startswith("text message"), masked=client_sends)
        self.data(flow, sender_is_local, data, entry.at)

    # -- packets

    def _ts(self, at: float) -> float:
        ts = max(self.trace.started_wall + at, self.last_ts + 1e-6)
        self.last_ts = ts
        return ts

    def packet(
        self, flow: _Flow, local_sends: bool, flags: int, at: float, payload: bytes = b""
    ) -> None:
        src, dst = (flow.local, flow.peer) if local_sends else (flow.peer, flow.local)
        ack_flag = flags & dpkt.tcp.TH_ACK
        segment = dpkt.tcp.TCP(
            sport=src[1],
            dport=dst[1],
            seq=flow.seq[local_sends] & 0xFFFFFFFF,
            ack=(flow.seq[not local_sends] & 0xFFFFFFFF) if ack_flag else 0,
            flags=flags,
            win=WINDOW,
            data=payload,
        )
        self.ip_id = (self.ip_id + 1) & 0xFFFF
        if src[2] == 4 and dst[2] == 4:
            ip: dpkt.Packet = dpkt.ip.IP(
                src=src[0], dst=dst[0], p=dpkt.ip.IP_PROTO_TCP, ttl=64, id=self.ip_id, data=segment
            )
        else:
            ip = dpkt.ip6.IP6(
                src=_as_v6(src), dst=_as_v6(dst), nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=segment
            )
            ip.plen = len(bytes(segment))
            segment.sum = 0
            segment.sum = _tcp6_checksum(ip, segment)
        flow.seq[local_sends] += len(payload) + (
            1 if flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN) else 0
        )
        self.packets.append((self._ts(at), bytes(ip), flow.comments))
        flow.comments = []
        flow.last_packet = len(self.packets) - 1

    def open(self, flow: _Flow, at: float) -> None:
        """The three-way handshake, from the end that opened the connection."""
        if flow.opened:
            return
        flow.opened = True
        by_local = flow.connection.initiator != TARGET
        self.packet(flow, by_local, dpkt.tcp.TH_SYN, at)
        self.packet(flow, not by_local, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, at)
        self.packet(flow, by_local, dpkt.tcp.TH_ACK, at)
        if flow.connection.kind == "websocket":
            request, response = websocket_upgrade(
                *_shown_address(flow.connection, by_local),
                flow.connection.path,
                flow.connection.number,
            )
            flow.comments.append(
                "WebSocket upgrade synthesised for this capture: the harness's trace keeps the "
                "messages, not the HTTP exchange (whose headers it does not record)"
            )
            self.data(flow, by_local, request, at)
            self.data(flow, not by_local, response, at)

    def data(self, flow: _Flow, local_sends: bool, payload: bytes, at: float) -> None:
        push = dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK
        for offset in range(0, len(payload), SEGMENT_BYTES):
            self.packet(flow, local_sends, push, at, payload[offset : offset + SEGMENT_BYTES])
        flow.last_data[local_sends] = len(self.packets) - 1
        # The other end acknowledges what it got (also after its own FIN: a
        # half-closed end still reads).
        if not flow.reset:
            self.packet(flow, not local_sends, dpkt.tcp.TH_ACK, at)

    def end(self, flow: _Flow, local_side: bool, how: str, at: float) -> None:
        if flow.reset or flow.finished[local_side]:
            return
        if how == "rst":
            self.packet(flow, local_side, dpkt.tcp.TH_RST | dpkt.tcp.TH_ACK, at)
            flow.reset = True
            return
        self.packet(flow, local_side, dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK, at)
        flow.finished[local_side] = True
        # The other end acknowledges the FIN (with its own FIN later, if it closes).
        self.packet(flow, not local_side, dpkt.tcp.TH_ACK, at)

    # -- the file

    def write(self, title: str) -> bytes:
        # What came after a connection's last packet goes on that packet.
        for flow in self.flows.values():
            if flow.comments and flow.last_packet is not None:
                ts, packet, comments = self.packets[flow.last_packet]
                self.packets[flow.last_packet] = (ts, packet, comments + flow.comments)
            elif flow.comments:
                self.unattached.extend(flow.comments)
            flow.comments = []
        out = io.BytesIO()
        shb = SectionHeaderBlockLE(opts=_options(self.section_comments(title)))
        idb = InterfaceDescriptionBlockLE(
            snaplen=SNAPLEN,
            linktype=LINKTYPE_RAW,
            opts=[
                PcapngOptionLE(code=2, data=b"conformance-harness-trace"),  # if_name
                PcapngOptionLE(code=PCAPNG_OPT_ENDOFOPT),
            ],
        )
        writer = Writer(out, shb=shb, idb=idb)
        for ts, packet, comments in self.packets:
            epb = EnhancedPacketBlockLE(pkt_data=packet, opts=_options(comments))
            writer.writepkt(epb, ts=ts)
        return out.getvalue()

    def section_comments(self, title: str) -> list[str]:
        lines = [
            (title + "\n" if title else "")
            + "Synthesised by the conformance harness from the case's wire trace: TCP segments "
            "as the harness wrote and read them on each connection, at the times it did (not "
            "a network capture). Secrets the trace masks are replaced by '*' bytes."
        ]
        for connection in self.trace.connections:
            note = connection.describe()
            if connection.kind == "tls":
                note += (
                    "; the TCP payload is the decrypted application stream (the TLS records "
                    "are not kept, and no session keys are written)"
                )
            lines.append(note)
        dropped = self.trace.dropped
        if dropped or self.trace.dropped_entries:
            lines.append(
                f"Not in this capture: {dropped} bytes and {self.trace.dropped_entries} entries "
                f"past the trace's bounds ({self.trace.limit} bytes per direction, "
                f"{self.trace.max_entries} entries); each connection's stream is the kept bytes "
                "only, without a gap"
            )
        if self.unattached:
            lines.append("Events of no single connection:\n" + "\n".join(self.unattached))
        return lines


def _shown_address(connection: TraceConnection, by_local: bool) -> tuple[str, int]:
    """The address the opening end connected to (the Host of an upgrade)."""
    target = connection.peer if by_local else connection.local
    return target if target is not None else ("127.0.0.1", 0)


def _as_v6(address: tuple[bytes, int, int]) -> bytes:
    if address[2] == 6:
        return address[0]
    return ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + address[0]).packed


def _tcp6_checksum(ip: dpkt.Packet, segment: dpkt.Packet) -> int:
    body = bytes(segment)
    pseudo = ip.src + ip.dst + struct.pack(">I3xB", len(body), dpkt.ip.IP_PROTO_TCP)
    return dpkt.in_cksum(pseudo + body)


def _options(comments: list[str]) -> list[PcapngOptionLE]:
    if not comments:
        return []
    return [PcapngOptionLE(code=PCAPNG_OPT_COMMENT, text=text) for text in comments] + [
        PcapngOptionLE(code=PCAPNG_OPT_ENDOFOPT)
    ]


def pcapng(trace: WireTrace, title: str = "") -> bytes:
    """The trace as a pcapng file (bytes): one TCP stream per connection,
    secrets masked. ``title`` (the case id, say) heads the section comment."""
    capture = _Capture(trace)
    # The trace's entries, each connection's opening and each end it saw,
    # in the order they happened (ties: opening, entries, ends).
    timeline: list[tuple[float, int, int, object]] = []
    for connection in trace.connections:
        timeline.append((connection.opened_at, 0, connection.number, connection))
        for end in connection.ends:
            timeline.append((end.at, 2, connection.number, end))
    for index, entry in enumerate(trace.entries):
        timeline.append((entry.at, 1, index, entry))
    timeline.sort(key=lambda item: item[:3])
    for at, kind, number, item in timeline:
        if kind == 0:
            capture.open(capture.flow(number), at)
        elif kind == 2:
            assert isinstance(item, ConnectionEnd)
            capture.end(capture.flow(number), item.by in _LOCAL_SIDES, item.how, at)
        else:
            assert isinstance(item, TraceEntry)
            capture.entry(item)
    return capture.write(title)
