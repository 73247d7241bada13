"""The "accepted" adapter of RabbitMQ STOMP targets (docs/stomp-adapter.md),
and the AMQP set-up scripts/rabbitmq.sh needs.

    amqp_accepted.py read --port AMQP_PORT --queue NAME [--limit N] [--timeout S]
        Prints one JSON object per message held in the queue, in queue
        (= acceptance) order: {"destination", "type", "content-type",
        "receipt", "body"}; exits 0. Reading loses nothing: every message is
        fetched unacknowledged (basic.get, manual ack) and all are handed back
        with one basic.nack(multiple, requeue), which puts them back in their
        original positions; a crash of this process has the same effect,
        since the broker requeues a closed channel's unacked messages.
    amqp_accepted.py declare --port AMQP_PORT --exchange NAME --queue NAME [--timeout S]
        Declares the durable topic exchange and the durable queue bound to
        it with "#", so every SEND to /exchange/NAME/<key> is kept.

How RabbitMQ's STOMP plugin (3.10) maps a SEND onto an AMQP message, which
is what the fields are read back from: destination /exchange/X/K becomes
exchange X and routing key K; `content-type` becomes the content_type
property, `type` the type property, `persistent:true` delivery_mode 2; every
other header (`receipt` among them) is copied into the AMQP headers table.
"""

from __future__ import annotations

import argparse
import json
import sys

import pika
import pika.exceptions

# The default exchange is what /queue/Q and /amq/queue/Q publish to.
_DEFAULT_EXCHANGE_PREFIX = "/amq/queue/"


def _connect(port: int, timeout: float) -> pika.BlockingConnection:
    params = pika.ConnectionParameters(
        host="127.0.0.1",
        port=port,
        credentials=pika.PlainCredentials("guest", "guest"),
        socket_timeout=timeout,
        stack_timeout=timeout,
        blocked_connection_timeout=timeout,
        connection_attempts=1,
        heartbeat=0,
    )
    return pika.BlockingConnection(params)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def describe(method: pika.spec.Basic.GetOk, props: pika.BasicProperties, body: bytes) -> dict:
    """One message as the adapter contract's JSON object."""
    headers = props.headers or {}
    if method.exchange:
        # /exchange/X (no key) publishes with the empty routing key.
        destination = f"/exchange/{method.exchange}" + (
            f"/{method.routing_key}" if method.routing_key else ""
        )
    else:
        destination = _DEFAULT_EXCHANGE_PREFIX + method.routing_key
    return {
        "destination": destination,
        "type": _text(props.type),
        "content-type": _text(props.content_type),
        "receipt": _text(headers.get("receipt")),
        "body": body.decode("utf-8", errors="replace"),
    }


def read(port: int, queue: str, limit: int, timeout: float) -> int:
    connection = _connect(port, timeout)
    try:
        channel = connection.channel()
        # passive: reading must never create the queue it reports on.
        channel.queue_declare(queue=queue, passive=True)
        last_tag = None
        count = 0
        while count < limit:
            method, props, body = channel.basic_get(queue=queue, auto_ack=False)
            if method is None:
                break
            last_tag = method.delivery_tag
            count += 1
            sys.stdout.write(json.dumps(describe(method, props, body), ensure_ascii=False) + "\n")
        else:
            print(f"amqp_accepted.py: stopped after --limit {limit} messages", file=sys.stderr)
        if last_tag is not None:
            channel.basic_nack(delivery_tag=last_tag, multiple=True, requeue=True)
        channel.close()
    finally:
        if connection.is_open:
            connection.close()
    sys.stdout.flush()
    return 0


def declare(
    port: int, exchange: str, queue: str, timeout: float, exchange_type: str = "topic"
) -> int:
    connection = _connect(port, timeout)
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange=exchange, exchange_type=exchange_type, durable=True)
        channel.queue_declare(queue=queue, durable=True)
        channel.queue_bind(queue=queue, exchange=exchange, routing_key="#")
        channel.close()
    finally:
        if connection.is_open:
            connection.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("read", help="print the messages held in the queue (the adapter)")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--queue", required=True)
    r.add_argument("--limit", type=int, default=100_000, help="at most this many messages")
    r.add_argument("--timeout", type=float, default=20.0, help="seconds for each AMQP step")
    d = sub.add_parser("declare", help="declare the exchange and the queue that keeps its messages")
    d.add_argument("--port", type=int, required=True)
    d.add_argument("--exchange", required=True)
    d.add_argument(
        "--exchange-type", default="topic", choices=("topic", "direct", "fanout", "headers")
    )
    d.add_argument("--queue", required=True)
    d.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    try:
        if args.command == "read":
            return read(args.port, args.queue, args.limit, args.timeout)
        return declare(args.port, args.exchange, args.queue, args.timeout, args.exchange_type)
    except (pika.exceptions.AMQPError, OSError) as exc:
        print(
            f"amqp_accepted.py: {args.command} on 127.0.0.1:{args.port} failed: {exc!r}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
