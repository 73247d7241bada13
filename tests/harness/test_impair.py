"""The impairment relay (conformance/core/impair.py, docs/impairment.md):
profiles and their refusals, the relay's shaping in both directions (bytes
intact, EOF and resets passed on, seeded draws), every harness connection
through it in both roles, and the verdicts it must not change.

The unit tests wait for events (a connection, bytes, an EOF), never for
time; ``test_reference_verdicts_hold_under_impairment`` (full tier: 20
certifications) certifies every reference node under each of the four
profiles that must change no verdict."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from conformance.core import impair
from conformance.core.impair import Impairment, ImpairmentError, parse_profile, refusal
from conformance.core.transport import TcpConnection, TcpRelay, TcpServer, WireTrace
from conformance.core.websocket import WebSocketConnection, WebSocketServer

from .cli_runner import run_cli

PROTOCOLS = ("ssb", "btp", "stomp", "ripp", "ripplehost")
VERDICT_KEEPING = ("fragment", "coalesce", "delay", "throttle")
"""The profiles under which no verdict may change (issue 25, item 3)."""


@pytest.fixture
def impaired():
    """``impaired("fragment", seed=1)`` activates an impairment for the
    test; it is cleared afterwards."""

    def activate(text: str, seed: int = 1) -> Impairment:
        impairment = Impairment(parse_profile(text), seed)
        impair.activate(impairment)
        impair.begin_case("test")
        return impairment

    yield activate
    impair.activate(None)


# --- profiles -------------------------------------------------------------------------------


def test_profiles_parse_with_their_defaults_and_given_parameters():
    assert parse_profile("fragment").resolved() == {"max": 16, "pauses": 4, "pause_ms": 2}
    delay = parse_profile("delay:ms=200,jitter=50")
    assert (
        delay.text() == "delay:ms=200,jitter=50"
        and delay.get("ms") == 200
        and delay.get("jitter") == 50
    )
    assert parse_profile(" throttle:rate=65536 ").resolved()["rate"] == 65536
    described = Impairment(delay, 123).describe()
    assert described == "delay:ms=200,jitter=50 seed=123"
    assert Impairment.parse(described) == Impairment(delay, 123)
    assert Impairment(parse_profile("fragment"), 7).describe() == "fragment seed=7"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (
            "jam",
            "unknown impairment profile 'jam'; profiles: fragment, coalesce, delay, throttle, stall",
        ),
        ("delay:latency=3", "profile delay has no parameter 'latency'"),
        ("delay:ms", "parameter ms needs a value"),
        ("delay:ms=soon", "ms='soon' is not a number"),
        ("delay:ms=-1", "ms must be at least 0"),
        ("fragment:max=2.5", "max must be a whole number"),
        ("fragment:max=0", "max must be at least 1"),
        ("delay:ms=1,ms=2", "ms given twice"),
        ("throttle:rate=10", "rate must be at least 1024"),
    ],
)
def test_a_bad_profile_is_refused_naming_what_is_wrong(text, complaint):
    with pytest.raises(ImpairmentError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        parse_profile(text)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_default_profiles_and_the_issues_example_are_accepted_for_every_protocol(protocol):
    for text in (*VERDICT_KEEPING, "stall", "delay:ms=200,jitter=50"):
        assert refusal(parse_profile(text), protocol, 3.0) is None, text


def test_a_delay_past_the_read_deadline_is_refused_with_the_reason():
    reason = refusal(parse_profile("delay:ms=900"), "ssb", 3.0)
    assert (
        reason
        and "adds up to 1.85 s to a request and its answer" in reason
        and "read deadline (3 s" in reason
    )
    assert (
        refusal(parse_profile("delay:ms=900"), "ssb", 6.0) is None
    )  # a longer --deadline admits it


def test_a_delay_past_ripps_liveness_window_is_refused_for_ripp_only():
    profile = parse_profile("delay:ms=300")
    reason = refusal(profile, "ripp", 3.0)
    assert reason and "RIPP profile P1/P8" in reason and "0.5 s" in reason
    assert all(refusal(profile, p, 3.0) is None for p in PROTOCOLS if p != "ripp")


def test_a_delay_past_a_btp_targets_auth_timeout_is_refused():
    reason = refusal(parse_profile("delay:ms=200"), "btp", 10.0, {"auth_timeout": 0.6})
    assert reason and "auth_timeout (0.6 s, params.auth_timeout)" in reason
    assert refusal(parse_profile("delay:ms=200"), "btp", 10.0, {"auth_timeout": 30}) is None


def test_a_throttle_too_slow_for_the_largest_timed_message_is_refused():
    reason = refusal(parse_profile("throttle:rate=2048"), "btp", 3.0)
    assert reason and "take up to" in reason and "bytes)" in reason


# --- the shaping: seeded, along the stream ------------------------------------------------


def _cuts(impairment: Impairment, writes: list[bytes]) -> list[int]:
    shape = impairment.shape("case/1/target->harness")
    offsets, at = [], 0
    for data in writes:
        for piece, _ in shape.pieces(data):
            at += len(piece)
            offsets.append(at)
    return offsets


def test_fragment_cut_points_are_byte_offsets_drawn_from_the_seed():
    stream = bytes(range(256)) * 4
    impairment = Impairment(parse_profile("fragment:max=8"), 42)
    whole = _cuts(impairment, [stream])
    # The same stream in other writes: the seed's cuts are the same offsets
    # (a write's end is one more cut).
    halves = _cuts(impairment, [stream[:300], stream[300:]])
    assert set(whole) <= set(halves) and set(halves) - set(whole) <= {300}
    assert whole == _cuts(impairment, [stream])
    assert whole != _cuts(Impairment(impairment.profile, 43), [stream])
    pieces = [b - a for a, b in zip([0] + whole, whole)]
    assert min(pieces) == 1 and max(pieces) <= 8 and sum(pieces) == len(stream)


def test_each_direction_and_connection_draws_on_its_own():
    impairment = Impairment(parse_profile("delay:ms=10,jitter=50"), 5)
    late = [
        impairment.shape(key).lateness
        for key in ("a/1/harness->target", "a/1/target->harness", "a/2/harness->target")
    ]
    draws = [[round(f(), 6) for _ in range(5)] for f in late]
    assert len({tuple(d) for d in draws}) == 3
    assert all(0.010 <= x <= 0.060 for d in draws for x in d)
    again = impairment.shape("a/1/harness->target").lateness
    assert [round(again(), 6) for _ in range(5)] == draws[0]


# --- the relay ------------------------------------------------------------------------------


async def _echo_server():
    """A server echoing every byte, then closing when the client's EOF comes."""

    async def echo(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):  # the test is over
            pass
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("profile", [*VERDICT_KEEPING, "stall:ms=20,every=1"])
async def test_bytes_cross_the_relay_intact_both_ways_and_eof_follows_them(profile, impaired):
    impaired(profile)
    server, port = await _echo_server()
    async with server:
        trace = WireTrace()
        conn = await TcpConnection.open("127.0.0.1", port, trace, deadline=10)
        payload = bytes(i % 251 for i in range(20000))
        for at in range(0, len(payload), 5000):
            await conn.send(payload[at : at + 5000])
        conn.finish_sending()
        assert await conn.receive_exactly(len(payload), "the echo", deadline=20) == payload
        closed, rest = await conn.await_close(10)
        assert closed and rest == b""
        assert "through the impairment relay" in trace.render()
        conn.abort()


