"""RPC protocol, target as responder (SSB guide, "RPC protocol")."""

from __future__ import annotations

import json

from conformance.core.node_grammar import NodeGrammarViolation
from conformance.core.requirements import blocked, not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded
from reference_impl.ssb.keys import Keypair

from .prerequisites import (
    HANDSHAKE,
    READS_STREAM,
    SESSION,
    STREAM_END,
    UNKNOWN_ASYNC_ERROR,
    reading_the_feed,
)
from .session import describe, error_body

UNKNOWN_PROCEDURE = ["conformanceHarness", "noSuchProcedure"]
LIVE = "ssb.history.server.live-sends-new-messages"
"""The only way the guide gives to keep a stream open; its case needs the
``publish`` capability, so the abort case checks the stream stays open itself."""


def author_of(msg) -> str | None:
    """The author of a createHistoryStream item (keys true or false), or
    None. A JSON body that does not parse is the grammar case's (raised:
    the reading case is blocked by it), not an item of another feed."""
    try:
        body = msg.json()
    except NodeGrammarViolation:
        raise
    except Exception:
        return None
    if isinstance(body, dict) and isinstance(body.get("value"), dict):
        body = body["value"]
    return body.get("author") if isinstance(body, dict) else None


@requirement(
    "ssb.rpc.server.responses-use-negated-request-number",
    "MUST",
    'SSB guide, RPC protocol, Source example ("the same request number ... but negative")',
    depends=[HANDSHAKE],
    basis="wire-format: RPC header request number (rpc_header figure): a response carries its request's number negated",
)
async def test_responses_use_negated_request_number(open_session, server_feed_id):
    """Two requests in flight at once: each answer carries minus its request's
    number. The two are told apart by what they ask for -- the target's own
    feed (its messages) and a feed it does not hold (none) -- and by no
    option such as ``limit``, so that a bug in an option cannot show up here
    as a numbering failure. This is the root of every case that reads an
    answer.

    Only the answers that came are judged: each stream is read until its end
    or the case's deadline, so a stream that never ends (a rule of
    ssb.rpc.server.ends-source-stream-with-true) costs time here, not the
    verdict. What must have come is one message of the target's own feed."""
    session = await open_session()
    requests = [
        session.request_message(["createHistoryStream"], [{"id": feed}])
        for feed in (server_feed_id, Keypair.generate().feed_id)
    ]
    # Two boxes in one write, so that both requests are in flight before
    # the target answers the first (one box each: several RPC messages in
    # one box are a rule of their own).
    await session.send_boxes_in_one_write(
        requests,
        [f"RPC request {msg.req}: {json.dumps(msg.json())}" for msg in requests],
        f"requests {requests[0].req} and {requests[1].req}, one box each, in one write",
    )
    own, other = requests[0].req, requests[1].req
    with reading_the_feed():
        answers, ends = await session.answers_until_end(
            {
                own: f"the answers to request {own} (the target's own feed)",
                other: f"the answers to request {other} (a feed the target does not hold)",
            }
        )
    own_items = answers[own]
    misplaced = [describe(m) for m in answers[other] if author_of(m) == server_feed_id]
    assert not misplaced, (
        f"messages of the target's own feed (request {own}) came on -{other}, the answer to "
        f"request {other} for another feed: {misplaced[:3]}"
    )
    if not own_items:
        elsewhere = [describe(m) for m in answers[other] + session.inbox if m.req < 0][:5]
        got = describe(ends[own]) if own in ends else f"nothing within {session.conn.deadline} s"
        raise AssertionError(
            f"request {own} for the target's own feed got no message on -{own} ({got}); "
            f"answers on other request numbers meanwhile: {elsewhere or 'none'}"
        )
    foreign = [describe(m) for m in own_items if author_of(m) != server_feed_id]
    assert not foreign, (
        f"answers on -{own} that are not messages of the target's feed: {foreign[:3]}"
    )
    # Positive numbers are the target's own requests to us, which a peer may make at any time.
    strays = [describe(m) for m in session.inbox if m.req < 0 and m.req not in (-own, -other)]
    assert not strays, f"target answered on request numbers it was not asked on: {strays}"


OWN_REQUESTS_WINDOW = 1.0
"""Seconds the harness reads on after its request's stream ended, for the
target's own requests (a peer answers the other's first call with its own)."""


