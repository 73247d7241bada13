"""The zoo of hostile targets, certified through the real CLI.

For every fake target of tests/hostile/fake_targets.py (SSB over TCP, BTP
over WebSocket: flood, slowloris, reset mid-frame, gigantic length prefixes,
a 100 MiB message, a stream that never ends, valid then garbage; STOMP: flood
or slowloris after a valid mutual TLS 1.3 handshake), `conformance certify` runs in
a fresh measuring subprocess with a small --deadline, and:

- the run ends within a bound computed from its cases and the deadline;
- no case ends in `error`: the cases that met wrong bytes are `failed`, and
  their message shows the bytes (hex of a bounded prefix) that the trace
  confirms the target sent;
- traces are bounded in size and say how many bytes they did not keep;
- the harness's peak resident memory stays under 150 MB.
"""

from __future__ import annotations

import re

import pytest

from conformance.core.websocket import MAX_MESSAGE_SIZE

from conformance.suites.stomp.prerequisites import CONNECTED as STOMP_CONNECTED_CASE
from conformance.suites.stomp.prerequisites import SERVER_GRAMMAR as STOMP_SERVER_GRAMMAR
from conformance.suites.stomp.prerequisites import TLS as STOMP_TLS_CASE

from .fake_targets import BTP_BEHAVIOURS, SSB_BEHAVIOURS, STOMP_BEHAVIOURS, STOMP_CONNECTED
from .zoo import certify_hostile

DEADLINE = 1.0
AUTH_TIMEOUT = 1.0  # params.auth_timeout of the BTP fakes (fake_targets.targets_toml)
MESSAGES_AWAITED_PER_CASE = 6
"""A case awaits a few messages in turn (a request's answer, the end of a
stream, a close), each within the deadline; no case awaits more than this many."""
STARTUP_SECONDS = 40.0
"""Interpreter, pytest and the fake's start, under a loaded machine."""
MAX_PEAK_RSS_MB = 150
MAX_TRACE_FILE_BYTES = 2 << 20
"""A trace keeps 64 KiB per direction (four directions at most), rendered as
a hex dump: well under 2 MB whatever the target sent."""

HEX = r"[0-9a-f]{16,}"

EXPECTED = {
    # (protocol, behaviour): (the case that meets the bad bytes first today,
    # the pattern the failure message of the case that meets them must match)
    ("ssb", "flood"): (
        "ssb.shs.server.completes-valid-handshake",
        rf"msg2 \(server hello\) does not verify .*; bytes: {HEX}",
    ),
    ("ssb", "flood-on-error"): (
        "ssb.shs.server.rejects-garbage-msg1",
        r"after a random msg1, the target wrote 1048576 byte\(s\) instead of hanging up "
        rf"silently: {HEX}",
    ),
    ("ssb", "slowloris"): (
        "ssb.shs.server.completes-valid-handshake",
        rf"no msg2 \(server hello, 64 bytes\) within {DEADLINE} s: received [1-3] of 64 bytes \([0-9a-f]+\)",
    ),
    ("ssb", "reset-mid-frame"): (
        "ssb.rpc.server.responses-use-negated-request-number",
        r"target closed the connection while the case awaited .*in the middle of a box "
        r"\(\d+ more bytes were due\); the last bytes it sent: [0-9a-f]{40}",
    ),
    ("ssb", "huge-rpc-length"): (
        "ssb.rpc.server.responses-use-negated-request-number",
        r"RPC stream is malformed \(body length exceeds limit: 4294967295 > \d+\); "
        r"bytes: 0affffffff",
    ),
    ("ssb", "huge-box-length"): (
        "ssb.rpc.server.responses-use-negated-request-number",
        rf"box stream does not decrypt \(body length exceeds 4096\); bytes: {HEX}",
    ),
    ("ssb", "endless-stream"): (
        "ssb.rpc.server.ends-source-stream-with-true",
        rf"did not end within {DEADLINE} s: \d+ item\(s\) came",
    ),
    ("ssb", "valid-then-garbage"): (
        "ssb.rpc.server.responses-use-negated-request-number",
        rf"box stream does not decrypt \(header authentication failed\); bytes: {HEX}",
    ),
    ("btp", "flood"): (
        "btp.auth.server.accepts-valid-auth",
        rf"unreadable packet .*; bytes: {HEX}",
    ),
    ("btp", "flood-on-error"): (
        "btp.auth.server.rejects-wrong-token",
        r"frame with 1048512 bytes exceeds limit of \d+ bytes\), over the harness's bound .*"
        r"closed the connection with close code 1009.*; bytes: 827f00000000000fffc0$",
    ),
    ("btp", "slowloris"): ("btp.auth.server.accepts-valid-auth", rf"within {DEADLINE} s"),
    ("btp", "reset-mid-frame"): (
        "btp.auth.server.accepts-valid-auth",
        r"target closed the WebSocket \(close code 1006\)",
    ),
    ("btp", "huge-frame"): (
        "btp.auth.server.accepts-valid-auth",
        r"frame with 4294967296 bytes exceeds limit of \d+ bytes\), over the harness's bound .*"
        r"closed the connection with close code 1009.*; bytes: 827f0000000100000000$",
    ),
    ("btp", "huge-oer-length"): (
        "btp.auth.server.accepts-valid-auth",
        r"envelope of 4294967295 bytes.*; bytes: 01[0-9a-f]{8}84ffffffff",
    ),
    # The fake's own Messages are requests (answered by the harness, never
    # taken for an answer): what it never sends is the answer to the probe.
    ("btp", "endless-stream"): (
        "btp.flow.server.response-carries-request-id",
        r"no the answer to a Message with request id 0xdeadbeef among 100 packets",
    ),
    ("btp", "valid-then-garbage"): (
        "btp.flow.server.response-carries-request-id",
        rf"unreadable packet .*; bytes: {HEX}",
    ),
    ("btp", "huge-message"): (
        "btp.auth.server.accepts-valid-auth",
        r"frame header announcing a 104857600-byte message .*over the harness's bound of "
        r"65536 bytes on a BTP packet \(MAX_PACKET_SIZE; BTP itself sets no size\); the harness "
        r"refused the message from that header, closed the connection with close code 1009 "
        r"\(message too big\) and stopped reading \((\d+) raw byte\(s\) read on this "
        r"connection in all\)\. The frame header; bytes: 827f0000000006400000$",
    ),
    # STOMP: the mutual TLS 1.3 handshake completes (the fake requires the
    # harness's certificate), then garbage: the TLS case passes. Random
    # bytes break a bound of the harness's first (more than 64 header lines
    # before an empty one: the case that reads the answer to CONNECT fails)
    # or the grammar (a header block that is not UTF-8: the grammar case
    # fails, and that case is blocked by it), as the reads happen to cut them.
    ("stomp", "flood"): (
        STOMP_CONNECTED_CASE,
        r"(target sent a frame beyond the harness's bounds where the CONNECTED frame answering "
        r"CONNECT was due \(.+\)|a frame that breaks the STOMP 1\.2 frame grammar where the "
        r"CONNECTED frame answering CONNECT was due: .+); bytes: "
        rf"{HEX}",
    ),
    ("stomp", "slowloris"): (
        STOMP_CONNECTED_CASE,
        r"no the CONNECTED frame answering CONNECT: the target sent "
        rf"(\d+) byte\(s\), no complete frame within {DEADLINE:g} s: "
        r"([0-9a-f]+)$",
    ),
}
STOMP_NEGATIVE_TLS_CASES = (
    "stomp.tls.server.refuses-tls-1-2",
    "stomp.tls.server.requires-client-certificate",
    "stomp.tls.server.refuses-untrusted-client-certificate",
)
"""Refusals the STOMP fakes make as they must: they depend on the handshake alone, and pass."""

