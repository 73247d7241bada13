"""The "accepted" adapter of the ActiveMQ STOMP target (docs/stomp-adapter.md).

    activemq_accepted.py read --port ADAPTER_PORT --queue NAME [--host H] [--timeout S]

Prints one JSON object per message held in the queue, in queue (=
acceptance) order: {"destination", "type", "content-type", "receipt",
"body"}; exits 0. The queue is read with a STOMP queue browser (SUBSCRIBE
with ``browser:true``, STOMP 1.1+, ActiveMQ's
``StompQueueBrowserSubscription``) on the broker's loopback-only plain
STOMP connector (scripts/activemq.sh ``--adapter-port``, not the TLS
listener the harness tests): a browser sees the messages without consuming
them, and ActiveMQ ends the browse with a MESSAGE carrying
``browser:end``. The broker caps a browse at the queue policy's
``maxBrowsePageSize`` (400 by default; scripts/activemq.sh sets 200000).

How ActiveMQ 5.17 keeps a STOMP SEND, which is what the fields are read back
from (activemq-stomp, ``FrameTranslator.Helper.copyStandardHeadersFromFrameToMessage``
and ``copyStandardHeadersFromMessageToFrame``): ``destination`` /queue/Q
becomes the queue Q and is given back as /queue/Q; ``type`` becomes the
JMSType and is given back as ``type``; ``receipt`` is dropped (so
``receipt`` is null here); every other header, ``content-type`` among them,
is kept as a message property and given back as a header. A SEND with
``content-length`` is a BytesMessage, given back with its bytes intact.

Exit status: 0 with the listing; 1 when the broker cannot be reached or
answers with an ERROR (nothing printed); 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameError, FrameParser, encode_frame  # noqa: E402

MAX_FRAME_BYTES = 16 << 20


class AdapterError(Exception):
    pass


class Session:
    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.deadline = deadline
        try:
            self.sock = socket.create_connection((host, port), timeout=self._left())
        except OSError as exc:
            raise AdapterError(
                f"cannot connect to the adapter connector {host}:{port}: {exc}"
            ) from None
        self.parser = FrameParser(max_frame_bytes=MAX_FRAME_BYTES)
        self.frames: list[Frame] = []

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise AdapterError("timed out")
        return left

    def send(self, frame: Frame) -> None:
        self.sock.sendall(encode_frame(frame))

    def read(self) -> Frame:
        while not self.frames:
            self.sock.settimeout(self._left())
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise AdapterError("timed out waiting for the broker") from None
            if not data:
                raise AdapterError("the broker closed the connection")
            try:
                self.frames.extend(f for f in self.parser.receive_data(data) if f is not HEARTBEAT)
            except FrameError as exc:
                raise AdapterError(f"unreadable frame from the broker: {exc}") from None
        frame = self.frames.pop(0)
        if frame.command == "ERROR":
            raise AdapterError(
                f"ERROR from the broker: {frame.get('message')!r} {frame.body[:500]!r}"
            )
        return frame

    def close(self) -> None:
        self.sock.close()


def browse(host: str, port: int, queue: str, timeout: float) -> list[dict]:
    session = Session(host, port, time.monotonic() + timeout)
    try:
        session.send(
            Frame("CONNECT", (("accept-version", "1.2"), ("host", "/"), ("heart-beat", "0,0")))
        )
        connected = session.read()
        if connected.command != "CONNECTED":
            raise AdapterError(f"expected CONNECTED, got {connected.command}")
        session.send(
            Frame(
                "SUBSCRIBE",
                (
                    ("id", "accepted"),
                    ("destination", f"/queue/{queue}"),
                    ("ack", "auto"),
                    ("browser", "true"),
                ),
            )
        )
        records = []
        while True:
            frame = session.read()
            if frame.command != "MESSAGE":
                continue
            if frame.get("browser") == "end":
                break
            records.append(
                {
                    "destination": frame.get("destination", ""),
                    "type": frame.get("type", ""),
                    "content-type": frame.get("content-type", ""),
                    "receipt": None,
                    "body": frame.body.decode("utf-8", errors="replace"),
                    "message-id": frame.get("message-id"),
                    "persistent": frame.get("persistent") == "true",
                }
            )
        session.send(Frame("DISCONNECT", (("receipt", "accepted-bye"),)))
        try:
            session.read()
        except AdapterError:
            pass
        return records
    finally:
        session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="activemq_accepted.py", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    read = sub.add_parser("read", help="print the messages held in the queue, one JSON line each")
    read.add_argument(
        "--port", type=int, required=True, help="the broker's plain STOMP adapter port"
    )
    read.add_argument("--host", default="127.0.0.1")
    read.add_argument("--queue", required=True)
    read.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    try:
        records = browse(args.host, args.port, args.queue, args.timeout)
    except AdapterError as exc:
        print(f"activemq_accepted.py: {exc}", file=sys.stderr)
        return 1
    out = sys.stdout
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
