"""Hostile fake targets: nodes that flood, trickle, reset mid-frame, declare
gigantic lengths, stream forever, or answer validly and then send garbage.

Each runs as its own process on loopback, launched by the harness through a
targets file (:func:`targets_toml`), and prints one ready line::

    HOSTILE_READY port=P id=@...ed25519        (SSB)
    HOSTILE_READY port=P url=ws://127.0.0.1:P/  (BTP)
    HOSTILE_READY port=P                        (STOMP, TLS 1.3 with the run's certificates)

The SSB fakes that misbehave after the handshake speak a valid secret
handshake and box stream first, driven by the project's own sans-I/O cores
(reference_impl/ssb), so the harness gets past decryption and meets the bad
bytes where they are meant to be: in a box header, an RPC header, a stream.
The BTP fakes complete a valid WebSocket upgrade (websockets library) and
then write frames by hand on the raw transport.

    python -m tests.hostile.fake_targets ssb flood --port 0
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from reference_impl.btp.packet import (
    ContentType,
    Error,
    Message,
    ProtocolDataEntry,
    Response,
    decode_packet,
    encode_packet,
)
from reference_impl.ssb import boxstream, shs
from reference_impl.ssb.boxstream import BoxStreamDecoder, BoxStreamEncoder
from reference_impl.ssb.feed import create_message, message_id
from reference_impl.ssb.keys import MAIN_NETWORK_KEY, Keypair
from reference_impl.ssb.rpc import RpcDecoder, RpcMessage, encode_header

RANDOM_BLOCK = os.urandom(1 << 20)
"""Random bytes written in slices: a flood as fast as the socket takes it,
without spending the fake's CPU on the random generator."""

TRIGGERED_AT = "20261123000000.000Z"

TRICKLE_INTERVAL = 1.0
"""Seconds between the bytes of a slowloris target."""

SSB_BEHAVIOURS = (
    "flood",
    "flood-on-error",
    "slowloris",
    "reset-mid-frame",
    "huge-rpc-length",
    "huge-box-length",
    "endless-stream",
    "valid-then-garbage",
)
BTP_BEHAVIOURS = (
    "flood",
    "flood-on-error",
    "slowloris",
    "reset-mid-frame",
    "huge-frame",
    "huge-oer-length",
    "endless-stream",
    "valid-then-garbage",
    "huge-message",
)
"""``flood-on-error`` behaves on valid input (a valid handshake; a Response
to valid auth) and floods where it should hang up: after an invalid
handshake message (SSB), or after the Error to a bad auth (BTP), so the
harness meets the flood in the cases that wait for a close."""
STOMP_BEHAVIOURS = ("flood", "slowloris")
"""STOMP: a server completing the mutual TLS 1.3 handshake as the profile
wants it (TLS 1.3 only, a client certificate from the run's CA required, so
it refuses the negative TLS cases' clients as it must), then sending random
bytes as fast as the socket takes them (``flood``) or a valid CONNECTED
frame a byte every :data:`DRIP_INTERVAL` seconds (``slowloris``)."""

DRIP_INTERVAL = 0.25
"""Seconds between the bytes of the STOMP slowloris: a few bytes arrive
within a case's deadline, never a whole frame."""

STOMP_CONNECTED = b"CONNECTED\nversion:1.2\n\n\x00"

HUGE_MESSAGE_SIZE = 100 << 20
"""BTP huge-message: the one binary message sent, whole, where an answer is
due (104,857,610 bytes with its frame header)."""

FLOOD_MESSAGE_SIZE = (1 << 20) - 64
"""BTP flood-on-error messages: just under the WebSocket library's default
size limit, so only the harness's own packet bound refuses them."""


def random_chunks(size: int = 65536):
    """Endless random-looking chunks of ``size`` bytes."""
    offset = 0
    while True:
        if offset + size > len(RANDOM_BLOCK):
            offset = 0
        yield RANDOM_BLOCK[offset : offset + size]
        offset += 4099  # shift so consecutive chunks differ


