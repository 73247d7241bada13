"""Tests of reference_impl.ssb.node and its CLI (python -m reference_impl.ssb).

Nodes run in-process on 127.0.0.1 port 0, or as subprocesses through the CLI.
Every network read has a timeout: READ_TIMEOUT where an answer is expected,
SILENCE where the test checks that nothing comes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from reference_impl.ssb.__main__ import main
from reference_impl.ssb.connection import (
    AsyncError,
    Closed,
    ConnectionEvent,
    Goodbye,
    Request,
    Response,
    SsbConnection,
    StreamData,
    StreamEnd,
)
from reference_impl.ssb.faults import flip_signature_byte
from reference_impl.ssb.feed import message_id, verify_feed
from reference_impl.ssb.keys import Keypair
from reference_impl.ssb.node import (
    Fault,
    ReplicationError,
    SsbNode,
    parse_history_options,
    replicate,
)
from reference_impl.ssb.shs import HELLO_SIZE, hello

NETWORK_KEY = bytes(range(32))
READ_TIMEOUT = 5.0
SILENCE = 0.3
REPO_ROOT = Path(__file__).resolve().parents[2]


# --- helpers ------------------------------------------------------------------------------


class Peer:
    """A test client: an SsbConnection over a TCP connection to a node."""

    def __init__(
        self, conn: SsbConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.conn = conn
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int, server_public: bytes, keypair: Keypair | None = None) -> Peer:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), READ_TIMEOUT
        )
        peer = cls(
            SsbConnection.client(NETWORK_KEY, keypair or Keypair.generate(), server_public),
            reader,
            writer,
        )
        peer.flush()
        while not peer.conn.is_open:
            events = await peer.read()
            assert not any(isinstance(event, Closed) for event in events), events
        return peer

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    async def read(self, timeout: float = READ_TIMEOUT) -> list[ConnectionEvent]:
        data = await asyncio.wait_for(self.reader.read(65536), timeout)
        events = self.conn.receive_data(data) if data else self.conn.receive_eof()
        self.flush()  # automatic replies
        # The node's own createHistoryStream call after the handshake (as
        # real peers make; test_node_own_feed_request.py checks it) is left
        # unanswered and not shown to the cases, which are about its answers.
        return [event for event in events if not isinstance(event, Request)]

    async def until(
        self, done: Callable[[ConnectionEvent], bool], timeout: float = READ_TIMEOUT
    ) -> list[ConnectionEvent]:
        """Events up to and including the first one ``done`` accepts."""
        collected: list[ConnectionEvent] = []
        async with asyncio.timeout(timeout):
            while True:
                for event in await self.read():
                    collected.append(event)
                    if done(event):
                        return collected
                    assert not isinstance(event, Closed), collected

    async def call(self, name: list[str], args: list) -> Response | AsyncError:
        req = self.conn.request(name, args)
        self.flush()
        events = await self.until(lambda e: isinstance(e, (Response, AsyncError)) and e.req == -req)
        return events[-1]

    async def history(self, **options) -> tuple[list, object]:
        """createHistoryStream (not live): the items and the end's error (None if normal)."""
        req = self.conn.request(["createHistoryStream"], [options], "source")
        self.flush()
        events = await self.until(lambda e: isinstance(e, StreamEnd) and e.req == -req)
        items = [
            event.msg.json()
            for event in events
            if isinstance(event, StreamData) and event.req == -req
        ]
        return items, events[-1].error

    async def silent(self) -> list[ConnectionEvent]:
        """Events arriving within SILENCE seconds (expected: none)."""
        try:
            return await self.read(SILENCE)
        except TimeoutError:
            return []

    async def aclose(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), READ_TIMEOUT)
        except OSError:
            pass


StartNode = Callable[..., Awaitable[tuple[SsbNode, int]]]


