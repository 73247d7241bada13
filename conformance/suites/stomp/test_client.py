"""Target as client: the harness launches the target's client with a
manifest naming the harness's own TLS STOMP server, and plays that server
(Swaptacular STOMP profile; STOMP 1.2 where the profile builds on it).

Unless a case says otherwise the harness presents a certificate from the
run's CA naming 127.0.0.1, ::1 and localhost, so that a client checking
hostnames (which the profile advises against, a SHOULD with its own case)
is judged on every other rule all the same.
"""

from __future__ import annotations

import asyncio
import ssl

from conformance.core.node_grammar import grammar_violation_in
from conformance.core.requirements import blocked, requirement
from conformance.core.transport import Deadline, DeadlineExceeded
from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameError
from reference_impl.stomp.smp import parse_body, validate_message

from .prerequisites import CLIENT_GRAMMAR
from .client_server import (
    MAX_CERTIFICATE_PROBES,
    SUBSET_CLIENT_COMMANDS,
    ClientConnection,
    LaunchedClient,
    Session,
    reconnect_window,
    require_delivered_contract,
    show_frame,
)

PROFILE = "Swaptacular STOMP transport"
SUBSET = f"{PROFILE}, A Subset of the STOMP Protocol"
CONNECTIONS = f"{PROFILE}, STOMP Connections"
MANIFEST = f"{PROFILE}, STOMP Servers Manifest Files"

ROOT = "stomp.tls.client.presents-certificate"
CONNECT_FIRST = "stomp.connect.client.sends-connect-first"
SENDS_EACH = "stomp.send.client.sends-each-message"
INCLUDES_RECEIPT = "stomp.send.client.includes-receipt"

NO_FRAME_WINDOW = 2.0
"""Seconds the harness waits, after a TLS handshake a client should have
refused, for the CONNECT a client that accepted it sends at once (within
milliseconds on loopback). A client that checks the certificate after the
handshake and closes, or sends nothing, has not proceeded."""

UNRECEIPTED_WINDOW = 2.0
"""Seconds the harness withholds RECEIPTs while watching the client's
output for a delivery it must not report."""

BATCH_QUIET = 1.0
"""Seconds without a whole frame from the client after which the harness
takes its unreceipted SENDs so far as one batch (the client stopped
sending) and answers only the last of them (accepts-cumulative-receipt)."""


async def refused_or_silent(client: LaunchedClient, what: str) -> tuple[bool, str]:
    """After a handshake the client must refuse: (refused, how). Refused when
    the handshake failed, or when the client completed it but closed or sent
    no frame; not refused when it sent a frame (its CONNECT, shown)."""
    connection, failure = await client.handshake(f"the client's TLS handshake ({what})")
    if connection is None:
        return True, f"the TLS handshake failed: {failure}"
    try:
        frame = await connection.next_frame("the client's first frame", NO_FRAME_WINDOW)
    except DeadlineExceeded:
        return (
            True,
            f"the handshake completed ({connection.tls_version}) but the client sent no frame",
        )
    if frame is None:
        return (
            True,
            f"the handshake completed ({connection.tls_version}) but the client closed without a frame",
        )
    return False, (
        f"the handshake completed ({connection.tls_version}) and the client went on: "
        f"{show_frame(frame)}"
    )