async def test_fragment_delivers_a_write_in_pieces(impaired):
    impaired("fragment:max=4,pauses=6,pause_ms=5")
    got = asyncio.get_running_loop().create_future()

    async def one_write(reader, writer):
        writer.write(b"0123456789abcdef")
        await writer.drain()
        await got
        writer.close()

    server = await asyncio.start_server(one_write, "127.0.0.1", 0)
    async with server:
        conn = await TcpConnection.open(
            "127.0.0.1", server.sockets[0].getsockname()[1], WireTrace(), deadline=5
        )
        reads = []
        while sum(map(len, reads)) < 16:
            reads.append(await conn.receive_some())
        got.set_result(None)
        assert b"".join(reads) == b"0123456789abcdef"
        assert len(reads) >= 3 and max(map(len, reads)) <= 12, reads
        conn.abort()


async def test_coalesce_delivers_writes_made_within_its_window_together(impaired):
    impaired("coalesce:ms=200")

    async def three_writes(reader, writer):
        for part in (b"one;", b"two;", b"three;"):
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0)
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(three_writes, "127.0.0.1", 0)
    async with server:
        conn = await TcpConnection.open(
            "127.0.0.1", server.sockets[0].getsockname()[1], WireTrace(), deadline=5
        )
        assert await conn.receive_some() == b"one;two;three;"
        conn.abort()


