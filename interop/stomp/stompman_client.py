"""Launch adapter: stompman (PyPI, asyncio) as a Swaptacular STOMP client
target (docs/stomp-adapter.md, "Client targets"; client_contract.py).

stompman does TLS, CONNECT, framing, reconnecting and receipts:
``Client.send(..., receipt_timeout=...)`` returns once the RECEIPT for that
SEND arrived and raises ``SendReceiptError`` when the connection was lost,
the server sent ERROR, or the time ran out. The adapter sends the messages
in order, prints ``DELIVERED=<n>`` when a send returns, and sends a message
again after a SendReceiptError (stompman has reconnected by then, or does
so on the next send).

Two things stompman does not let an application choose, bridged here:

- ``ConnectionParameters.host`` is both the address dialled and the CONNECT
  ``host`` header (``connect_headers`` cannot override it). The manifest's
  host (``/${NODE_ID}``-like virtual hosts) is no address, so the adapter
  gives stompman the manifest host and a connection class that dials the
  manifest's server instead (docs/findings/stompman-3.16.md).
- ``login`` and ``passcode`` are required strings and always sent; with no
  login or passcode in the manifest the adapter passes empty strings.

TLS is an ``ssl.SSLContext`` the adapter builds as the profile asks (TLS 1.3
minimum, chain verified against --ca, no hostname check, our certificate).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stompman  # noqa: E402
from stompman.connection import Connection  # noqa: E402
from stompman.errors import (
    FailedAllConnectAttemptsError,
    FailedAllWriteAttemptsError,
    SendReceiptError,
)  # noqa: E402
from stompman.frames import ErrorFrame  # noqa: E402

from client_contract import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Plan,
    UsageError,  # noqa: E402
    delivered,
    done,
    error_frame,
    log,
    parse_args,
)

RECEIPT_TIMEOUT = 10.0
"""Seconds stompman waits for one RECEIPT before the adapter sends again."""
MAX_TRIES = 6
"""Sends of one message in a row that fail before the adapter gives up."""


def tls_context(plan: Plan) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=plan.ca)
    context.load_cert_chain(plan.cert, plan.key)
    return context


def dialing(address: tuple[str, int]) -> type[Connection]:
    """A stompman connection class that dials ``address`` whatever host the
    connection parameters name (they name the CONNECT host header), and
    reports every ERROR frame it reads (ERROR_FRAME): stompman keeps an
    ERROR answering CONNECT among the issues of a connect attempt, which a
    --timeout that runs out first never shows."""

    class Dialing(Connection):
        @classmethod
        async def connect(cls, *, host: str, port: int, **kwargs):  # type: ignore[override]
            return await super(Dialing, cls).connect(host=address[0], port=address[1], **kwargs)

        async def read_frames(self):  # type: ignore[override]
            async for frame in super().read_frames():
                if isinstance(frame, ErrorFrame):
                    error_frame(frame.headers, frame.body)
                yield frame

    return Dialing


async def run(plan: Plan) -> int:
    end = time.monotonic() + plan.timeout
    address = plan.choose_server()
    client = stompman.Client(
        [
            stompman.ConnectionParameters(
                host=plan.host,
                port=address[1],
                login=plan.login or "",
                passcode=plan.passcode or "",
            )
        ],
        ssl=tls_context(plan),
        heartbeat=stompman.Heartbeat(0, 0),
        connection_class=dialing(address),
        # ERROR frames are reported as they are read (dialing()).
        connect_retry_attempts=MAX_TRIES,
        connect_retry_interval=1,
        on_error_frame=lambda frame: None,
    )
    count = 0
    try:
        async with asyncio.timeout(plan.timeout):
            async with client:
                for index, message in enumerate(plan.messages):
                    for attempt in range(1, MAX_TRIES + 1):
                        try:
                            await client.send(
                                message.body,
                                plan.destination,
                                content_type="application/json",
                                headers={"type": message.type, "persistent": "true"},
                                receipt_timeout=min(
                                    RECEIPT_TIMEOUT, max(end - time.monotonic(), 0.1)
                                ),
                            )
                        except SendReceiptError as exc:
                            log(f"message {index}: no RECEIPT ({exc.reason}), attempt {attempt}")
                            continue
                        delivered(index)
                        count += 1
                        break
                    else:
                        log(f"error: message {index} not receipted after {MAX_TRIES} sends")
                        return EXIT_FAILED
    except TimeoutError:
        log(
            f"error: {len(plan.messages) - count} message(s) not receipted after {plan.timeout:g} s"
        )
        return EXIT_TIMEOUT
    except (FailedAllConnectAttemptsError, FailedAllWriteAttemptsError) as exc:
        log(f"error: {exc!r}")
        return EXIT_FAILED
    finally:
        done(count)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        plan = parse_args(
            argv, "stompman_client.py", "stompman as a Swaptacular STOMP client target"
        )
    except UsageError as exc:
        log(f"error: {exc}")
        return EXIT_USAGE
    status = asyncio.run(run(plan))
    sys.stdout.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