@requirement(
    ROOT,
    "MUST",
    f'{CONNECTIONS} ("Both the client and the server must present a certificate, which the other side '
    'verifies before proceeding"; "Servers MUST require clients to authenticate themselves by presenting '
    'a trusted certificate chain")',
    role="client",
)
async def test_client_presents_certificate(launched_client):
    # The harness asks for a certificate without demanding one, so that a
    # client sending none completes the handshake and is told apart from a
    # handshake failing for another reason (shown as it is). The rule is on
    # the connection the client proceeds with: one it closes without a byte
    # after presenting no certificate (a probe of the server's certificate,
    # as stomp.py 8.0.1 makes before it connects) is passed over, bounded.
    async with launched_client(require_client_cert=False) as client:
        probes: list[str] = []
        while True:
            connection, failure = await client.handshake("the client's TLS handshake")
            assert connection is not None, (
                f"the TLS handshake with the client did not complete: {failure} (the harness presented a "
                "certificate from the run's CA naming 127.0.0.1, over TLS 1.2-1.3)"
                f"{probes_shown(probes)}; the client's output:\n{client.output_tail()}"
            )
            if connection.peer_certificate():
                return
            sent = await first_bytes(connection, NO_FRAME_WINDOW)
            assert sent == b"" and len(probes) < MAX_CERTIFICATE_PROBES, (
                f"the client completed the TLS handshake ({connection.tls_version}) without presenting a "
                "certificate, and "
                + (
                    f"went on: it sent {sent[:200]!r}"
                    if sent
                    else "kept the connection open"
                    if sent is None
                    else f"closed it without a byte, {len(probes) + 1} times in a row"
                )
                + probes_shown(probes)
            )
            probes.append(
                f"connection {connection.index}: {connection.tls_version}, no certificate, closed "
                "without a byte"
            )


async def first_bytes(connection, window: float) -> bytes | None:
    """What the client sends first on ``connection`` within ``window`` s:
    its bytes, ``b""`` when it closed without any, None when it sent
    nothing and kept the connection open."""
    try:
        return await connection.conn.receive_some(Deadline(window))
    except DeadlineExceeded:
        return None


def probes_shown(probes: list[str]) -> str:
    return f" (passed over before it, as probes: {'; '.join(probes)})" if probes else ""


@requirement(
    "stomp.tls.client.verifies-server-chain",
    "MUST",
    f'{CONNECTIONS} ("Clients MUST require servers to authenticate themselves by presenting a trusted '
    'certificate chain")',
    role="client",
    depends=[ROOT],
)
async def test_client_verifies_server_chain(launched_client):
    async with launched_client("untrusted-server", require_client_cert=False) as client:
        refused, how = await refused_or_silent(
            client, "the harness presents a certificate from a CA the client was not given"
        )
        assert refused, (
            "the harness presented a certificate from a CA the client does not trust, and "
            f"the client proceeded: {how}"
        )


@requirement(
    "stomp.tls.client.skips-hostname-verification",
    "SHOULD",
    f'{CONNECTIONS} ("Clients SHOULD NOT perform hostname verification", footnote 3)',
    role="client",
    depends=[ROOT],
)
async def test_client_skips_hostname_verification(launched_client):
    async with launched_client("server") as client:
        connection, failure = await client.handshake(
            "the client's TLS handshake (certificate naming only stomp-server.invalid)"
        )
        assert connection is not None, (
            "the harness presented a certificate from the trusted CA naming only stomp-server.invalid (the "
            f"manifest names 127.0.0.1), and the TLS handshake failed: {failure}"
        )
        frame = await connection.next_frame(
            "the client's first frame after the handshake (certificate naming "
            "only stomp-server.invalid)"
        )
        assert frame is not None, (
            "the client completed the TLS handshake with a certificate naming only "
            "stomp-server.invalid, then closed without a frame (a hostname check after "
            "the handshake?)"
        )


@requirement(
    "stomp.tls.client.refuses-tls-1-2",
    "MUST",
    f'{CONNECTIONS} ("STOMP connections MUST be secured by using Transport Layer Security version 1.3 '
    'or higher")',
    role="client",
    depends=[ROOT],
)
async def test_client_refuses_tls_1_2(launched_client):
    async with launched_client(maximum=ssl.TLSVersion.TLSv1_2, require_client_cert=False) as client:
        refused, how = await refused_or_silent(client, "the harness offers TLS 1.2 at most")
        assert refused, f"the harness offered TLS 1.2 at most, and the client proceeded: {how}"


@requirement(
    CONNECT_FIRST,
    "MUST",
    'STOMP 1.2, Connecting ("A STOMP client initiates the stream or TCP connection to the server by '
    f'sending the CONNECT frame"; STOMP frame likewise); {SUBSET} (CONNECT and STOMP "MUST be fully '
    'supported")',
    role="client",
    depends=[ROOT],
    errata=["STOMP-E5"],
)
async def test_client_sends_connect_first(launched_client):
    async with launched_client() as client:
        connection = await client.accept()
        frame = await connection.next_frame("the client's first frame")
        assert frame is not None, "the client closed the connection without sending a frame"
        assert frame.command in ("CONNECT", "STOMP"), (
            f"the client's first frame is {frame.command}, not CONNECT or STOMP: {show_frame(frame)}"
        )