@pytest.fixture
async def start_node() -> AsyncIterator[StartNode]:
    """Start nodes on 127.0.0.1:0 with ``messages`` posts; all closed afterwards."""
    nodes: list[SsbNode] = []

    async def start(
        messages: int = 3, keypair: Keypair | None = None, **kwargs
    ) -> tuple[SsbNode, int]:
        node = SsbNode(keypair or Keypair.generate(), NETWORK_KEY, **kwargs)
        for number in range(1, messages + 1):
            node.publish({"type": "post", "text": f"post {number}"})
        nodes.append(node)
        _, port = await node.start("127.0.0.1", 0)
        return node, port

    yield start
    for node in nodes:
        await node.close()


@pytest.fixture
async def peer_of(
    start_node: StartNode,
) -> AsyncIterator[Callable[..., Awaitable[tuple[SsbNode, Peer]]]]:
    """A started node and a connected peer."""
    peers: list[Peer] = []

    async def make(keypair: Keypair | None = None, **node_kwargs) -> tuple[SsbNode, Peer]:
        node, port = await start_node(**node_kwargs)
        peer = await Peer.connect(port, node.keypair.public, keypair)
        peers.append(peer)
        return node, peer

    yield make
    for peer in peers:
        await peer.aclose()


async def raw_exchange(port: int, data: bytes, *, until_eof: bool = True) -> bytes:
    """Send raw bytes; return everything the node writes before hanging up
    (or, with until_eof False, its first answer: b"" if it hangs up)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), READ_TIMEOUT
    )
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.read(-1 if until_eof else 65536), READ_TIMEOUT)
    finally:
        writer.close()


def sequences(items: list) -> list[int]:
    return [item["value"]["sequence"] if "value" in item else item["sequence"] for item in items]


# --- options parsing ------------------------------------------------------------------------


class TestHistoryOptions:
    FEED = Keypair.from_seed(bytes(32)).feed_id

    def test_defaults_follow_the_guide(self):
        options = parse_history_options([{"id": self.FEED}])
        assert (
            options.sequence,
            options.start,
            options.limit,
            options.live,
            options.old,
            options.keys,
        ) == (0, 1, None, False, True, True)

    @pytest.mark.parametrize(
        "args, problem",
        [
            ([], "options object"),
            ([{}], "id option is required"),
            ([{"id": "@nope.ed25519"}], "invalid id"),
            ([{"id": FEED, "sequence": 1, "seq": 2}], "conflict"),
            ([{"id": FEED, "sequence": -1}], "non-negative"),
            ([{"id": FEED, "live": "yes"}], "true or false"),
            ([{"id": FEED, "limit": "2"}], "integer"),
        ],
    )
    def test_rejected(self, args, problem):
        with pytest.raises(ValueError, match=problem):
            parse_history_options(args)

    def test_seq_alias_and_negative_limit(self):
        assert parse_history_options([{"id": self.FEED, "seq": 4}]).start == 4
        assert parse_history_options([{"id": self.FEED, "seq": 4, "sequence": 4.0}]).start == 4
        assert parse_history_options([{"id": self.FEED, "sequence": 0}]).start == 1
        assert parse_history_options([{"id": self.FEED}]).start == 1
        assert parse_history_options([{"id": self.FEED, "limit": -1}]).limit is None


# --- serving --------------------------------------------------------------------------------


async def test_whoami(peer_of):
    node, peer = await peer_of()
    reply = await peer.call(["whoami"], [])
    assert isinstance(reply, Response) and reply.body.json() == {"id": node.feed_id}


class TestCreateHistoryStream:
    async def test_keys_true_by_default(self, peer_of):
        node, peer = await peer_of()
        items, error = await peer.history(id=node.feed_id)
        assert error is None
        assert [list(item) for item in items] == [["key", "value", "timestamp"]] * 3
        assert [item["key"] for item in items] == [message_id(item["value"]) for item in items]
        assert verify_feed([item["value"] for item in items]) == [item["key"] for item in items]

    async def test_keys_false_sends_bare_messages(self, peer_of):
        node, peer = await peer_of()
        items, _ = await peer.history(id=node.feed_id, keys=False)
        assert items == node.messages(node.feed_id)

    async def test_sequence_starts_at_the_given_message(self, peer_of):
        # The network's reading of `sequence` (erratum SSB-E1): "from", not
        # "later than"; 0 or absent means from the first message.
        node, peer = await peer_of()
        assert sequences((await peer.history(id=node.feed_id, sequence=1))[0]) == [1, 2, 3]
        assert sequences((await peer.history(id=node.feed_id, sequence=2))[0]) == [2, 3]
        assert sequences((await peer.history(id=node.feed_id, sequence=3))[0]) == [3]
        assert sequences((await peer.history(id=node.feed_id, sequence=4))[0]) == []
        assert sequences((await peer.history(id=node.feed_id, sequence=0))[0]) == [1, 2, 3]

    async def test_seq_is_a_legacy_alias(self, peer_of):
        node, peer = await peer_of()
        assert sequences((await peer.history(id=node.feed_id, seq=2))[0]) == [2, 3]
        assert sequences((await peer.history(id=node.feed_id, seq=2, sequence=2))[0]) == [2, 3]

    async def test_conflicting_sequence_and_seq_is_an_error(self, peer_of):
        node, peer = await peer_of()
        items, error = await peer.history(id=node.feed_id, sequence=1, seq=2)
        assert items == []
        assert error["name"] == "Error" and "conflict" in error["message"]

    async def test_limit(self, peer_of):
        node, peer = await peer_of()
        assert sequences((await peer.history(id=node.feed_id, limit=2))[0]) == [1, 2]
        assert sequences((await peer.history(id=node.feed_id, sequence=2, limit=1))[0]) == [2]
        assert sequences((await peer.history(id=node.feed_id, limit=0))[0]) == []

    @pytest.mark.parametrize("options", [{}, {"id": 42}, {"id": "@AAAA.ed25519"}])
    async def test_missing_or_invalid_id_ends_with_an_error(self, peer_of, options):
        _, peer = await peer_of()
        items, error = await peer.history(**options)
        assert items == [] and error["name"] == "Error" and "id" in error["message"]

    async def test_unknown_feed_is_empty(self, peer_of):
        _, peer = await peer_of()
        assert await peer.history(id=Keypair.generate().feed_id) == ([], None)

    async def test_live_sends_old_then_new_and_stops_when_the_requester_ends(self, peer_of):
        node, peer = await peer_of()
        req = peer.conn.request(
            ["createHistoryStream"], [{"id": node.feed_id, "live": True}], "source"
        )
        peer.flush()
        events = await peer.until(
            lambda e: isinstance(e, StreamData) and e.msg.json()["value"]["sequence"] == 3
        )
        assert len(events) == 3
        node.publish({"type": "post", "text": "live one"})
        [event] = await peer.until(lambda e: isinstance(e, StreamData))
        assert event.msg.json()["value"]["content"]["text"] == "live one"
        assert await peer.silent() == []  # still open, nothing more to say
        peer.conn.stream_close(req)
        peer.flush()
        end = await peer.until(lambda e: isinstance(e, StreamEnd))
        assert end == [StreamEnd(-req, None)]
        node.publish({"type": "post", "text": "after the end"})
        assert await peer.silent() == []
        assert peer.conn.rpc.open_outgoing == frozenset()

    async def test_live_without_old(self, peer_of):
        node, peer = await peer_of()
        req = peer.conn.request(
            ["createHistoryStream"], [{"id": node.feed_id, "live": True, "old": False}], "source"
        )
        peer.flush()
        assert await peer.silent() == []
        node.publish({"type": "post", "text": "new"})
        [event] = await peer.until(lambda e: isinstance(e, StreamData))
        assert event.req == -req and event.msg.json()["value"]["sequence"] == 4

    async def test_live_limit_ends_the_stream(self, peer_of):
        node, peer = await peer_of()
        req = peer.conn.request(
            ["createHistoryStream"],
            [{"id": node.feed_id, "live": True, "sequence": 3, "limit": 2}],
            "source",
        )
        peer.flush()
        await peer.until(lambda e: isinstance(e, StreamData))  # message 3 (SSB-E1: from 3)
        node.publish({"type": "post", "text": "fourth"})
        events = await peer.until(lambda e: isinstance(e, StreamEnd))
        assert [e.msg.json()["value"]["sequence"] for e in events if isinstance(e, StreamData)] == [
            4
        ]
        assert events[-1] == StreamEnd(-req, None)

    async def test_old_false_without_live_is_empty(self, peer_of):
        node, peer = await peer_of()
        assert await peer.history(id=node.feed_id, old=False) == ([], None)


class TestPublish:
    async def test_own_key_may_publish_and_live_streams_see_it(self, start_node):
        node, port = await start_node()
        watcher = await Peer.connect(port, node.keypair.public)
        owner = await Peer.connect(port, node.keypair.public, keypair=node.keypair)
        try:
            req = watcher.conn.request(
                ["createHistoryStream"],
                [{"id": node.feed_id, "live": True, "old": False}],
                "source",
            )
            watcher.flush()
            await asyncio.sleep(0.05)  # let the node register the stream first
            reply = await owner.call(["publish"], [{"type": "post", "text": "via rpc"}])
            assert isinstance(reply, Response)
            published = reply.body.json()
            assert published["value"]["sequence"] == 4 and published["key"] == message_id(
                published["value"]
            )
            [event] = await watcher.until(lambda e: isinstance(e, StreamData))
            assert event.req == -req and event.msg.json()["key"] == published["key"]
        finally:
            await watcher.aclose()
            await owner.aclose()

    async def test_other_keys_may_not(self, peer_of):
        node, peer = await peer_of()
        reply = await peer.call(["publish"], [{"type": "post", "text": "spam"}])
        assert isinstance(reply, AsyncError) and reply.error["name"] == "Error"
        assert len(node.messages(node.feed_id)) == 3

    async def test_invalid_content_is_refused(self, start_node):
        node, port = await start_node()
        owner = await Peer.connect(port, node.keypair.public, keypair=node.keypair)
        try:
            reply = await owner.call(["publish"], [{"type": "x"}])
            assert isinstance(reply, AsyncError) and "content" in reply.error["message"]
        finally:
            await owner.aclose()


class TestUnknownProcedures:
    async def test_async_gets_an_error(self, peer_of):
        _, peer = await peer_of()
        reply = await peer.call(["no", "such", "thing"], [1, 2])
        assert isinstance(reply, AsyncError)
        assert reply.error["name"] == "Error" and "no.such.thing" in reply.error["message"]

    @pytest.mark.parametrize("kind", ["source", "duplex", "sink"])
    async def test_streams_end_with_an_error(self, peer_of, kind):
        _, peer = await peer_of()
        req = peer.conn.request(["nope"], [], kind)
        peer.flush()
        [end] = await peer.until(lambda e: isinstance(e, StreamEnd))
        assert end.req == -req and end.error["name"] == "Error"

    async def test_wrong_type_for_a_known_name(self, peer_of):
        node, peer = await peer_of()
        reply = await peer.call(["createHistoryStream"], [{"id": node.feed_id}])
        assert isinstance(reply, AsyncError) and "source" in reply.error["message"]

    async def test_node_keeps_serving(self, peer_of):
        node, peer = await peer_of()
        await peer.call(["x" * 1000], [{"deep": [[[]]]}])
        reply = await peer.call(["whoami"], [])
        assert reply.body.json() == {"id": node.feed_id}


class TestConnectionLifecycle:
    async def test_goodbye_is_answered_and_the_node_hangs_up(self, peer_of):
        _, peer = await peer_of()
        peer.conn.close()
        peer.flush()
        events = await peer.until(lambda e: isinstance(e, Closed))
        assert Goodbye() in events and events[-1].failed is False
        assert await asyncio.wait_for(peer.reader.read(), READ_TIMEOUT) == b""

    async def test_wrong_network_key_gets_no_answer(self, start_node):
        _, port = await start_node()
        assert await raw_exchange(port, hello(bytes(32), bytes(32))) == b""

    async def test_garbage_hello_gets_no_answer(self, start_node):
        _, port = await start_node()
        assert await raw_exchange(port, os.urandom(HELLO_SIZE)) == b""

    async def test_handshake_deadline(self, start_node):
        _, port = await start_node(handshake_timeout=0.2)
        assert await raw_exchange(port, b"") == b""

    async def test_idle_connection_is_closed_with_goodbyes(self, peer_of):
        _, peer = await peer_of(idle_timeout=0.3)
        events = await peer.until(lambda e: isinstance(e, Closed))
        assert Goodbye() in events and not events[-1].failed

    async def test_shutdown_says_goodbye(self, peer_of):
        node, peer = await peer_of()
        await node.close()
        events = await peer.until(lambda e: isinstance(e, Closed))
        assert Goodbye() in events and not events[-1].failed


class TestReplication:
    async def test_replicate_verifies_and_a_node_serves_what_it_replicated(self, start_node):
        origin, origin_port = await start_node(messages=4)
        mirror, mirror_port = await start_node(messages=0)
        assert (
            await mirror.replicate("127.0.0.1", origin_port, origin.keypair.public, origin.feed_id)
            == 4
        )
        origin.publish({"type": "post", "text": "later"})
        # Only the new message is fetched the second time.
        assert (
            await mirror.replicate("127.0.0.1", origin_port, origin.keypair.public, origin.feed_id)
            == 1
        )
        assert mirror.messages(origin.feed_id) == origin.messages(origin.feed_id)
        peer = await Peer.connect(mirror_port, mirror.keypair.public)
        try:
            items, _ = await peer.history(id=origin.feed_id, keys=False)
        finally:
            await peer.aclose()
        assert items == origin.messages(origin.feed_id)

    async def test_wrong_peer_key_is_a_handshake_error(self, start_node):
        _, port = await start_node()
        with pytest.raises(ReplicationError) as caught:
            await replicate(
                "127.0.0.1",
                port,
                network_key=NETWORK_KEY,
                keypair=Keypair.generate(),
                peer_public=Keypair.generate().public,
                feed_id=Keypair.generate().feed_id,
            )
        assert caught.value.kind == "handshake"


# --- fault injection: each fault changes exactly the behaviour it names ----------------------


class TestFaults:
    async def test_accept_any_network_key(self, start_node):
        wrong_hello = hello(bytes(32), bytes(range(1, 33)))
        _, good_port = await start_node()
        _, faulty_port = await start_node(fault=Fault.ACCEPT_ANY_NETWORK_KEY)
        assert await raw_exchange(good_port, wrong_hello, until_eof=False) == b""
        # The faulty node answers with its hello and waits for msg3.
        assert len(await raw_exchange(faulty_port, wrong_hello, until_eof=False)) == HELLO_SIZE

    async def test_write_after_bad_handshake(self, start_node):
        garbage = bytes(HELLO_SIZE)
        _, good_port = await start_node()
        _, faulty_port = await start_node(fault=Fault.WRITE_AFTER_BAD_HANDSHAKE)
        assert await raw_exchange(good_port, garbage) == b""
        assert len(await raw_exchange(faulty_port, garbage)) == 16

    async def test_exclusive_sequence(self, peer_of):
        good, good_peer = await peer_of()
        faulty, faulty_peer = await peer_of(fault=Fault.EXCLUSIVE_SEQUENCE)
        assert sequences((await good_peer.history(id=good.feed_id, sequence=2))[0]) == [2, 3]
        assert sequences((await faulty_peer.history(id=faulty.feed_id, sequence=2))[0]) == [3]
        # What ssb-replicate asks for when it holds nothing: message 1 first.
        assert sequences((await faulty_peer.history(id=faulty.feed_id, seq=1))[0]) == [2, 3]
        assert sequences((await faulty_peer.history(id=faulty.feed_id))[0]) == [1, 2, 3]

    async def test_bad_signature(self, start_node):
        good, good_port = await start_node()
        faulty, faulty_port = await start_node(fault=Fault.BAD_SIGNATURE)

        async def fetch(node: SsbNode, port: int) -> list[dict]:
            return await replicate(
                "127.0.0.1",
                port,
                network_key=NETWORK_KEY,
                keypair=Keypair.generate(),
                peer_public=node.keypair.public,
                feed_id=node.feed_id,
                timeout=READ_TIMEOUT,
            )

        assert len(await fetch(good, good_port)) == 3
        with pytest.raises(ReplicationError) as caught:
            await fetch(faulty, faulty_port)
        assert caught.value.kind == "invalid-message" and "signature" in str(caught.value)

    def test_flip_signature_byte_changes_one_byte(self):
        feed_owner = SsbNode(Keypair.generate())
        msg = feed_owner.publish({"type": "post", "text": "x"})["value"]
        flipped = flip_signature_byte(msg)
        assert flipped["signature"] != msg["signature"]
        assert {key: value for key, value in flipped.items() if key != "signature"} == {
            key: value for key, value in msg.items() if key != "signature"
        }

    async def test_no_error_on_unknown(self, peer_of):
        _, good_peer = await peer_of()
        _, faulty_peer = await peer_of(fault=Fault.NO_ERROR_ON_UNKNOWN)
        assert isinstance(await good_peer.call(["nope"], []), AsyncError)
        reply = await faulty_peer.call(["nope"], [])
        assert isinstance(reply, Response)  # no end/err flag
        req = faulty_peer.conn.request(["nope"], [], "source")
        faulty_peer.flush()
        [event] = await faulty_peer.until(lambda e: e.req == -req)
        assert isinstance(event, StreamData)

    async def test_ignore_goodbye(self, peer_of):
        _, good_peer = await peer_of()
        _, faulty_peer = await peer_of(fault=Fault.IGNORE_GOODBYE)
        for peer in (good_peer, faulty_peer):
            peer.conn.close()
            peer.flush()
        assert Goodbye() in await good_peer.until(lambda e: isinstance(e, Closed))
        assert await faulty_peer.silent() == []


# --- the CLI --------------------------------------------------------------------------------


async def run_cli(*args: str, timeout: float = 15.0) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "reference_impl.ssb",
        *args,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, stdout.decode(), stderr.decode()


class ServeProcess:
    """``serve`` as a subprocess, ready once it has printed SSB_READY."""

    def __init__(self, process: asyncio.subprocess.Process, ready: dict[str, str]) -> None:
        self.process = process
        self.port = int(ready["port"])
        self.id = ready["id"]

    @classmethod
    async def start(cls, *args: str) -> ServeProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "reference_impl.ssb",
            "serve",
            "--port",
            "0",
            "--network-key",
            NETWORK_KEY.hex(),
            *args,
            cwd=REPO_ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), 15)).decode()
        except TimeoutError:
            process.kill()
            raise
        if not line.startswith("SSB_READY "):
            process.kill()
            stderr = await asyncio.wait_for(process.stderr.read(), READ_TIMEOUT)
            pytest.fail(f"serve did not start: {line!r} {stderr.decode()}")
        return cls(process, dict(field.split("=", 1) for field in line.split()[1:]))

    async def stop(self) -> tuple[int, str, str]:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(self.process.communicate(), 15)
        return self.process.returncode, stdout.decode(), stderr.decode()


class TestCli:
    async def test_serve_then_replicate_through_the_cli(self, tmp_path):
        key_file = tmp_path / "server.key"
        ready_file = tmp_path / "ready.json"
        server = await ServeProcess.start(
            "--key-file",
            str(key_file),
            "--create-key",
            "--seed-messages",
            "3",
            "--ready-file",
            str(ready_file),
        )
        try:
            assert (key_file.stat().st_mode & 0o777) == 0o600
            keypair = Keypair.load(key_file)
            assert server.id == keypair.feed_id
            assert json.loads(ready_file.read_text()) == {
                "host": "127.0.0.1",
                "port": server.port,
                "id": server.id,
            }
            out = tmp_path / "feed.json"
            code, stdout, stderr = await run_cli(
                "replicate",
                "--network-key",
                NETWORK_KEY.hex(),
                "--peer-port",
                str(server.port),
                "--peer-public-key",
                server.id,
                "--out",
                str(out),
            )
            assert code == 0, stderr
            assert stdout == f"SSB_REPLICATED feed={server.id} count=3 latest_sequence=3\n"
            messages = json.loads(out.read_text())
            assert len(verify_feed(messages)) == 3 and messages[0]["author"] == server.id
        finally:
            code, stdout, stderr = await server.stop()
        assert code == 0
        secret_text = key_file.read_text()
        private = json.loads(
            "\n".join(line for line in secret_text.splitlines() if not line.startswith("#"))
        )["private"]
        assert private not in stdout + stderr
        assert stdout == ""  # nothing after the one SSB_READY line

    async def test_seed_feed_and_cli_errors(self, tmp_path):
        origin = SsbNode(Keypair.generate())
        for number in range(2):
            origin.publish({"type": "post", "text": f"{number}"})
        seed = tmp_path / "seed.json"
        seed.write_text(json.dumps(origin.messages(origin.feed_id)))
        server = await ServeProcess.start(
            "--key-file", str(tmp_path / "k"), "--create-key", "--seed-feed", str(seed)
        )
        try:
            common = [
                "replicate",
                "--network-key",
                NETWORK_KEY.hex(),
                "--peer-port",
                str(server.port),
            ]
            code, stdout, _ = await run_cli(
                *common, "--peer-public-key", server.id, "--feed", origin.feed_id
            )
            assert code == 0 and "count=2 latest_sequence=2" in stdout
            code, stdout, stderr = await run_cli(*common, "--peer-public-key", origin.feed_id)
            assert (
                code == 3
                and stdout == ""
                and stderr.startswith("error: ")
                and stderr.count("\n") == 1
            )
            code, _, stderr = await run_cli(
                *common[:-2], "--peer-port", str(server.port), "--peer-public-key", "not-a-key"
            )
            assert code == 2 and "--peer-public-key" in stderr
        finally:
            await server.stop()

    async def test_invalid_seed_feed_is_refused(self, tmp_path):
        origin = SsbNode(Keypair.generate())
        msg = origin.publish({"type": "post", "text": "x"})["value"]
        seed = tmp_path / "seed.json"
        seed.write_text(json.dumps([flip_signature_byte(msg)]))
        code, stdout, stderr = await run_cli(
            "serve",
            "--key-file",
            str(tmp_path / "k"),
            "--create-key",
            "--port",
            "0",
            "--seed-feed",
            str(seed),
        )
        assert code == 2 and "signature" in stderr and "SSB_READY" not in stdout

    async def test_replicate_exit_codes_for_invalid_messages_and_timeouts(self, start_node):
        faulty, faulty_port = await start_node(fault=Fault.BAD_SIGNATURE)
        code, _, stderr = await run_cli(
            "replicate",
            "--network-key",
            NETWORK_KEY.hex(),
            "--peer-port",
            str(faulty_port),
            "--peer-public-key",
            faulty.feed_id,
        )
        assert code == 4 and "signature" in stderr

        async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()
            writer.close()

        mute = await asyncio.start_server(never_answer, "127.0.0.1", 0)
        try:
            port = mute.sockets[0].getsockname()[1]
            code, _, stderr = await run_cli(
                "replicate",
                "--peer-port",
                str(port),
                "--timeout",
                "0.5",
                "--peer-public-key",
                faulty.feed_id,
            )
            assert code == 5 and "0.5 s" in stderr
        finally:
            mute.close()
            await mute.wait_closed()

    def test_missing_key_file_needs_create_key(self, tmp_path, capsys):
        assert main(["serve", "--key-file", str(tmp_path / "absent"), "--port", "0"]) == 2
        assert "--create-key" in capsys.readouterr().err

    def test_help_lists_fault_modes(self, capsys):
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--help"])
        assert exited.value.code == 0
        help_text = capsys.readouterr().out
        for fault in Fault:
            assert fault.value in help_text
