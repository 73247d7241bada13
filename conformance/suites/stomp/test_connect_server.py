"""Connecting, heart-beats and DISCONNECT, target as server (STOMP 1.2
"Connecting", "Heart-beating", "DISCONNECT"; Swaptacular STOMP profile, "A
Subset of the STOMP Protocol", "STOMP Connections", "STOMP Servers Manifest
Files").

The harness's CONNECT carries ``accept-version:1.2``, ``host`` (params
``stomp_host``, default ``/``, the profile's example), and ``login`` and
``passcode`` when the target gives them (params ``login``, credential
``passcode``): a server MAY authenticate with them, and SHOULD NOT require
them (two cases of their own).

Heart-beat timing: STOMP 1.2 says the sender "MUST send new data over the
network connection at least every <n> milliseconds" and that "because of
timing inaccuracies, the receiver SHOULD be tolerant and take into account
an error margin". The harness allows a gap of n plus half of n, at least
:data:`MIN_TOLERANCE` seconds, and watches up to :data:`BEATS_WATCHED`
intervals (fewer when n is long, at least one).
"""

from __future__ import annotations

import secrets
import time

from conformance.core.requirements import not_applicable, requirement
from conformance.core.transport import Deadline, DeadlineExceeded
from reference_impl.stomp.frame import Frame, heart_beat_interval, parse_heart_beat

from .peer import STOMP_VERSION, StompPeer, heartbeat_sender, summary
from .prerequisites import ACCEPTS_BEATS, DISCONNECT_RECEIPT, SESSION, TLS

CONNECTING = "STOMP 1.2, Connecting"
HEART_BEATING = "STOMP 1.2, Heart-beating"
SUBSET = (
    'Swaptacular STOMP profile, A Subset of the STOMP Protocol ("The STOMP 1.2 commands STOMP, CONNECT, '
    'CONNECTED, SEND, RECEIPT, ERROR, and DISCONNECT MUST be fully supported")'
)
MANIFEST = "Swaptacular STOMP profile, STOMP Servers Manifest Files"

HARNESS_BEAT_MS = 500
"""What the harness declares it can send (cx) and wants (cy) in the
heart-beat cases: short, so that a few intervals take seconds."""
BEATS_WATCHED = 3
MAX_WATCH_SECONDS = 30.0
"""Heart-beat watching stops after this many seconds (at least one whole
interval is always watched, however long)."""
MIN_TOLERANCE = 1.0
ACCEPTS_BEATS_SECONDS = 3.0
"""How long the harness sends heart-beats in accepts-heart-beats."""
DEFAULT_IDLE_SECONDS = 12.0
"""How long keeps-idle-connection stays idle (params ``idle_seconds``)."""


async def connect_with(peer: StompPeer, stomp, target, **options) -> Frame:
    return await peer.connect(stomp.connect_headers(target, **options))


def server_heart_beat(connected: Frame) -> tuple[int, int]:
    """(sx, sy) of CONNECTED; (0, 0) when absent ("A missing heart-beat header
    MUST be treated the same way as a heart-beat:0,0 header"). A malformed
    one fails the case that reads it."""
    value = connected.get("heart-beat")
    if value is None:
        return 0, 0
    try:
        return parse_heart_beat(value)
    except ValueError:
        raise AssertionError(
            f"CONNECTED heart-beat:{value!r} is not two integers 'sx,sy' ({HEART_BEATING}: it "
            f'"MUST contain two positive integers separated by a comma"); {summary(connected)}'
        ) from None


@requirement(
    "stomp.connect.server.connect-gets-connected",
    "MUST",
    f'{SUBSET}; {CONNECTING} ("If the server accepts the connection attempt it will '
    'respond with a CONNECTED frame")',
    depends=[TLS],
)
async def test_connect_gets_connected(open_peer, stomp, target):
    peer = await open_peer("CONNECT")
    await connect_with(peer, stomp, target)


@requirement(
    "stomp.connect.server.stomp-command-gets-connected",
    "MUST",
    'STOMP 1.2, CONNECT or STOMP Frame ("STOMP servers MUST handle a STOMP frame in the same manner as a '
    'CONNECT frame"); Swaptacular STOMP profile, footnote 5',
    depends=SESSION,
)
async def test_stomp_command_gets_connected(open_peer, stomp, target):
    peer = await open_peer("STOMP instead of CONNECT")
    await peer.connect(stomp.connect_headers(target), command="STOMP")


