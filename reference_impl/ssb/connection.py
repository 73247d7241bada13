"""One SSB connection, sans-I/O: secret handshake, then box stream, then RPC.

:class:`SsbConnection` stacks the three cores of this package (shs.py,
boxstream.py, rpc.py) into what a peer runs over one TCP connection, for
either role. It reads no sockets and no clock: feed it received bytes with
:meth:`SsbConnection.receive_data`, act on the events it returns, and write
whatever :meth:`SsbConnection.data_to_send` returns. The asyncio node in
node.py and the conformance suites both drive it.

Failure policy: once the handshake or the box stream rejects the peer's data,
or RPC framing is lost, the connection is dead and writes nothing more. For
the handshake this is what the guide requires (a server must hang up on an
invalid message without answering, so it reveals nothing to a client that
does not know the network key and the server's identity); after a box stream
or framing error nothing the peer sends can be trusted, so answering would
only help an attacker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Union

from .boxstream import BoxStreamDecoder, BoxStreamEncoder, BoxStreamError
from ..faults import FaultPoints
from .faults import SPECS as FAULT_SPECS
from .faults import Fault
from .keys import Keypair, public_to_feed_id
from .rpc import (
    DEFAULT_MAX_BODY,
    AsyncError,
    Goodbye,
    ProtocolViolation,
    Request,
    Response,
    RpcEndpoint,
    RpcError,
    StreamData,
    StreamEnd,
)
from .shs import ClientHandshake, HandshakeError, ServerHandshake

__all__ = [
    "AsyncError",
    "Closed",
    "ConnectionEvent",
    "ConnectionState",
    "Goodbye",
    "HandshakeComplete",
    "ProtocolViolation",
    "Request",
    "Response",
    "SsbConnection",
    "StreamData",
    "StreamEnd",
]


@dataclass(frozen=True)
class HandshakeComplete:
    """The handshake succeeded; ``peer_public`` is the peer's authenticated key."""

    peer_public: bytes

    @property
    def peer_id(self) -> str:
        return public_to_feed_id(self.peer_public)


@dataclass(frozen=True)
class Closed:
    """No more events will come from this connection.

    ``failed`` is False only for an orderly end: the peer's box stream
    goodbye, or the peer hanging up after its RPC goodbye. ``stage`` says where it ended: "handshake", "box stream" or
    "rpc" for data that was rejected, "transport" when the peer closed the
    connection (see :meth:`SsbConnection.receive_eof`), "goodbye" for the
    box stream goodbye. ``reason`` is a one-line description for logs.
    """

    reason: str
    failed: bool
    stage: str


ConnectionEvent = Union[
    HandshakeComplete,
    Closed,
    Request,
    Response,
    AsyncError,
    StreamData,
    StreamEnd,
    Goodbye,
    ProtocolViolation,
]


class ConnectionState(Enum):
    HANDSHAKE = "handshake"
    OPEN = "open"
    CLOSED = "closed"


