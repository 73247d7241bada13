"""Reproduces docs/findings/stomp.py-9.0.md, finding 2: over TLS, stomp.py
9.0 never reports a connection the server closed.

    .venv/bin/python interop/stomp/stomppy_disconnect_repro.py {close,abort}[-then-send]

A TLS STOMP server on loopback (the run's test PKI) answers the client's
STOMP frame with CONNECTED, then after 0.5 s closes the connection (close:
TLS close_notify and FIN; abort: the socket dropped). The script prints the
listener callbacks stomp.py made and the CPU time the process used in the
4 s after the close. Observed with stomp.py 9.0.0, Python 3.11: no
on_disconnected in either mode; with abort the I/O thread spins (a third
to two thirds of a core in our runs).

With ``-then-send`` the client also sends one SEND 1 s after CONNECTED,
0.5 s after the close: the write fails (``SSLEOFError`` or a reset), which
stomp.py's I/O loop catches, logs and follows with a cleanup that puts the
transport back in blocking mode, and the next read then ends the loop with
``on_disconnected``. That is when stomp.py notices a drop: only if it
writes after it (docs/findings/stomp.py-9.0.md, finding 2).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import stomp  # noqa: E402

from conformance.core.pki import harness_server_context, run_pki  # noqa: E402


def client(port: int, events: list, pki, send_after: float | None) -> None:
    class Listener(stomp.ConnectionListener):
        def on_connected(self, frame) -> None:
            events.append(("on_connected", time.monotonic()))

        def on_disconnected(self) -> None:
            events.append(("on_disconnected", time.monotonic()))

    conn = stomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0), reconnect_attempts_max=1)
    conn.set_ssl(
        for_hosts=[("127.0.0.1", port)],
        cert_file=str(pki.client_cert_file),
        key_file=str(pki.client_key_file),
        ca_certs=str(pki.ca_file),
    )
    conn.set_listener("repro", Listener())
    conn.connect(wait=True)
    if send_after is not None:
        time.sleep(send_after)
        events.append(("SEND written", time.monotonic()))
        conn.send("/queue/repro", "{}", receipt="repro-0")


async def main(mode: str) -> None:
    pki = run_pki()
    closed = asyncio.Event()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.wait_for(reader.readuntil(b"\x00"), 10)
        writer.write(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00")
        await writer.drain()
        await asyncio.sleep(0.5)
        if mode.startswith("abort"):
            writer.transport.abort()
        else:
            writer.close()
        closed.set()

    server = await asyncio.start_server(
        on_client, "127.0.0.1", 0, ssl=harness_server_context(pki, cert="loopback-server")
    )
    port = server.sockets[0].getsockname()[1]
    events: list = []
    send_after = 1.0 if mode.endswith("-then-send") else None
    threading.Thread(target=client, args=(port, events, pki, send_after), daemon=True).start()
    await asyncio.wait_for(closed.wait(), 10)
    at, cpu = time.monotonic(), time.process_time()
    await asyncio.sleep(4)
    print(
        f"{mode}: callbacks {[(name, round(t - at, 2)) for name, t in events]} (seconds after the close); "
        f"CPU used in the 4 s after the close: {time.process_time() - cpu:.2f} s"
    )
    server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "close"))