@requirement(
    "stomp.connect.server.connected-says-version-1-2",
    "MUST",
    'STOMP 1.2, CONNECTED Frame ("STOMP 1.2 servers MUST set ... version") and Protocol Negotiation ("the '
    'highest protocol version that both the client and server have in common"); Swaptacular STOMP profile, '
    "A Subset of the STOMP Protocol (STOMP 1.2)",
    depends=SESSION,
)
async def test_connected_says_version_1_2(open_peer, stomp, target):
    """The harness offers 1.1 and 1.2; a server of the profile speaks 1.2,
    the highest version in common."""
    peer = await open_peer("CONNECT accept-version:1.1,1.2")
    connected = await connect_with(peer, stomp, target, accept_version="1.1," + STOMP_VERSION)
    version = connected.all("version")
    assert version, f"CONNECTED carries no version header: {summary(connected)}"
    assert version[0] == STOMP_VERSION, (
        f"CONNECTED says version:{version[0]} to a client accepting 1.1 and 1.2; "
        f"the session must use 1.2: {summary(connected)}"
    )


@requirement(
    "stomp.connect.server.error-on-no-common-version",
    "MUST",
    'STOMP 1.2, Protocol Negotiation ("If the client and server do not share any common protocol versions, '
    'then the server MUST respond with an ERROR frame ... and then close the connection")',
    depends=SESSION,
)
async def test_error_on_no_common_version(open_peer, stomp, target):
    """CONNECT accept-version:9.9, a version no server speaks; the same
    CONNECT with 1.2 is connect-gets-connected."""
    peer = await open_peer("CONNECT accept-version:9.9")
    await peer.send_frame(
        Frame("CONNECT", stomp.connect_headers(target, accept_version="9.9")),
        "CONNECT offering only version 9.9",
    )
    await peer.await_error_then_close(
        "a CONNECT whose accept-version (9.9) shares no version with STOMP 1.2"
    )


@requirement(
    "stomp.connect.server.keeps-connect-header-spaces",
    "MUST",
    'STOMP 1.2, Value Encoding ("In STOMP 1.2, clients and servers MUST never trim or pad headers with '
    'spaces"); Protocol Negotiation (accept-version)',
    depends=SESSION,
)
async def test_keeps_connect_header_spaces(open_peer, stomp, target):
    """CONNECT with ``accept-version:1.2 `` and STOMP with ``accept-version:
    1.2``. CONNECTED shows no header of CONNECT back; its version does.
    Read as sent, neither value names a version (``1.2 `` is not ``1.2``),
    so the server answers as to any CONNECT with no version in common
    (ERROR then close; how exactly is error-on-no-common-version's rule,
    not this one's). CONNECTED version:1.2 shows the spaces were dropped,
    as a STOMP 1.0 reading of CONNECT does (ActiveMQ 5.17,
    StompWireFormat.parseHeaders). First a control: a server that answers
    CONNECTED to ``accept-version:9.9`` too reads no version at all, and
    spaces cannot show (not applicable; error-on-no-common-version fails)."""
    control = await open_peer("CONNECT accept-version:9.9 (control)")
    await control.send_frame(
        Frame("CONNECT", stomp.connect_headers(target, accept_version="9.9")),
        "CONNECT offering only version 9.9 (control)",
    )
    answer = await control.next_or_close("the answer to CONNECT accept-version:9.9 (control)")
    if answer is not None and answer.command == "CONNECTED":
        not_applicable(
            "the server answers CONNECTED to accept-version:9.9 too (error-on-no-common-version's "
            "rule): it reads no version from the header, so spaces around one cannot show"
        )
    for command, accept in (("CONNECT", STOMP_VERSION + " "), ("STOMP", " " + STOMP_VERSION)):
        peer = await open_peer(f"{command} accept-version:{accept!r}")
        await peer.send_frame(
            Frame(command, stomp.connect_headers(target, accept_version=accept)),
            f"{command} whose accept-version is {accept!r}",
        )
        answer = await peer.next_or_close(f"the answer to {command} accept-version:{accept!r}")
        assert answer is None or answer.command != "CONNECTED", (
            f"{command} with accept-version:{accept!r} got {summary(answer)}: the server read the "
            f"value without its spaces (as {STOMP_VERSION!r}); a value read as sent names no version "
            "it speaks"
        )


@requirement(
    "stomp.connect.server.does-not-require-login",
    "SHOULD",
    f'{MANIFEST} ("Servers SHOULD NOT require clients to include a login header")',
    depends=SESSION,
)
async def test_does_not_require_login(open_peer, stomp, target):
    peer = await open_peer("CONNECT without login")
    await connect_with(peer, stomp, target, login=False)