def reset(writer_or_transport: Any) -> None:
    """Close with a TCP RST (SO_LINGER 0), not a FIN: the connection is
    reset, as a crashing node's would be."""
    transport = getattr(writer_or_transport, "transport", writer_or_transport)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def flood(writer: asyncio.StreamWriter) -> None:
    for chunk in random_chunks():
        writer.write(chunk)
        await writer.drain()
        # drain() yields only above the write buffer's high-water mark: let
        # the fake's other connections (the next case's handshake) run too,
        # or on a loaded machine the flood of one starves the next past the
        # harness's deadline and the fake looks silent, not flooding.
        await asyncio.sleep(0)


async def trickle(
    writer: asyncio.StreamWriter, data: bytes | None = None, interval: float = TRICKLE_INTERVAL
) -> None:
    """One byte every ``interval`` seconds, forever (of ``data`` repeated, or random)."""
    source = data or RANDOM_BLOCK
    index = 0
    while True:
        writer.write(source[index % len(source) : index % len(source) + 1])
        await writer.drain()
        index += 1
        await asyncio.sleep(interval)


async def discard_input(reader: asyncio.StreamReader) -> None:
    """Read and drop what the harness sends, so its writes never block."""
    try:
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


# ---------------------------------------------------------------- SSB


class SsbSession:
    """The fake's side of a valid SSB connection: handshake as server, then
    box stream and RPC decoding of what the harness sends."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keypair: Keypair
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.keypair = keypair
        self.encoder: BoxStreamEncoder | None = None
        self.decoder: BoxStreamDecoder | None = None
        self.rpc = RpcDecoder()
        self.pending: list[RpcMessage] = []
        self.params: shs.BoxStreamParams | None = None

    async def handshake(self) -> bool:
        """The server side of the secret handshake; False if the harness's
        messages do not verify (then the fake hangs up, as the spec says)."""
        hs = shs.ServerHandshake(MAIN_NETWORK_KEY, self.keypair)
        try:
            for size in (shs.HELLO_SIZE, shs.CLIENT_AUTH_SIZE):
                reply = hs.receive_data(await self.reader.readexactly(size))
                self.writer.write(reply)
                await self.writer.drain()
        except (shs.HandshakeError, asyncio.IncompleteReadError):
            return False
        self.params = hs.result
        self.encoder = BoxStreamEncoder(self.params.encrypt_key, self.params.encrypt_nonce)
        self.decoder = BoxStreamDecoder(self.params.decrypt_key, self.params.decrypt_nonce)
        return True

    async def next_request(self) -> RpcMessage | None:
        """The harness's next RPC message (None when it closes or breaks the stream)."""
        assert self.decoder is not None
        while not self.pending:
            if self.decoder.ended or self.rpc.ended:
                return None
            data = await self.reader.read(65536)
            if not data:
                return None
            try:
                for body in self.decoder.receive_data(data):
                    self.pending.extend(self.rpc.receive_data(body))
            except Exception:  # the harness forging bad boxes on purpose
                return None
        return self.pending.pop(0)

    async def send_rpc(self, data: bytes) -> None:
        assert self.encoder is not None
        self.writer.write(self.encoder.encode(data))
        await self.writer.drain()