async def test_delay_and_throttle_take_their_time(impaired):
    server, port = await _echo_server()
    async with server:
        impaired("delay:ms=150,jitter=0")
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=5)
        started = time.monotonic()
        await conn.send(b"ping")
        assert await conn.receive_exactly(4, "the echo") == b"ping"
        assert time.monotonic() - started >= 0.3  # 150 ms each way
        conn.abort()
        impaired("throttle:rate=20000,slice=1000")
        conn = await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=5)
        started = time.monotonic()
        await conn.send(b"x" * 4000)
        await conn.receive_exactly(4000, "the echo")
        # 4000 bytes at 20000 B/s in 1000-byte slices: the last slice leaves
        # 3000/20000 s after the first (both ways overlap: the echo answers
        # slice by slice).
        assert time.monotonic() - started >= 0.15
        conn.abort()


async def test_a_refused_connection_is_refused_as_on_clean_loopback(impaired):
    impaired("delay")
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectionError, match="could not connect"):
        await TcpConnection.open("127.0.0.1", port, WireTrace(), deadline=2)


async def test_a_reset_reaches_the_harness_after_the_bytes_before_it(impaired):
    impaired("delay:ms=50,jitter=0")

    async def write_then_reset(reader, writer):
        writer.write(b"last words")
        await writer.drain()
        await reader.read(1)
        writer.transport.abort()

    server = await asyncio.start_server(write_then_reset, "127.0.0.1", 0)
    async with server:
        conn = await TcpConnection.open(
            "127.0.0.1", server.sockets[0].getsockname()[1], WireTrace(), deadline=5
        )
        assert await conn.receive_exactly(10, "the words") == b"last words"
        await conn.send(b"!")
        closed, rest = await conn.await_close(5)
        assert closed and rest == b""
        conn.abort()


async def test_the_client_role_is_given_the_relays_address(impaired):
    """A TcpServer's ``port`` (what a launched client gets as {peer_port})
    is the relay's, in front of its own listener."""
    impaired("fragment")
    trace = WireTrace()
    async with TcpServer(trace, deadline=5) as server:
        assert server.port != server.listen_port
        reader, writer = await asyncio.open_connection(server.host, server.port)
        conn = await server.accept(5)
        writer.write(b"hello harness")
        assert await conn.receive_exactly(13, "the greeting") == b"hello harness"
        await conn.send(b"hello target")
        assert await reader.readexactly(12) == b"hello target"
        writer.close()
    assert (
        f"the target is given 127.0.0.1:{server.port} through the impairment relay (fragment seed=1)"
        in trace.render()
    )


async def test_websockets_go_through_the_relay_in_both_roles(impaired):
    impaired("fragment:max=3")
    trace = WireTrace()
    async with WebSocketServer(trace, deadline=5) as server:
        client = await WebSocketConnection.open(server.url, WireTrace(), deadline=5)
        accepted = await server.accept(5)
        await client.send(b"\x01" * 300, "to the harness")
        assert await accepted.receive("the message") == b"\x01" * 300
        await accepted.send("back", "to the target")
        assert await client.receive("the answer") == "back"
        await client.close()
    assert (
        f"the target is given {server.url} through the impairment relay (fragment:max=3 seed=1)"
        in trace.render()
    )


async def test_interop_relays_put_both_targets_behind_the_impairment(impaired):
    impaired("coalesce")
    server, port = await _echo_server()
    async with server:
        trace = WireTrace()
        async with TcpRelay("127.0.0.1", port, trace) as relay:
            reader, writer = await asyncio.open_connection(relay.host, relay.port)
            writer.write(b"through both")
            assert await reader.readexactly(12) == b"through both"
            writer.close()
        assert "the client is given" in trace.render()


def test_without_an_impairment_nothing_is_relayed():
    assert (
        impair.active() is None
        and impair.through() == ""
        and impair.slack() == 0 == impair.round_trip()
    )