@requirement(
    "stomp.connect.server.does-not-require-passcode",
    "SHOULD",
    f'{MANIFEST} ("Servers SHOULD NOT require clients to include a passcode header")',
    depends=SESSION,
)
async def test_does_not_require_passcode(open_peer, stomp, target):
    peer = await open_peer("CONNECT without passcode")
    await connect_with(peer, stomp, target, passcode=False)


@requirement(
    "stomp.connect.server.disconnect-gets-receipt",
    "MUST",
    f'STOMP 1.2, DISCONNECT and RECEIPT ("A RECEIPT frame is sent from the server to the client once a '
    f'server has successfully processed a client frame that requests a receipt"); {SUBSET}',
    depends=SESSION,
)
async def test_disconnect_gets_receipt(connected_peer):
    peer = await connected_peer("DISCONNECT with receipt")
    await peer.disconnect(f"disconnect-{secrets.token_hex(4)}")


def watch_window(interval_ms: int) -> float:
    interval = interval_ms / 1000
    return max(interval, min(BEATS_WATCHED * interval, MAX_WATCH_SECONDS))


def tolerance(interval_ms: int) -> float:
    return max(interval_ms / 2000, MIN_TOLERANCE)


async def stay_quiet(peer: StompPeer, seconds: float, what: str) -> None:
    """Read for ``seconds``: heart-beats are fine; a frame or a close fails
    the case, naming ``what`` the harness was doing."""
    window = Deadline(seconds)
    try:
        frame = await peer.next_or_close(f"nothing but heart-beats ({what})", window)
    except DeadlineExceeded:
        return
    since = seconds - window.remaining()
    if frame is None:
        alert = f" (TLS alert {peer.conn.tls_alert})" if peer.conn.tls_alert else ""
        raise AssertionError(f"the target closed the connection{alert} {since:.1f} s into {what}")
    raise AssertionError(f"the target sent {summary(frame)} {since:.1f} s into {what}")


@requirement(
    "stomp.connect.server.sends-heart-beats",
    "MUST",
    f'{HEART_BEATING} ("the sender MUST send new data over the network connection at least every <n> '
    'milliseconds"; "if the sender has no real STOMP frame to send, it MUST send an end-of-line")',
    depends=[*SESSION, ACCEPTS_BEATS],
    errata=["STOMP-E1"],
)
async def test_sends_heart_beats(connected_peer):
    """heart-beat:500,500 (the harness sends its own, so that no server has
    a reason to drop it meanwhile); the server's beats are due every
    MAX(sx, 500) ms when sx is not 0. A server declaring sx = 0 sends none,
    which STOMP allows: not applicable."""
    peer = await connected_peer("heart-beat:500,500", heart_beat=(HARNESS_BEAT_MS, HARNESS_BEAT_MS))
    assert peer.connected is not None
    start = peer.arrivals[-1] if peer.arrivals else time.monotonic()
    sx, _ = server_heart_beat(peer.connected)
    interval = heart_beat_interval(sx, HARNESS_BEAT_MS)
    if not interval:
        not_applicable(
            f"the target's CONNECTED declares it sends no heart-beats "
            f"(heart-beat:{peer.connected.get('heart-beat') or 'absent'}), which STOMP 1.2 allows"
        )
    beats = heartbeat_sender(peer, HARNESS_BEAT_MS / 2000)
    try:
        window = watch_window(interval) + tolerance(interval)
        await stay_quiet(
            peer, window, f"watching the target's heart-beats (due every {interval} ms)"
        )
    finally:
        beats.cancel()
    end = time.monotonic()
    allowed = interval / 1000 + tolerance(interval)
    gaps = peer.gaps(start, end)
    longest = max(gaps)
    assert longest <= allowed, (
        f"heart-beats agreed every {interval} ms (CONNECTED heart-beat:{peer.connected.get('heart-beat')}, ours "
        f"{HARNESS_BEAT_MS},{HARNESS_BEAT_MS}), but the target sent nothing for {longest:.2f} s (allowed with the "
        f"error margin: {allowed:.2f} s); gaps between its data in {end - start:.1f} s: "
        f"{', '.join(f'{g:.2f}' for g in gaps)}; heart-beats received: {peer.heartbeats}"
    )