async def ssb_connection(
    behaviour: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keypair: Keypair
) -> None:
    if behaviour == "flood":
        asyncio.ensure_future(discard_input(reader))
        await flood(writer)
        return
    if behaviour == "slowloris":
        asyncio.ensure_future(discard_input(reader))
        await trickle(writer)
        return
    session = SsbSession(reader, writer, keypair)
    if not await session.handshake():
        if behaviour == "flood-on-error":
            asyncio.ensure_future(discard_input(reader))
            await flood(writer)
        return
    if behaviour == "flood-on-error":
        # Valid input gets valid answers: every request ends at once (an
        # empty stream; an error for an async call).
        while (request := await session.next_request()) is not None:
            if request.req <= 0 or request.end:
                continue  # the harness ending its side of a stream: nothing to answer
            body: Any = (
                True
                if request.stream
                else {"name": "Error", "message": "no such procedure", "stack": ""}
            )
            await session.send_rpc(
                RpcMessage.from_json(-request.req, body, stream=request.stream, end=True).encode()
            )
        return
    request = await session.next_request()
    if request is None:
        return
    assert session.params is not None and session.encoder is not None
    if behaviour == "reset-mid-frame":
        # The first 20 of the 34 header bytes of a valid box, then RST.
        box = session.encoder.encode(
            RpcMessage.from_json(-request.req, True, stream=True, end=True).encode()
        )
        writer.write(box[:20])
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)
        return
    if behaviour == "huge-rpc-length":
        # A valid box whose RPC header declares 0xFFFFFFFF body bytes.
        header = encode_header(0x0A, 0xFFFFFFFF, -request.req)
        await session.send_rpc(header + b'{"never":"ends"')
    elif behaviour == "huge-box-length":
        # An authentic box header declaring 65535 body bytes (the bound is 4096).
        header, body = boxstream.seal_box(
            session.params.encrypt_key, session.encoder.nonce, bytes(65535)
        )
        writer.write(header + body[:1024])
        await writer.drain()
    elif behaviour == "endless-stream":
        # Every request gets a stream of valid, signed messages that never ends.
        sequence, previous = 0, None
        while True:
            sequence += 1
            message = create_message(
                keypair,
                previous,
                sequence,
                1_700_000_000_000 + sequence,
                {"type": "post", "text": f"message {sequence} of a stream that never ends"},
            )
            previous = message_id(message)
            await session.send_rpc(
                RpcMessage.from_json(-request.req, message, stream=True).encode()
            )
    elif behaviour == "valid-then-garbage":
        # A valid answer (the end of the request, as an error), then random bytes.
        await session.send_rpc(
            RpcMessage.from_json(
                -request.req,
                {"name": "Error", "message": "not here", "stack": ""},
                stream=request.stream,
                end=True,
            ).encode()
        )
        writer.write(RANDOM_BLOCK[:4096])
        await writer.drain()
    await discard_input(reader)


async def serve_ssb(behaviour: str, host: str, port: int, key_file: str | None = None) -> None:
    keypair = Keypair.generate()
    if key_file:
        # Handed to the harness as the secret_key credential: with the
        # "publish" capability, the cases that publish first run too, and
        # meet the same misbehaviour on their publish call.
        keypair.save(key_file)

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await ssb_connection(behaviour, reader, writer, keypair)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(on_connect, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"HOSTILE_READY port={bound} id={keypair.feed_id}", flush=True)
    async with server:
        await server.serve_forever()


# ---------------------------------------------------------------- BTP


def ws_frame(payload: bytes, opcode: int = 0x2, declared: int | None = None) -> bytes:
    """A server-to-client WebSocket frame (FIN set, unmasked); ``declared``
    overrides the payload length the header states."""
    length = len(payload) if declared is None else declared
    if length < 126:
        head = bytes([0x80 | opcode, length])
    elif length < 1 << 16:
        head = bytes([0x80 | opcode, 126]) + length.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 127]) + length.to_bytes(8, "big")
    return head + payload


def request_id_of(message: Any) -> int:
    if isinstance(message, bytes) and len(message) >= 5:
        return int.from_bytes(message[1:5], "big")
    return 0