@requirement(
    "ssb.rpc.server.numbers-own-requests-from-1",
    "SHOULD",
    'SSB guide, RPC protocol, Source example ("The other peer will also use request number 1 for their '
    'first request"; "The next request made by this peer will be numbered 2")',
    depends=READS_STREAM,
    basis="inference: the Source example numbers a peer's first request 1 and its next 2; a responder answers whatever number it is given, so the numbering is the network's convention, not a layout a reader depends on",
)
async def test_numbers_own_requests_from_1(open_session, server_feed_id):
    """Peers make requests to each other (ssb-server and the reference node
    call createHistoryStream back once the peer's first request came): the
    target's own requests, positive request numbers, must be numbered 1, 2,
    ... in the order they come. Not applicable to a target that makes none."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id}])
    with reading_the_feed():
        await session.collect_stream(req, f"the answers to request {req} (the target's own feed)")
    window = Deadline(OWN_REQUESTS_WINDOW)
    while not window.expired:
        try:
            if not await session._pump(window.remaining()):
                break
        except DeadlineExceeded:
            break
    numbers: list[int] = []
    for msg in session.inbox:
        if msg.req > 0 and msg.req not in numbers:
            numbers.append(msg.req)
    if not numbers:
        not_applicable(
            f"the target made no request of its own within {OWN_REQUESTS_WINDOW:g} s of the end of the "
            "harness's stream, so its numbering does not show"
        )
    assert numbers == list(range(1, len(numbers) + 1)), (
        f"the target's own requests carried the request numbers {numbers} in the order they came; its first must "
        f"be 1 and each next one more: {[describe(m) for m in session.inbox if m.req > 0][:3]}"
    )


@requirement(
    "ssb.rpc.server.source-responses-set-stream-flag",
    "MUST",
    'SSB guide, RPC protocol, Source example ("their RPC headers have the stream flag set")',
    depends=SESSION,
    basis="wire-format: RPC header stream flag (rpc_header figure): set on every message of a stream",
)
async def test_source_responses_set_stream_flag(open_session, server_feed_id):
    """Every answer that came to a source request, its end too if it came
    (whether the stream ends is ssb.rpc.server.ends-source-stream-with-true's
    rule: a stream still open at the deadline is judged by what came)."""
    session = await open_session()
    req = await session.request(["createHistoryStream"], [{"id": server_feed_id}])
    with reading_the_feed():
        answers, ends = await session.answers_until_end(
            {req: f"the answers to request {req} (the feed)"}
        )
    got = answers[req] + ([ends[req]] if req in ends else [])
    assert got, (
        f"request {req} for the target's own feed got no answer within {session.conn.deadline} s"
    )
    bad = [describe(m) for m in got if not m.stream]
    assert not bad, f"responses to a source request without the stream flag: {bad}"


@requirement(
    "ssb.rpc.server.ends-source-stream-with-true",
    "MUST",
    'SSB guide, RPC protocol, Source example ("both the stream and end/err flags set and a JSON body of true")',
    depends=SESSION,
    basis="wire-format: the closing message of a source stream, Source example: stream and end/err flags set, JSON body true",
)
async def test_ends_source_stream_with_true(open_session, server_feed_id):
    """Two finished source streams, each read to its end: the target's own
    feed (its messages, then the end) and a feed it does not hold (no
    message: the end alone; live is not given, so the stream is finished once
    the existing messages, here none, are sent)."""
    session = await open_session()
    for feed, what in (
        (server_feed_id, "the target's own feed"),
        (Keypair.generate().feed_id, "a feed the target does not hold (an empty stream)"),
    ):
        req = await session.request(["createHistoryStream"], [{"id": feed}])
        with reading_the_feed():
            answers, ends = await session.answers_until_end({req: f"the stream of {what}"})
        items = answers[req]
        assert req in ends, (
            f"the source stream of {what} (request {req}) did not end within {session.conn.deadline} s: "
            f"{len(items)} item(s) came{', the last ' + describe(items[-1])[:300] if items else ''}; a finished "
            "source stream must be closed with stream+end and JSON body true"
        )
        end = ends[req]
        assert (
            end.stream and end.end and end.body_type.name == "JSON" and end.body.strip() == b"true"
        ), (
            f"the closing message of a finished source stream ({what}) must be stream+end with JSON body true; "
            f"got {describe(end)}"
        )


@requirement(
    "ssb.rpc.server.closes-stream-on-requester-abort",
    "MUST",
    'SSB guide, RPC protocol, Source example ("to abort a stream ... the responder closes their own end")',
    depends=SESSION,
    basis="plain-words",
)
async def test_closes_own_end_when_requester_aborts(open_session, server_feed_id, deadline):
    """A live stream aborted by the requester: the responder answers with its end.
    The stream must first be seen open: an end the target sends on its own
    (a ``live`` it does not keep) would look like an answer to the abort."""
    session = await open_session()
    req = await session.request(
        ["createHistoryStream"], [{"id": server_feed_id, "live": True, "old": False}]
    )
    early = await session.quiet_for(req, min(0.5, deadline / 2))
    ended = [describe(m) for m in early if m.end]
    if ended:
        blocked(
            LIVE,
            "failed within this case",
            f"the target ended a live stream by itself before any abort ({ended[0]}), so no end can "
            "be told apart as the answer to an abort",
        )
    await session.end_stream(req, f"RPC end of stream {req}: requester aborts a live stream")
    # One deadline for the closing message, however much live data crossed
    # our end on the wire first (that is fine, a stream that goes on is not).
    closing = Deadline(session.conn.deadline)
    crossed = 0
    try:
        msg = await session.next_message(req, "closing message from the responder", closing)
        while not msg.end:
            crossed += 1
            msg = await session.next_message(req, "closing message from the responder", closing)
    except DeadlineExceeded as exc:
        raise AssertionError(
            f"{exc} after the requester aborted the stream; {crossed} more stream item(s) "
            "came meanwhile"
        ) from None
    assert msg.stream, f"closing message lacks the stream flag: {describe(msg)}"


@requirement(
    "ssb.rpc.server.unknown-async-procedure-gets-error",
    "SHOULD",
    'SSB guide, RPC protocol, Error example ("the response has the end/err flag set")',
    depends=SESSION,
    basis="inference: the guide never names an unknown procedure an error, but a responder that cannot perform the call has no value to return, and the Error example answers a failed call with the end/err flag set",
)
async def test_unknown_async_procedure_gets_error(open_session):
    session = await open_session()
    req = await session.request(UNKNOWN_PROCEDURE, [], "async")
    msg = await session.next_message(req, "the answer to an unknown async procedure")
    assert msg.end, f"an error answer must set the end/err flag; got {describe(msg)}"
    assert not msg.stream, (
        f"the answer to an async request must not set the stream flag: {describe(msg)}"
    )


@requirement(
    "ssb.rpc.server.unknown-source-procedure-ends-stream-with-error",
    "SHOULD",
    'SSB guide, RPC protocol, Error example ("For source type procedures an error will also end the stream")',
    depends=[*SESSION, STREAM_END],
    basis="inference: the guide never names an unknown procedure an error, but a responder that cannot perform the call has nothing to stream, and 'For source type procedures an error will also end the stream'",
)
async def test_unknown_source_procedure_ends_stream_with_error(open_session):
    session = await open_session()
    req = await session.request(UNKNOWN_PROCEDURE, [], "source")
    msg = await session.next_message(req, "the answer to an unknown source procedure")
    assert msg.end, f"the stream must end with the end/err flag; got {describe(msg)}"
    body = error_body(msg)
    assert body is not True, (
        f"an unknown procedure must end the stream with an error, not a normal end: {describe(msg)}"
    )


@requirement(
    "ssb.rpc.server.error-body-names-the-error",
    "SHOULD",
    "SSB guide, RPC protocol, Error example (JSON body with name and message)",
    depends=[*SESSION, UNKNOWN_ASYNC_ERROR],
    basis="inference: the Error example's body has name and message, which 'The reference Scuttlebot implementation also includes'; a requester learns what failed only from them",
)
async def test_error_body_has_name_and_message(open_session):
    session = await open_session()
    req = await session.request(UNKNOWN_PROCEDURE, [], "async")
    msg = await session.next_message(req, "the answer to an unknown procedure")
    body = error_body(msg)
    assert (
        isinstance(body, dict)
        and isinstance(body.get("message"), str)
        and isinstance(body.get("name"), str)
    ), f"error body should be a JSON object with string name and message; got {describe(msg)}"


@requirement(
    "ssb.rpc.server.serves-after-an-error",
    "SHOULD",
    'SSB guide, RPC protocol ("can interleave multiple requests"), Error example',
    depends=[*SESSION, STREAM_END, UNKNOWN_ASYNC_ERROR],
    basis="inference: an error answers one request ('the response has the end/err flag set'), and the RPC protocol 'can interleave multiple requests', so one failed call gives no reason to stop serving the others",
)
async def test_session_continues_after_an_error(open_session, server_feed_id):
    """An error answers one request; it does not end the session."""
    session = await open_session()
    bad = await session.request(UNKNOWN_PROCEDURE, [], "async")
    await session.next_message(bad, "the error for the unknown procedure")
    good = await session.request(["createHistoryStream"], [{"id": server_feed_id, "limit": 1}])
    items, end = await session.collect_stream(good, "the feed, requested after an error")
    assert items, f"after an error the target no longer serves requests: {describe(end)}"