@requirement(
    "stomp.connect.server.accepts-heart-beats",
    "MUST",
    f"{SUBSET}; {HEART_BEATING} (a part of Connecting: declared in CONNECT and CONNECTED; heart-beats "
    'are EOLs: "if the sender has no real STOMP frame to send, it MUST send an end-of-line"); STOMP '
    "1.2, Augmented BNF (a frame may be followed by EOLs)",
    depends=[*SESSION, DISCONNECT_RECEIPT],
    errata=["STOMP-E1"],
)
async def test_accepts_heart_beats(connected_peer):
    """heart-beat:500,0: the harness sends an EOL every 250 ms for a few
    seconds (twice as often as it declared, which satisfies any agreed
    interval, since that is at least 500 ms). The server must take them as heart-beats:
    no ERROR, no close; then DISCONNECT receipt:... still gets its RECEIPT."""
    peer = await connected_peer("heart-beat:500,0", heart_beat=(HARNESS_BEAT_MS, 0))
    assert peer.connected is not None
    server_heart_beat(peer.connected)
    beats = heartbeat_sender(peer, HARNESS_BEAT_MS / 2000)
    try:
        await stay_quiet(
            peer,
            ACCEPTS_BEATS_SECONDS,
            f"the harness's heart-beats (an EOL every {HARNESS_BEAT_MS // 2} ms)",
        )
    finally:
        beats.cancel()
    try:
        await peer.disconnect(
            f"after-beats-{secrets.token_hex(4)}", "DISCONNECT after the heart-beats"
        )
    except AssertionError as exc:
        raise AssertionError(f"after {ACCEPTS_BEATS_SECONDS:g} s of heart-beats: {exc}") from None


@requirement(
    "stomp.connect.server.missing-heart-beat-means-none",
    "MUST",
    f'{HEART_BEATING} ("A missing heart-beat header MUST be treated the same way as a "heart-beat:0,0" '
    'header, that is: the party cannot send and does not want to receive heart-beats")',
    depends=[*SESSION, DISCONNECT_RECEIPT],
)
async def test_missing_heart_beat_means_none(connected_peer, target):
    """A CONNECT without heart-beat header promises no heart-beats: the
    harness then sends nothing at all for ``idle_seconds`` (default 12 s),
    and DISCONNECT receipt:... must get its RECEIPT on the same connection.
    A server that reads the missing header as some default interval of the
    client's drops the silent session (the other cases end theirs sooner
    than such an interval)."""
    idle = float(target.params.get("idle_seconds", DEFAULT_IDLE_SECONDS))
    peer = await connected_peer("no heart-beat header, silent")
    await stay_quiet(
        peer, idle, "a silent session whose CONNECT had no heart-beat header (heart-beat:0,0)"
    )
    try:
        await peer.disconnect(
            f"after-silence-{secrets.token_hex(4)}", "DISCONNECT after the silence"
        )
    except AssertionError as exc:
        raise AssertionError(
            f"after {idle:g} s of silence on a session without heart-beats: {exc}"
        ) from None


@requirement(
    "stomp.connect.server.keeps-idle-connection",
    "SHOULD",
    'Swaptacular STOMP profile, STOMP Connections ("The client MAY decide to keep the STOMP connection open '
    "for any length of time, and the server SHOULD NOT terminate the connection unilaterally, without a "
    'reason")',
    depends=[*SESSION, ACCEPTS_BEATS, DISCONNECT_RECEIPT],
)
async def test_keeps_idle_connection(connected_peer, target):
    """An idle session that honours the heart-beats it agreed is no reason
    to drop: the harness declares heart-beat:4000,0, sends an EOL every half
    of the agreed interval MAX(4000, sy) (none if the server wants none),
    and nothing else for ``idle_seconds`` (default 12 s); then DISCONNECT
    receipt:... must get its RECEIPT on the same connection."""
    idle = float(target.params.get("idle_seconds", DEFAULT_IDLE_SECONDS))
    cx = 4000
    peer = await connected_peer("idle with heart-beats", heart_beat=(cx, 0))
    assert peer.connected is not None
    _, sy = server_heart_beat(peer.connected)
    interval = heart_beat_interval(cx, sy)
    beats = heartbeat_sender(peer, interval / 2000) if interval else None
    try:
        await stay_quiet(
            peer,
            idle,
            f"an idle session (heart-beats agreed every {interval or 'never'} ms"
            f"{', sent every ' + str(interval // 2) + ' ms' if interval else ''})",
        )
    finally:
        if beats is not None:
            beats.cancel()
    try:
        await peer.disconnect(
            f"after-idle-{secrets.token_hex(4)}", "DISCONNECT after the idle time"
        )
    except AssertionError as exc:
        raise AssertionError(f"after {idle:g} s idle: {exc}") from None