ZOO = (
    [("ssb", b) for b in SSB_BEHAVIOURS]
    + [("btp", b) for b in BTP_BEHAVIOURS]
    + [("stomp", b) for b in STOMP_BEHAVIOURS]
)
assert set(ZOO) == set(EXPECTED)


def dumped_bytes(trace_text: str) -> bytes:
    """Every byte of the hex dumps in a rendered trace, concatenated."""
    rows = re.findall(r"^    [0-9a-f]{8}  ((?:[0-9a-f*]{2} ?)+)", trace_text, flags=re.MULTILINE)
    return bytes.fromhex("".join(row.replace("**", "00").replace(" ", "") for row in rows))


def case_bound(protocol: str) -> float:
    return MESSAGES_AWAITED_PER_CASE * DEADLINE + (AUTH_TIMEOUT if protocol == "btp" else 0)


@pytest.mark.parametrize("protocol,behaviour", ZOO, ids=[f"{p}-{b}" for p, b in ZOO])
def test_hostile_target_gets_failure_verdicts_in_bounded_time_and_memory(
    protocol, behaviour, tmp_path
):
    run = certify_hostile(protocol, behaviour, tmp_path, deadline=DEADLINE)
    records = run.records
    assert run.code == 1, run.output[-3000:]
    assert f"{run.target} [{run.target} test, {protocol}]: NOT CONFORMANT" in run.output

    # Bounded time: every case within its bound, the run within the sum.
    ran = [r for r in records if r["outcome"] != "not_applicable"]
    assert ran, run.output[-3000:]
    slow = [(r["case_id"], r["duration_s"]) for r in ran if r["duration_s"] > case_bound(protocol)]
    assert not slow, f"cases over {case_bound(protocol)} s: {slow}"
    run_bound = len(ran) * case_bound(protocol) + STARTUP_SECONDS
    assert run.seconds < run_bound, f"run took {run.seconds:.1f} s, bound {run_bound:.0f} s"

    # Verdicts, never errors.
    errors = [(r["case_id"], r["message"][:300]) for r in records if r["outcome"] == "error"]
    assert not errors, errors
    # The case that met the bad bytes names them in its verdict. Which case
    # meets them first depends on the suite's order and prerequisites, so
    # any case may (the expected one is named for the reader); cases that
    # attribute the bytes to another rule's case are `blocked` by it (e.g. an
    # oversized box met while reading a feed, by the box size rule), and
    # that case, never blocked by itself, is `failed` showing them.
    case_id, pattern = EXPECTED[(protocol, behaviour)]
    assert not [r["case_id"] for r in records if r.get("blocked_by") == r["case_id"]]
    matching = [r for r in records if r["outcome"] == "failed" and re.search(pattern, r["message"])]
    assert matching, (
        case_id,
        pattern,
        [(r["case_id"], r["outcome"], r["message"][:300]) for r in ran if r["outcome"] != "passed"],
    )
    record = matching[0]
    # A failure names its requirement first, with its level and the basis of
    # the level when that is not an upper-case key word ("MUST (wire-format)").
    assert re.match(
        rf"{re.escape(record['case_id'])} \[(MUST|SHOULD|MAY)( \([a-z-]+\))?, ", record["message"]
    )

    # The bytes a violation shows are bytes the target sent (as the trace has
    # them): the grammar case shows those another case read, in its trace.
    # (An offset where the protocol's frames are a byte stream; a BTP
    # packet is a whole WebSocket message, no offset.)
    met_in = re.search(
        r", in ([a-z0-9.-]+)(?:, frame at offset \d+)?\); bytes: ", record["message"]
    )
    trace_text = (
        run.run_dir
        / (
            by_id[met_in.group(1)]["trace_file"]
            if met_in and (by_id := {r["case_id"]: r for r in records})
            else record["trace_file"]
        )
    ).read_text()
    shown = re.search(r"; bytes: ([0-9a-f]{32})", record["message"])
    if shown and behaviour not in ("huge-frame", "flood-on-error"):
        # (a refused frame header is raw framing, not a traced payload)
        assert bytes.fromhex(shown.group(1)) in dumped_bytes(trace_text), (
            shown.group(1),
            trace_text[:3000],
        )

    # Bounded traces, saying what they dropped.
    sizes = run.trace_sizes()
    assert sizes and max(sizes.values()) < MAX_TRACE_FILE_BYTES, sorted(
        sizes.items(), key=lambda kv: -kv[1]
    )[:3]
    if (protocol, behaviour) == ("ssb", "endless-stream"):
        dropped = [
            name
            for name in sizes
            if "further bytes not kept"
            in (run.run_dir / "traces" / run.target / f"{name}.txt").read_text()
        ]
        assert dropped, "a stream that never ends overflows the trace, which must say so"

    if (protocol, behaviour) == ("btp", "huge-message"):
        # Refused from its header, not read to its end: the harness read at
        # most one socket read past the header (the message names the count),
        # the trace holds the header itself, and the fake could write no more
        # than the loopback's socket buffers hold before the harness hung up.
        read = int(re.search(pattern, record["message"]).group(1))
        assert read <= MAX_MESSAGE_SIZE, read
        assert bytes.fromhex("827f0000000006400000") in dumped_bytes(trace_text), trace_text[:3000]
        assert not [
            r["case_id"]
            for r in records
            if "without completing a WebSocket message" in r["message"]
        ]
        wrote = [
            int(n)
            for log in (run.run_dir / "logs").glob(f"{run.target}.*.log")
            for n in re.findall(
                r"^HOSTILE_WROTE (\d+) of 104857610 bytes$", log.read_text(), re.MULTILINE
            )
        ]
        assert wrote and max(wrote) < 16 << 20, wrote

    if protocol == "stomp":
        by_case = {r["case_id"]: r for r in records}
        assert by_case[STOMP_TLS_CASE]["outcome"] == "passed", by_case[STOMP_TLS_CASE]
        for negative in STOMP_NEGATIVE_TLS_CASES:
            assert by_case[negative]["outcome"] == "passed", by_case[negative]
            assert by_case[negative]["depends"] == [STOMP_TLS_CASE]
        # The bytes fail the case that reads the answer to CONNECT (a bound
        # of the harness's) or the grammar case (each connection's garbage
        # is cut its own way, so both may fail); nothing else fails for
        # them: the rest is blocked by one of the two.
        pair = (STOMP_CONNECTED_CASE, STOMP_SERVER_GRAMMAR)
        assert record["case_id"] in pair
        for case in pair:
            assert (
                by_case[case]["outcome"] == "failed" or by_case[case].get("blocked_by") in pair
            ), by_case[case]
        others = [
            (r["case_id"], r["outcome"], r.get("blocked_by"))
            for r in ran
            if r["outcome"] != "passed" and r["case_id"] not in pair
        ]
        assert others and all(o == "blocked" and root in pair for _, o, root in others), others
        if behaviour == "slowloris":
            # The bytes that came are counted and shown: a beginning of the CONNECTED frame it drips.
            count, shown = re.search(pattern, record["message"]).groups()
            assert int(count) == len(bytes.fromhex(shown)) > 0 and STOMP_CONNECTED.startswith(
                bytes.fromhex(shown)
            )
            assert "sent nothing" not in record["message"]

    # Bounded memory.
    assert 0 < run.peak_rss_kb < MAX_PEAK_RSS_MB * 1024, f"peak RSS {run.peak_rss_kb / 1024:.0f} MB"