async def full_session(client: LaunchedClient) -> Session:
    session = await client.full_session()
    assert session.connect is not None, (
        f"the client sent no CONNECT ({session.ended}); frames: {[f.command for f in session.frames]}"
    )
    return session


CLIENT_ENDED = ("DISCONNECT", "the client closed the connection")
"""How a served connection ends when the client chose to end it (serve's
``ended``): it may come back with a new connection for what it has not sent."""


async def sessions_until_all_sent(client: LaunchedClient) -> Session:
    """The client's connections, served one after another, until its SENDs
    carry every message it was given, it stops connecting (none within
    reconnect_window after it ended the last one) or it hangs on one: a
    Session holding every frame of them (``connect`` and ``first`` from the
    first connection). The profile has the sending node open "a client STOMP
    connection to one (or more) of the receiving node's servers" and "MAY
    decide to keep the STOMP connection open for any length of time": a
    client may deliver its messages over several connections in a row."""
    session = await full_session(client)
    count, last = 1, session.ended
    while len({frame.body for frame in session.sends}) < len(client.messages) and last.startswith(
        CLIENT_ENDED
    ):
        try:
            connection = await client.accept(
                "the client's next connection", wait=reconnect_window(client)
            )
        except AssertionError as exc:
            session.ended += f"; it made no connection {count + 1}: {str(exc).splitlines()[0]}"
            break
        more = await client.serve(connection)
        count, last = count + 1, more.ended
        session.frames += more.frames
        session.sends += more.sends
        session.ended = f"{count} connections; the last: {last}"
    return session


async def sends_of(client: LaunchedClient) -> Session:
    session = await sessions_until_all_sent(client)
    assert session.sends, f"the client sent no SEND after CONNECTED ({session.ended})"
    return session