# --- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--impair", "jam"], "unknown impairment profile 'jam'"),
        (
            ["--impair", "delay:ms=900"],
            "impairment delay:ms=900 refused for ripplehost: it adds up to 1.85 s",
        ),
        (["--impair-seed", "3"], "--impair-seed goes with --impair"),
    ],
)
def test_certify_refuses_a_bad_or_breaking_profile_before_any_case(args, complaint, tmp_path):
    done = run_cli(
        "certify", "--protocol", "ripplehost", "--run-dir", str(tmp_path / "run"), *args, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert complaint in done.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_certification_records_its_impairment_and_seed(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli(
        "certify",
        "--protocol",
        "ripplehost",
        "--run-dir",
        str(run_dir),
        "--impair",
        "fragment",
        "--impair-seed",
        "123",
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "impairment: fragment seed=123" in done.stdout and "--impair-seed 123" in done.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["impairment"] == "fragment seed=123" and summary["verdict"] == "CONFORMANT"
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert records and {r["impairment"] for r in records} == {"fragment seed=123"}
    trace = next((run_dir / "traces" / "reference-ripplehost").glob("*.txt")).read_text()
    assert trace.splitlines()[2] == "impairment: fragment seed=123"


# --- the verdicts it must not change (full tier) ---------------------------------------------


@pytest.mark.parametrize("profile", VERDICT_KEEPING)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reference_verdicts_hold_under_impairment(protocol, profile, tmp_path):
    """Every reference node, through each profile that must change no
    verdict: every case of the suite passes, as on clean loopback."""
    from conformance.mutation import run_mutation
    from conformance.runner import suite_case_ids

    from ..mutation.test_mutation import TEST_PARAMS

    run = run_mutation(
        [protocol],
        [],
        jobs=1,
        work_dir=tmp_path,
        progress=lambda line: None,
        faults=False,
        params=TEST_PARAMS.get(protocol),
        impairment=Impairment(parse_profile(profile), 20261126),
    )
    cert = run.conformant[protocol]
    assert set(cert.records) == set(suite_case_ids(protocol))
    not_passed = {
        case: (r["outcome"], r["message"][:300])
        for case, r in cert.records.items()
        if r["outcome"] != "passed"
    }
    assert not not_passed, not_passed
    assert {r["impairment"] for r in cert.records.values()} == {f"{profile} seed=20261126"}


def test_the_doc_lists_every_profile_with_its_parameters_and_defaults():
    """docs/impairment.md's table of profiles is PROFILES."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "impairment.md").read_text(
        encoding="utf-8"
    )
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in doc.splitlines()
        if line.startswith("| `") and line.count("|") == 4
    }
    assert set(impair.PROFILES) <= set(rows), sorted(rows)
    for name, spec in impair.PROFILES.items():
        for param in spec.params:
            assert f"`{param.name}`" in rows[name], (name, param.name)
            assert f"({param.default:g}" in rows[name], (name, param.name, param.default)


NOT_OBSERVABLE_UNDER = {
    (
        protocol,
        profile,
        "number-replies-by-latest-request",
    ): "two requests are in flight at the node only when both reach it before it answers the first"
    for protocol in ("ssb",)
    for profile in ("fragment", "throttle")
}
"""Faults whose own case cannot see them under a profile, with the reason
the table gives (docs/impairment-results.md, "Differences"): the fault
shows only when the node holds two requests at once, and a network that
delivers the harness's one write of two boxes in pieces lets the node answer
the first before the second arrives. The node is still NOT CONFORMANT
there (accepts-several-rpc-per-box puts both in one box)."""


def test_the_results_table_covers_every_protocol_and_profile_and_every_cell_holds():
    """docs/impairment-results.md (scripts/impairment_matrix.py, with its
    JSON beside it): a row per protocol and verdict-keeping profile, with
    every fault and variant of today's registries counted, and each cell
    holding: the issue's claim that no verdict changes."""
    from pathlib import Path

    from conformance.mutation import registry, variant_specs

    docs = Path(__file__).resolve().parents[2] / "docs"
    rows = json.loads((docs / "impairment-results.json").read_text(encoding="utf-8"))
    table = (docs / "impairment-results.md").read_text(encoding="utf-8")
    by_cell = {(row["protocol"], row["profile"]): row for row in rows}
    for (protocol, profile, fault), why in NOT_OBSERVABLE_UNDER.items():
        assert why in table, (protocol, profile, fault)
    assert set(by_cell) == {
        (protocol, profile) for protocol in PROTOCOLS for profile in VERDICT_KEEPING
    }
    for (protocol, profile), row in by_cell.items():
        assert row["refused"] is None, row
        assert row["faults"] == len(registry(protocol).SPECS), (protocol, profile)
        assert row["variants"] == len(variant_specs(protocol)), (protocol, profile)
        excused = {fault for (p, q, fault) in NOT_OBSERVABLE_UNDER if (p, q) == (protocol, profile)}
        assert row["reference_conformant"], row
        assert {missed["fault"] for missed in row["not_caught"]} <= excused, row
        assert row["caught"] >= row["faults"] - len(excused), row
        assert row["variants_conformant"] == row["variants"], row
        assert (
            f"| {protocol} | {profile} | {row['seed']} | CONFORMANT | {row['caught']}/{row['faults']} "
            f"| {row['variants_conformant']}/{row['variants']} |"
        ) in table, (protocol, profile)