class SsbConnection:
    """Handshake, box stream and RPC for one connection. Build with
    :meth:`client` or :meth:`server`.

    Outgoing RPC bytes are collected and boxed when :meth:`data_to_send` is
    called, so several RPC messages share boxes and a large one is split into
    boxes of at most 4096 bytes (RPC messages need not align with boxes).
    """

    def __init__(
        self,
        handshake: ClientHandshake | ServerHandshake,
        *,
        max_rpc_body: int = DEFAULT_MAX_BODY,
        faults: Iterable[Fault | str] = (),
    ) -> None:
        self._handshake = handshake
        self._max_rpc_body = max_rpc_body
        # Rules broken on purpose (faults.py), applied at this layer's fault
        # points and handed to the box stream and RPC layers.
        self._points = FaultPoints(FAULT_SPECS, frozenset(faults))
        self._state = ConnectionState.HANDSHAKE
        self._encoder: BoxStreamEncoder | None = None
        self._decoder: BoxStreamDecoder | None = None
        self._rpc: RpcEndpoint | None = None
        self._peer_public: bytes | None = None
        # Handshake messages and finished boxes, ready for the wire.
        self._outgoing = bytearray()
        # RPC bytes not yet boxed; boxed by data_to_send() or close().
        self._rpc_plaintext = bytearray()
        self._failed = False
        self._closing = False
        if isinstance(handshake, ClientHandshake):
            self._outgoing += handshake.data_to_send()

    @classmethod
    def client(
        cls,
        network_key: bytes,
        keypair: Keypair,
        server_public: bytes,
        *,
        ephemeral_secret: bytes | None = None,
        max_rpc_body: int = DEFAULT_MAX_BODY,
        faults: Iterable[Fault | str] = (),
    ) -> SsbConnection:
        """The dialling side. Its first :meth:`data_to_send` is the client hello."""
        faults = frozenset(faults)
        return cls(
            ClientHandshake(network_key, keypair, server_public, ephemeral_secret, faults=faults),
            max_rpc_body=max_rpc_body,
            faults=faults,
        )

    @classmethod
    def server(
        cls,
        network_key: bytes,
        keypair: Keypair,
        authorize: Callable[[bytes], bool] | None = None,
        *,
        ephemeral_secret: bytes | None = None,
        max_rpc_body: int = DEFAULT_MAX_BODY,
        faults: Iterable[Fault | str] = (),
    ) -> SsbConnection:
        """The accepting side. ``authorize`` sees the client's public key after
        msg3 and may refuse it."""
        faults = frozenset(faults)
        return cls(
            ServerHandshake(network_key, keypair, ephemeral_secret, authorize, faults=faults),
            max_rpc_body=max_rpc_body,
            faults=faults,
        )

    # --- state

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def is_open(self) -> bool:
        """Whether RPC can be sent: handshake done, no failure, no close()."""
        return self._state is ConnectionState.OPEN and not self._closing

    @property
    def failed(self) -> bool:
        """Whether the connection died of bad data (it then writes nothing)."""
        return self._failed

    @property
    def closing(self) -> bool:
        """Whether close() has been called (our goodbyes are queued or sent)."""
        return self._closing

    @property
    def peer_public(self) -> bytes | None:
        """The peer's authenticated long-term key, once the handshake is done."""
        return self._peer_public

    @property
    def handshake(self) -> ClientHandshake | ServerHandshake:
        """The handshake machine, e.g. for its transcript."""
        return self._handshake

    @property
    def rpc(self) -> RpcEndpoint:
        """The RPC endpoint, for introspection (open requests, goodbye flags).
        Send through the methods of this class so the bytes get boxed."""
        if self._rpc is None:
            raise RuntimeError("the handshake is not complete")
        return self._rpc

    # --- receiving

    def receive_data(self, data: bytes) -> list[ConnectionEvent]:
        """Consume bytes from the peer; return what happened, in order.

        Ignores data once the connection has produced :class:`Closed`.
        """
        if self._state is ConnectionState.CLOSED:
            return []
        events: list[ConnectionEvent] = []
        if self._state is ConnectionState.HANDSHAKE:
            data = self._receive_handshake(data, events)
            if self._state is not ConnectionState.OPEN:
                return events
        if data:
            self._receive_boxes(data, events)
        return events

    def receive_eof(self) -> list[ConnectionEvent]:
        """The peer closed the connection. Returns [Closed] unless the
        connection had already closed.

        An end without the box stream goodbye counts as a failure: the
        goodbye exists so that a receiver can tell a finished conversation
        from a connection cut by someone in the middle.
        """
        if self._state is ConnectionState.CLOSED:
            return []
        if self._state is ConnectionState.HANDSHAKE:
            return [self._fail("transport", "connection closed during the handshake")]
        assert self._rpc is not None
        try:
            self._rpc.end_of_data()
        except RpcError as exc:
            return [self._fail("rpc", f"connection closed mid-packet: {exc}")]
        if self._rpc.goodbye_received:
            # The RPC goodbye came through the box stream, so it is just as
            # authentic; JS peers hang up right after it.
            self._state = ConnectionState.CLOSED
            return [
                Closed(
                    "peer closed the connection after its RPC goodbye",
                    failed=False,
                    stage="transport",
                )
            ]
        return [self._fail("transport", "connection closed without a box stream goodbye")]

    def _receive_handshake(self, data: bytes, events: list[ConnectionEvent]) -> bytes:
        """Feed the handshake; on success set up the streams and return the
        bytes that followed it (box stream data)."""
        try:
            reply = self._handshake.receive_data(data)
        except HandshakeError as exc:
            events.append(self._fail("handshake", f"{exc.step}: {exc.reason}"))
            return b""
        self._outgoing += reply
        if not self._handshake.complete:
            return b""
        params = self._handshake.result
        faults = self._points.active
        self._encoder = BoxStreamEncoder(params.encrypt_key, params.encrypt_nonce, faults=faults)
        self._decoder = BoxStreamDecoder(params.decrypt_key, params.decrypt_nonce, faults=faults)
        self._rpc = RpcEndpoint(self._max_rpc_body, faults=faults)
        self._peer_public = params.peer_public
        self._state = ConnectionState.OPEN
        events.append(HandshakeComplete(params.peer_public))
        return self._handshake.trailing_data

    def _receive_boxes(self, data: bytes, events: list[ConnectionEvent]) -> None:
        assert self._decoder is not None
        try:
            bodies = self._decoder.receive_data(data)
            box_error = None
        except BoxStreamError as exc:
            # The bodies before the bad box are authentic: deliver them first.
            bodies, box_error = exc.bodies, exc
        for body in bodies:
            if not self._receive_rpc(body, events):
                return
        if box_error is not None:
            events.append(self._fail("box stream", box_error.reason))
        elif self._decoder.ended:
            self._state = ConnectionState.CLOSED
            events.append(Closed("peer sent the box stream goodbye", failed=False, stage="goodbye"))

    def _receive_rpc(self, body: bytes, events: list[ConnectionEvent]) -> bool:
        """Decode one box body as RPC; False if framing broke (connection failed)."""
        assert self._rpc is not None
        try:
            events.extend(self._rpc.receive_data(body))
        except RpcError as exc:
            events.append(self._fail("rpc", str(exc)))
            return False
        # Automatic replies (our end of a stream the peer ended) must go out.
        self._rpc_plaintext += self._rpc.data_to_send()
        return True

    def _fail(self, stage: str, reason: str) -> Closed:
        self._failed = True
        self._state = ConnectionState.CLOSED
        self._outgoing.clear()
        self._rpc_plaintext.clear()
        return Closed(reason, failed=True, stage=stage)

    # --- sending

    def data_to_send(self) -> bytes:
        """All bytes to write now (handshake messages or boxes); clears them.
        Always b"" after a failure."""
        if self._failed:
            return b""
        self._box_pending_rpc()
        data = bytes(self._outgoing)
        self._outgoing.clear()
        return data

    def _box_pending_rpc(self) -> None:
        if self._rpc_plaintext and self._encoder is not None and not self._encoder.ended:
            self._outgoing += self._encoder.encode(bytes(self._rpc_plaintext))
        self._rpc_plaintext.clear()

    def _endpoint_for_sending(self) -> RpcEndpoint:
        if self._failed:
            raise RuntimeError("the connection has failed; nothing more may be sent")
        if self._closing:
            raise RuntimeError("the connection is closing; nothing more may be sent")
        if self._rpc is None:
            raise RuntimeError("the handshake is not complete")
        return self._rpc

    def request(self, name: list[str], args: list, type: str = "async") -> int:
        """Call a procedure on the peer; returns our request number."""
        req, data = self._endpoint_for_sending().request(name, args, type)
        self._rpc_plaintext += data
        return req

    def respond(self, req: int, value: Any) -> None:
        """The one successful reply to the peer's async request ``req``."""
        self._rpc_plaintext += self._endpoint_for_sending().respond(req, value)

    def respond_error(self, req: int, name: str, message: str) -> None:
        """Fail the peer's request ``req``: an error reply for async, an error
        end for a stream."""
        self._rpc_plaintext += self._endpoint_for_sending().respond_error(req, name, message)

    def stream_send(self, req: int, value: Any) -> None:
        """Data on the peer's source or duplex request ``req``."""
        self._rpc_plaintext += self._endpoint_for_sending().stream_send(req, value)

    def stream_end(self, req: int, error: Any = None) -> None:
        """End our side of the peer's stream request ``req`` (with ``error``
        as the body if given, else ``true``)."""
        self._rpc_plaintext += self._endpoint_for_sending().stream_end(req, error)

    def duplex_send(self, req: int, value: Any) -> None:
        """Data from us on our own sink or duplex request ``req``."""
        self._rpc_plaintext += self._endpoint_for_sending().duplex_send(req, value)

    def stream_close(self, req: int) -> None:
        """End our side of our own stream request ``req`` (abort it)."""
        self._rpc_plaintext += self._endpoint_for_sending().stream_close(req)

    def close(self) -> None:
        """Queue the RPC goodbye, then the box stream goodbye; send nothing after.

        Before the handshake completes there is nothing to say goodbye on,
        so this only stops the connection from sending. Calling it again, or
        after a failure, does nothing.
        """
        if self._closing or self._failed:
            return
        self._closing = True
        if self._rpc is None or self._encoder is None:
            return
        if not self._rpc.goodbye_sent:
            self._rpc_plaintext += self._rpc.goodbye()
        self._box_pending_rpc()
        self._outgoing += self._points.apply("box-stream-goodbye", self._encoder.goodbye())