@requirement(
    "stomp.connect.client.host-substitutes-node-id",
    "MUST",
    f'{MANIFEST} (host: "The client MUST substitute all occurrences of the string ${{NODE_ID}} in the '
    "value, with the ID of the client's Swaptacular node\")",
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_host_substitutes_node_id(launched_client):
    async with launched_client() as client:
        session = await full_session(client)
        expected = client.expected("host")
        got = session.connect.get("host")
        assert got == expected, (
            f"manifest host {client.manifest_values['host']!r}, node id {client.node_id}: the host header must be "
            f"{expected!r}, the client sent {got!r}: {show_frame(session.connect)}"
        )


@requirement(
    "stomp.connect.client.accept-version-includes-1-2",
    "MUST",
    'STOMP 1.2, CONNECT or STOMP Frame ("STOMP 1.2 clients MUST set the following headers"); Protocol '
    f'Negotiation ("From STOMP 1.1 and onwards, the CONNECT frame MUST include the accept-version '
    f'header"); {SUBSET}',
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_accept_version(launched_client):
    """The profile's subset is STOMP 1.2's: the client's CONNECT (or STOMP)
    must name the versions it supports, 1.2 among them (without the header
    it asks for STOMP 1.0)."""
    async with launched_client() as client:
        session = await full_session(client)
        value = session.connect.get("accept-version")
        assert value is not None, (
            f"the client's {session.connect.command} has no accept-version header (a STOMP "
            f"1.0 {session.connect.command}): {show_frame(session.connect)}"
        )
        versions = [version.strip() for version in value.split(",")]
        assert "1.2" in versions, (
            f"the client's accept-version is {value!r}; the profile's subset is STOMP 1.2, "
            f"so 1.2 must be among them: {show_frame(session.connect)}"
        )


@requirement(
    "stomp.connect.client.login-substitutes-node-id",
    "MUST",
    f'{MANIFEST} (login: "The client MUST substitute all occurrences of the string ${{NODE_ID}} in the '
    'value")',
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_login_substitutes_node_id(launched_client):
    async with launched_client() as client:
        session = await full_session(client)
        expected = client.expected("login")
        got = session.connect.get("login")
        assert got == expected, (
            f"manifest login {client.manifest_values['login']!r}, node id {client.node_id}: the login header must "
            f"be {expected!r}, the client sent {got!r}: {show_frame(session.connect)}"
        )


@requirement(
    SENDS_EACH,
    "MUST",
    f'{CONNECTIONS} ("the sending node opens a client STOMP connection to one (or more) of the '
    "receiving node's servers, and issues a SEND command for each of the messages\"; the profile's "
    f'transport is that SEND, so a message never sent is never delivered); {SUBSET} (SEND "MUST be '
    'fully supported", as clients too)',
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_sends_each_message(launched_client):
    async with launched_client() as client:
        session = await sessions_until_all_sent(client)
        bodies = {frame.body for frame in session.sends}
        assert len(bodies) >= len(client.messages), (
            f"the client was given {len(client.messages)} messages and sent {len(session.sends)} SEND frame(s) "
            f"with {len(bodies)} distinct bodies ({session.ended}); frames: {[f.command for f in session.frames]}"
        )


@requirement(
    "stomp.send.client.destination-substitutes-node-id",
    "MUST",
    f'{MANIFEST} (destination: "The client MUST substitute all occurrences of the string ${{NODE_ID}} in '
    'the value")',
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_destination_substitutes_node_id(launched_client):
    async with launched_client() as client:
        session = await sends_of(client)
        expected = client.expected("destination")
        wrong = [frame for frame in session.sends if frame.get("destination") != expected]
        assert not wrong, (
            f"manifest destination {client.manifest_values['destination']!r}, node id {client.node_id}: every SEND "
            f"must have destination {expected!r}; {len(wrong)} of {len(session.sends)} do not, the first: "
            f"{show_frame(wrong[0])}"
        )


@requirement(
    INCLUDES_RECEIPT,
    "MUST",
    f'{SUBSET} ("every SEND command MUST include the following headers: receipt Specifies a message ID")',
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_includes_receipt(launched_client):
    async with launched_client() as client:
        session = await sends_of(client)
        wrong = [frame for frame in session.sends if not frame.get("receipt")]
        assert not wrong, (
            f"{len(wrong)} of {len(session.sends)} SEND frames have no (or an empty) receipt "
            f"header, the first: {show_frame(wrong[0])}"
        )


@requirement(
    "stomp.send.client.includes-type",
    "MUST",
    f'{SUBSET} ("every SEND command MUST include the following headers: ... type Specifies the type of '
    'the SMP message")',
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_includes_type(launched_client):
    async with launched_client() as client:
        session = await sends_of(client)
        problems = []
        for frame in session.sends:
            got = frame.get("type")
            index = client.message_index(frame)
            want = client.messages[index]["type"] if index is not None else None
            if not got:
                problems.append(f"no type header: {show_frame(frame)}")
            elif want is not None and got != want:
                problems.append(f"type {got!r} on a {want} message: {show_frame(frame)}")
        assert not problems, f"{len(problems)} of {len(session.sends)} SEND frames: {problems[0]}"


@requirement(
    "stomp.send.client.includes-content-type",
    "MUST",
    f'{SUBSET} ("content-type Specifies the MIME type of the message body"; "Every Swaptacular node '
    'MUST support the JSON serialization format (the application/json MIME type)"); '
    f'{MANIFEST} (accepted-content-types missing: "only application/json is supported")',
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_includes_content_type(launched_client):
    # The harness's manifest lists no accepted-content-types: the server
    # takes application/json only, so that is the one a SEND may name.
    async with launched_client() as client:
        session = await sends_of(client)
        wrong = []
        for frame in session.sends:
            value = frame.get("content-type")
            media = (value or "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                wrong.append(frame)
        assert not wrong, (
            f"{len(wrong)} of {len(session.sends)} SEND frames lack content-type application/json (the manifest "
            f"lists no other type), the first has {wrong[0].get('content-type')!r}: {show_frame(wrong[0])}"
        )


@requirement(
    "stomp.send.client.persistent-true",
    "MUST",
    f'{SUBSET} ("persistent MUST have the value true")',
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_persistent_true(launched_client):
    async with launched_client() as client:
        session = await sends_of(client)
        wrong = [frame for frame in session.sends if frame.get("persistent") != "true"]
        assert not wrong, (
            f"{len(wrong)} of {len(session.sends)} SEND frames lack persistent:true, the first has "
            f"{wrong[0].get('persistent')!r}: {show_frame(wrong[0])}"
        )


@requirement(
    "stomp.send.client.body-is-valid-smp",
    "MUST",
    f"{SUBSET} (the JSON serialization, application/json); Swaptacular Messaging Protocol 2.1, Incoming messages and Outgoing messages "
    "(each type's fields, their types and ranges)",
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_body_is_valid_smp(launched_client):
    async with launched_client() as client:
        session = await sends_of(client)
        problems = []
        for frame in session.sends:
            value, problem = parse_body(frame.body)
            if problem is not None:
                problems.append(f"body: {problem.field}: {problem.reason}: {show_frame(frame)}")
                continue
            type_name = value.get("type") if isinstance(value, dict) else None
            type_name = type_name if isinstance(type_name, str) else frame.get("type")
            if not type_name:
                problems.append(f"body names no SMP message type: {show_frame(frame)}")
                continue
            found = validate_message(type_name, value)
            if found:
                shown = "; ".join(f"{p.field}: {p.reason}" for p in found[:3])
                problems.append(f"not a valid {type_name} message ({shown}): {show_frame(frame)}")
        assert not problems, f"{len(problems)} of {len(session.sends)} SEND bodies: {problems[0]}"


@requirement(
    "stomp.send.client.only-subset-commands",
    "MUST",
    f'{SUBSET} ("Swaptacular nodes MUST NOT presume that their peer nodes will understand these '
    'commands": SUBSCRIBE, UNSUBSCRIBE, MESSAGE, ACK, NACK, BEGIN, COMMIT, ABORT)',
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_only_subset_commands(launched_client):
    async with launched_client() as client:
        session = await sessions_until_all_sent(client)
        wrong = [frame for frame in session.frames if frame.command not in SUBSET_CLIENT_COMMANDS]
        assert not wrong, (
            f"the client sent {wrong[0].command} (outside the subset CONNECT, STOMP, SEND, DISCONNECT) in its "
            f"session: {show_frame(wrong[0])}"
        )


@requirement(
    "stomp.connect.client.nothing-after-disconnect",
    "MUST",
    'STOMP 1.2, DISCONNECT ("Clients MUST NOT send any more frames after the DISCONNECT frame is sent")',
    role="client",
    depends=[CONNECT_FIRST],
)
async def test_client_nothing_after_disconnect(launched_client):
    """The harness serves the client's first connection until it sends
    DISCONNECT or closes (a client may linger), answers the DISCONNECT with
    its RECEIPT and reads until the client closes (2 s at most): no frame
    may come after the DISCONNECT (EOLs are heart-beats, not frames). A
    client that closes without DISCONNECT (STOMP 1.2 allows it) has nothing
    here to break."""
    async with launched_client() as client:
        session = await client.serve(await client.accept(), until_end=True)
        if not session.ended.startswith("DISCONNECT"):
            session.connection.conn.trace.event(
                f"no DISCONNECT on the connection ({session.ended}): no frame can follow one"
            )
            return
        after = list(session.after_disconnect)
        try:
            after += [
                item
                for item in session.connection.parser.receive_data(session.bytes_after_disconnect)
                if item is not HEARTBEAT
            ]
        except FrameError:
            raise AssertionError(
                f"after its DISCONNECT the client sent bytes that are no frame: "
                f"{session.bytes_after_disconnect[:200]!r}"
            ) from None
        assert not after, (
            f"after its DISCONNECT the client sent {len(after)} frame(s), first "
            f"{show_frame(after[0])}; it must send no frame after DISCONNECT"
        )


@requirement(
    "stomp.receipt.client.delivered-only-after-receipt",
    "MUST",
    f'{CONNECTIONS} ("The client MUST consider a message to be successfully delivered, only after a '
    "RECEIPT command has been received from the server, confirming that the message has been "
    'processed"; footnote 2: a RECEIPT confirms the messages before it)',
    role="client",
    depends=[INCLUDES_RECEIPT],
)
async def test_client_delivered_only_after_receipt(launched_client):
    async with launched_client() as client:
        connection = await client.accept()
        first_send = None
        window = Deadline(max(4 * client.deadline, 10.0))
        while first_send is None:
            frame = await connection.next_frame("the client's first SEND", window)
            assert frame is not None, "the client closed the connection before its first SEND"
            if frame.command in ("CONNECT", "STOMP") and not connection.connected:
                await connection.answer_connect(frame)
            elif frame.command == "SEND":
                first_send = frame
        receipt = first_send.get("receipt")
        await connection.receipt(
            receipt, f"RECEIPT for the first SEND only ({receipt!r}); the others get none"
        )
        confirmed = client.message_index(first_send)
        # What the client delivers now is up to the first SEND; the RECEIPT
        # confirms nothing after it. Its output must say so within the
        # read deadline (a positive control: a client that reports nothing
        # cannot be judged).
        reported: list[int] = []
        control = Deadline(client.deadline)
        while not control.expired and not reported:
            await asyncio.sleep(0.1)
            reported = client.delivered()
        require_delivered_contract(client, reported, 1)
        # Withhold every other RECEIPT a while (reading what the client
        # sends), then drop the connection: neither the wait nor the drop
        # confirms anything.
        try:
            while True:
                frame = await connection.next_frame(
                    "more frames (no RECEIPT given)", Deadline(UNRECEIPTED_WINDOW)
                )
                if frame is None:
                    break
        except DeadlineExceeded:
            pass
        connection.drop(
            "harness drops the connection: the SENDs after the first were never receipted"
        )
        await asyncio.sleep(UNRECEIPTED_WINDOW / 2)
        reported = client.delivered()
        # Unidentified bodies (not the JSON given): one report may stand for
        # the receipted SEND, any second one is too many.
        extra = (
            sorted(set(reported) - {confirmed})
            if confirmed is not None
            else sorted(set(reported))[1:]
        )
        assert not extra, (
            f"only the first SEND (message {confirmed if confirmed is not None else '?'}, from 0) was receipted, "
            f"and the client reported message(s) {extra} delivered too (its DELIVERED=n lines: {reported}); the "
            f"messages of its SENDs: {[client.message_index(f) for f in connection.frames if f.command == 'SEND']}"
        )


async def receipt_batch(
    client: LaunchedClient, connection: ClientConnection, batch: list[Frame], first: bool
) -> tuple[list[int] | None, list[Frame]]:
    """Answer the last SEND of ``batch`` carrying a receipt header, and only
    it, with a RECEIPT; then every message of the SENDs up to it must be
    reported delivered within the read deadline (footnote 2, STOMP-E8).
    Returns the messages it confirmed (None: no SEND of the batch asks for a
    RECEIPT, so none was sent and the batch is let go) and the SENDs after
    it (none carry a receipt header: they wait for the next batch)."""
    ends = [position for position, frame in enumerate(batch) if frame.get("receipt") is not None]
    if not ends:
        connection.conn.trace.event(
            f"none of the {len(batch)} SEND(s) carries a receipt header: no RECEIPT"
        )
        return None, []
    covered, rest = batch[: ends[-1] + 1], batch[ends[-1] + 1 :]
    receipt = covered[-1].get("receipt")
    indexes = [client.message_index(frame) for frame in covered]
    confirmed = sorted({index for index in indexes if index is not None})
    await connection.receipt(
        receipt,
        f"RECEIPT for the last of {len(covered)} unreceipted SEND(s) only "
        f"({receipt!r}; messages {indexes}, from 0): footnote 2 makes it confirm "
        f"all of them (STOMP-E8)",
    )
    if not confirmed:
        connection.conn.trace.event(
            f"none of the {len(covered)} SEND(s) carries a message the client was given "
            "(its JSON body): nothing to judge in this batch"
        )
        return [], rest
    wait = Deadline(client.deadline)
    reported = client.delivered()
    while not set(confirmed) <= set(reported) and not wait.expired:
        await asyncio.sleep(0.1)
        reported = client.delivered()
    if first:
        require_delivered_contract(client, reported, len(confirmed))
    missing = [index for index in confirmed if index not in reported]
    assert not missing, (
        f"the harness answered {len(covered)} SEND(s) (messages {indexes}, from 0) with one RECEIPT, for the last "
        f"(receipt-id:{receipt}), as Swaptacular's own server does (swpt_stomp, erratum STOMP-E8); footnote 2 "
        f"makes it confirm every one of them, and within {wait.seconds:g} s the client reported only "
        f"{sorted(set(reported))} delivered (its DELIVERED=n lines): message(s) {missing} not, so it would wait "
        f"for RECEIPTs that never come; the SEND receipted: {show_frame(covered[-1])}"
    )
    return confirmed, rest


@requirement(
    "stomp.receipt.client.accepts-cumulative-receipt",
    "MUST",
    f'{CONNECTIONS} ("The client MUST consider a message to be successfully delivered, only after a '
    "RECEIPT command has been received from the server, confirming that the message has been "
    'processed"; footnote 2: "Every STOMP RECEIPT command confirms the delivery of all preceding '
    'messages")',
    role="client",
    depends=[INCLUDES_RECEIPT],
    errata=["STOMP-E8"],
    basis="erratum: STOMP-E8 swpt_stomp, the server every node runs, sends one RECEIPT for the last "
    "of the SENDs confirmed together, so a client that counts only the SEND it names never counts "
    "the others",
)
async def test_client_accepts_cumulative_receipt(launched_client):
    """Swaptacular's own server (swpt_stomp) answers SENDs confirmed together
    with one RECEIPT, the last one's (erratum STOMP-E8). The harness reads
    the client's SENDs until it stops sending (BATCH_QUIET without a
    frame), answers only the last of the unreceipted ones with a RECEIPT
    and requires every message of that batch reported delivered within the
    read deadline; then again with what the client sends next, on this
    connection or its next ones, until every message was confirmed or the
    client stops. A client sending one SEND at a time gets a RECEIPT for
    each, and must report each: every batch is judged, of one SEND or
    more."""
    async with launched_client() as client:
        everything = set(range(len(client.messages)))
        confirmed: set[int] = set()
        connection = await client.accept()
        batch: list[Frame] = []
        batches = unidentified = 0
        ended = ""
        idle = Deadline(max(4 * client.deadline, 10.0))
        while not everything <= confirmed:
            try:
                frame = await connection.next_frame(
                    "a frame from the client", Deadline(BATCH_QUIET) if batch else idle
                )
            except DeadlineExceeded:
                if not batch:
                    ended = f"the client sent nothing for {idle.seconds:g} s"
                    break
                done, batch = await receipt_batch(client, connection, batch, first=not batches)
                if done is not None:
                    batches += 1 if done else 0
                    unidentified += 0 if done else 1
                    confirmed.update(done)
                idle = Deadline(max(4 * client.deadline, 10.0))
                continue
            if frame is not None and frame.command != "DISCONNECT":
                idle = Deadline(max(4 * client.deadline, 10.0))
                if frame.command in ("CONNECT", "STOMP") and not connection.connected:
                    await connection.answer_connect(frame)
                elif frame.command == "SEND":
                    batch.append(frame)
                continue
            # The client ended this connection: what it left unreceipted is
            # not judged here (it sends it again, resends-unreceipted-after-drop).
            how = "it closed the connection"
            if frame is not None:
                how = "DISCONNECT"
                if frame.get("receipt") is not None:
                    await connection.receipt(frame.get("receipt"), "RECEIPT for the DISCONNECT")
                await connection.conn.await_close(2.0)
            if batch:
                connection.conn.trace.event(
                    f"{how} with {len(batch)} SEND(s) not receipted: not judged"
                )
                batch = []
            try:
                connection = await client.accept(
                    "the client's next connection", wait=reconnect_window(client)
                )
            except AssertionError as exc:
                ended = f"{how}, then no connection: {str(exc).splitlines()[0]}"
                break
            idle = Deadline(max(4 * client.deadline, 10.0))
        if not batches:
            assert unidentified, f"the client sent no SEND carrying a receipt header ({ended})"
            connection.conn.trace.event(
                "no SEND carried a message the client was given: nothing judged"
            )


@requirement(
    "stomp.receipt.client.resends-unreceipted-after-drop",
    "SHOULD",
    f'{CONNECTIONS} (a message is delivered "only after a RECEIPT", so one whose connection dropped '
    "before its RECEIPT is still to be delivered); Swaptacular Messaging Protocol 2.1, Overview "
    '("Messages may ... be delivered more than once, without causing any problems": sending again is '
    "the remedy; no sentence says MUST resend: SHOULD)",
    role="client",
    depends=[SENDS_EACH],
)
async def test_client_resends_unreceipted_after_drop(launched_client):
    async with launched_client() as client:
        first = await client.accept()
        window = Deadline(max(4 * client.deadline, 10.0))
        dropped = None
        while dropped is None:
            frame = await first.next_frame("the client's first SEND", window)
            assert frame is not None, "the client closed the connection before its first SEND"
            if frame.command in ("CONNECT", "STOMP") and not first.connected:
                await first.answer_connect(frame)
            elif frame.command == "SEND":
                dropped = frame
        first.drop("harness drops the connection before any RECEIPT")
        unreceipted = [f for f in first.frames if f.command == "SEND"]
        connection = await client.accept(
            f"the harness dropped the connection before the RECEIPT of {len(unreceipted)} SEND(s); the client did "
            f"not connect again to send them",
            wait=reconnect_window(client),
        )
        session = await client.serve(connection)
        again = {frame.body for frame in session.sends}
        indexes = {client.message_index(frame) for frame in session.sends} - {None}
        missing = [
            frame
            for frame in unreceipted
            if frame.body not in again and client.message_index(frame) not in indexes
        ]
        assert not missing, (
            f"{len(missing)} SEND(s) of the dropped connection were never receipted and the client's next "
            f"connection did not carry them ({session.ended}; {len(session.sends)} SENDs on it); the first: "
            f"{show_frame(missing[0])}"
        )


@requirement(
    CLIENT_GRAMMAR,
    "MUST",
    'STOMP 1.2, STOMP Frames ("A frame consists of a command, a set of optional headers and an '
    'optional body."); STOMP 1.2, Augmented BNF (frame = command EOL *( header EOL ) EOL *OCTET NULL '
    '*( EOL ); header = header-name ":" header-value); STOMP 1.2, Value Encoding',
    role="client",
    basis="wire-format: the frame of STOMP 1.2's Augmented BNF (command, header lines name:value, "
    "an empty line, the body, NUL; escapes of Value Encoding) that every frame a client sends has",
    grammar=True,
)
async def test_client_sends_well_formed_frames(launched_client, node_grammar):
    """Every frame the client sent in this run, in every case's traffic, is
    a frame of the grammar: the violations the other cases met (each of them
    blocked by this case) and those of its own exchange, the client's
    first connection served as a conformant server until it ends (CONNECT,
    its SENDs, DISCONNECT). Which commands a client may send is
    only-subset-commands' rule: any command is read here."""
    with node_grammar.judging():
        async with launched_client() as client:
            try:
                connection = await client.accept()
            except AssertionError as exc:
                if grammar_violation_in(exc) is not None:
                    raise
                blocked(
                    ROOT,
                    "failed within this case",
                    f"the client made no connection the harness could accept, so it sent no frame: "
                    f"{str(exc).splitlines()[0]}",
                )
            try:
                await client.serve(connection)
            except (AssertionError, ConnectionError) as exc:
                # The client hung up while the harness answered (a close
                # while writing is PeerClosed), or the exchange failed for
                # another case's rule: the frames read until then are judged.
                if grammar_violation_in(exc) is not None:
                    raise
                connection.conn.trace.event(f"the session ended early: {exc}")
            if not connection.frames:
                blocked(
                    ROOT,
                    "failed within this case",
                    "the client's connection carried no frame (it closed first), so there was "
                    "nothing to judge",
                )