async def btp_connection(behaviour: str, ws: Any, token: bytes) -> None:
    transport = ws.transport

    async def write(data: bytes) -> None:
        # Once the harness has closed the connection, writes are discarded
        # and the buffer stays empty: without this stop a flood would spin
        # without ever yielding and starve the target's other connections,
        # so the next case would meet a refused upgrade, not the flood.
        if transport.is_closing():
            raise ConnectionResetError("the harness closed the connection")
        transport.write(data)
        await asyncio.sleep(0)
        while transport.get_write_buffer_size() > 1 << 20:
            await asyncio.sleep(0.001)

    if behaviour == "flood":
        # Valid frames, random payloads, as fast as the socket takes them.
        for chunk in random_chunks(16384):
            await write(ws_frame(chunk))
        return
    if behaviour == "slowloris":
        # A valid Response frame, one byte a second.
        frame = ws_frame(encode_packet(Response(1)))
        index = 0
        while True:
            await write(frame[index % len(frame) : index % len(frame) + 1])
            index += 1
            await asyncio.sleep(TRICKLE_INTERVAL)
    if behaviour == "flood-on-error":
        # Valid auth gets a Response and every later request one too; any
        # other first packet gets an Error, then a flood of big messages.
        authenticated = False
        while True:
            message = await ws.recv()
            request_id = request_id_of(message)
            try:
                packet = decode_packet(message)
                valid_auth = (
                    not authenticated
                    and packet.protocol_data[0].name == "auth"
                    and any(
                        e.name == "auth_token" and e.data == token for e in packet.protocol_data
                    )
                )
            except Exception:
                valid_auth = False
            if authenticated or valid_auth:
                authenticated = True
                await write(ws_frame(encode_packet(Response(request_id))))
                continue
            await write(
                ws_frame(encode_packet(Error(request_id, "F00", "NotAcceptedError", TRIGGERED_AT)))
            )
            for chunk in random_chunks(FLOOD_MESSAGE_SIZE):
                await write(ws_frame(chunk))
    first = await ws.recv()
    request_id = request_id_of(first)
    if behaviour == "reset-mid-frame":
        frame = ws_frame(encode_packet(Response(request_id)))
        await write(frame[: len(frame) // 2])
        await asyncio.sleep(0.05)
        reset(transport)
        return
    if behaviour == "huge-frame":
        # A binary frame declaring 2^32 payload bytes, then a little of it.
        await write(ws_frame(b"\x01" * 1024, declared=1 << 32))
    elif behaviour == "huge-oer-length":
        # A Response whose OER envelope length prefix says 0xFFFFFFFF bytes follow.
        await write(
            ws_frame(
                bytes([1]) + request_id.to_bytes(4, "big") + b"\x84\xff\xff\xff\xff" + b"\x00" * 16
            )
        )
    elif behaviour == "endless-stream":
        await write(ws_frame(encode_packet(Response(request_id))))
        sequence = 0
        while True:
            sequence += 1
            packet = Message(
                sequence,
                (
                    ProtocolDataEntry(
                        "endless", ContentType.TEXT_PLAIN_UTF8, f"message {sequence}".encode()
                    ),
                ),
            )
            await write(ws_frame(encode_packet(packet)))
            await asyncio.sleep(0)
    elif behaviour == "valid-then-garbage":
        await write(ws_frame(encode_packet(Response(request_id))))
        await write(ws_frame(RANDOM_BLOCK[:512]))
    elif behaviour == "huge-message":
        # One whole 100 MiB binary message, written as a node busy sending
        # it would: reading paused (a close frame from the harness goes
        # unread, so only a harness that drops the connection stops it).
        # The bytes written are printed: the harness's share of them is
        # bounded by what it read plus the loopback's socket buffers.
        transport.pause_reading()
        written, message = 0, ws_frame(b"", declared=HUGE_MESSAGE_SIZE)
        try:
            await write(message)
            written = len(message)
            for chunk in random_chunks():
                piece = chunk[: HUGE_MESSAGE_SIZE + len(message) - written]
                if not piece:
                    break
                await write(piece)
                written += len(piece)
        finally:
            print(
                f"HOSTILE_WROTE {written} of {HUGE_MESSAGE_SIZE + len(message)} bytes", flush=True
            )
        await ws.wait_closed()  # stays connected, reading nothing, until the harness hangs up
        return
    # Stay connected, answering nothing more.
    while True:
        await ws.recv()


async def serve_btp(behaviour: str, host: str, port: int, token: bytes = b"") -> None:
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    async def handler(ws: Any) -> None:
        try:
            await btp_connection(behaviour, ws, token)
        except (ConnectionClosed, ConnectionError, OSError):
            pass

    async with serve(
        handler, host, port, ping_interval=None, compression=None, max_size=1 << 20
    ) as server:
        bound = next(iter(server.sockets)).getsockname()[1]
        print(f"HOSTILE_READY port={bound} url=ws://{host}:{bound}/", flush=True)
        await server.serve_forever()


# ---------------------------------------------------------------- STOMP


async def serve_stomp(
    behaviour: str, host: str, port: int, cert_file: str, key_file: str, ca_file: str
) -> None:
    from reference_impl.stomp.tls import server_context

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Reached only once the TLS 1.3 handshake is done with a trusted client certificate.
        asyncio.ensure_future(discard_input(reader))
        try:
            if behaviour == "flood":
                # (A TLS transport the harness closed takes writes without
                # raising: stop on is_closing, or the loop spins and starves
                # the next connection's handshake.)
                for chunk in random_chunks():
                    if writer.transport.is_closing() or reader.at_eof():
                        break
                    writer.write(chunk)
                    await writer.drain()
                    await asyncio.sleep(0)  # fair to the next connection (see flood)
            else:
                await trickle(writer, STOMP_CONNECTED, DRIP_INTERVAL)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(
        on_connect, host, port, ssl=server_context(cert_file, key_file, ca_file)
    )
    print(f"HOSTILE_READY port={server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


SERVERS: dict[str, tuple[tuple[str, ...], Callable[..., Awaitable[None]]]] = {
    "ssb": (SSB_BEHAVIOURS, serve_ssb),
    "btp": (BTP_BEHAVIOURS, serve_btp),
    "stomp": (STOMP_BEHAVIOURS, serve_stomp),
}


def targets_toml(protocol: str, behaviours: tuple[str, ...] | list[str] | None = None) -> str:
    """A targets file with one target per behaviour, named ``hostile-<protocol>-<behaviour>``,
    each launched by the harness as a process of this module."""
    known, _ = SERVERS[protocol]
    parts = []
    for behaviour in behaviours or known:
        name = f"hostile-{protocol}-{behaviour}"
        outputs = {
            "ssb": '{ public_key = "id", port = "port" }',
            "btp": '{ url = "url", port = "port" }',
            "stomp": '{ port = "port" }',
        }[protocol]
        extra = token = ""
        if protocol == "ssb":
            token = " --key-file {workdir}/hostile-secret"
            extra = (
                f'capabilities = ["publish"]\n'
                f'[targets.{name}.credentials]\nsecret_key_file = "{{workdir}}/hostile-secret"\n'
            )
        if protocol == "btp":
            token = " --auth-token-file {auth_token_file}"
            extra = (
                f"[targets.{name}.params]\nauth_timeout = 1\n"
                f'[targets.{name}.credentials]\nauth_token_generate = "hex16"\n'
            )
        if protocol == "stomp":
            # The run's PKI (made by the STOMP suite's prepare()).
            token = " --cert {server_cert_file} --key {server_key_file} --ca {ca_file}"
        parts.append(f"""
[targets.{name}]
implementation = "hostile-{protocol}-{behaviour}"
version = "test"
protocol = "{protocol}"
roles = ["server"]
host = "127.0.0.1"
port = 0
{extra}[targets.{name}.launch]
server = "{{python}} -m tests.hostile.fake_targets {protocol} {behaviour} --host {{host}} --port 0{token}"
ready = "HOSTILE_READY"
ready_timeout = 30
outputs = {outputs}
cwd = "{{repo}}"
""")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", choices=sorted(SERVERS))
    parser.add_argument("behaviour")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--auth-token-file", help="BTP: the token a valid auth carries")
    parser.add_argument(
        "--key-file", help="SSB: write the node's secret key here (ssb-keys format)"
    )
    parser.add_argument("--cert", help="STOMP: the server's certificate (PEM)")
    parser.add_argument("--key", help="STOMP: the server's private key (PEM)")
    parser.add_argument("--ca", help="STOMP: the CA client certificates must chain to")
    args = parser.parse_args(argv)
    behaviours, serve = SERVERS[args.protocol]
    if args.behaviour not in behaviours:
        parser.error(f"{args.protocol} behaviours: {', '.join(behaviours)}")
    extra: tuple[Any, ...] = (args.key_file,) if args.protocol == "ssb" else ()
    if args.protocol == "btp":
        with open(args.auth_token_file, "rb") as handle:
            extra = (handle.read().rstrip(b"\r\n"),)
    if args.protocol == "stomp":
        extra = (args.cert, args.key, args.ca)
    try:
        asyncio.run(serve(args.behaviour, args.host, args.port, *extra))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
