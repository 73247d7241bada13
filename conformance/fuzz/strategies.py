"""Hypothesis strategies of hostile bytes, shared by the project's own
property tests (tests/stomp/test_server_fuzz.py, tests/ripplehost/
test_node_fuzz.py) and by ``conformance fuzz`` (conformance/fuzz/): valid
messages built with the reference codecs, then mutated (bytes flipped,
inserted, deleted, cut, protocol-special sequences put in), and ways to cut
a byte string into the writes that carry it (message boundaries split or
joined).
"""

from __future__ import annotations

from typing import Sequence

from hypothesis import strategies as st

from reference_impl.ripplehost.frame import encode_message as ripple_message
from reference_impl.stomp.frame import Frame, encode_frame
from reference_impl.stomp.smp import encode_message as smp_message
from reference_impl.stomp.smp import example_message

MUTATIONS = ("flip", "insert", "delete", "truncate", "special")


@st.composite
def mutated(draw, data: bytes, specials: Sequence[bytes], max_mutations: int = 6) -> bytes:
    """``data`` with up to ``max_mutations`` mutations: a bit flipped, bytes
    inserted or deleted, the rest cut off, or one of ``specials`` (the
    protocol's delimiters and numbers) put in."""
    out = bytearray(data)
    for _ in range(draw(st.integers(0, max_mutations))):
        if not out:
            break
        kind = draw(st.sampled_from(MUTATIONS))
        at = draw(st.integers(0, len(out) - 1))
        if kind == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        elif kind == "truncate":
            del out[at:]
        else:
            out[at:at] = draw(st.sampled_from(list(specials)))
    return bytes(out)


def pieces(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (taken modulo its length + 1): the writes
    that carry it, none empty unless ``data`` is."""
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])] or [data]


# --- STOMP (the server's input) ---------------------------------------------------------------

STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"
STOMP_SPECIALS = (
    b"\x00",
    b"\\",
    b"\\t",
    b":",
    b"\r",
    b"\n\n",
    b"content-length:99\n",
    b"\xff\xfe",
    b"heart-beat:1,x\n",
)


def stomp_send_frame(receipt: str, creditor_id: int = 4294967299, *, eol: bytes = b"\n") -> bytes:
    """A SEND the profile accepts: a valid SMP ConfigureAccount message."""
    message = example_message("ConfigureAccount")
    message["creditor_id"] = creditor_id
    return encode_frame(
        Frame(
            "SEND",
            (
                ("destination", "/exchange/smp"),
                ("receipt", receipt),
                ("type", "ConfigureAccount"),
                ("content-type", "application/json"),
                ("persistent", "true"),
            ),
            smp_message(message),
        ),
        eol=eol,
    )


stomp_valid_pieces = st.one_of(
    st.builds(
        lambda r, eol: stomp_send_frame(f"r{r}", eol=eol),
        st.integers(0, 999),
        st.sampled_from([b"\n", b"\r\n"]),
    ),
    st.just(b"\n"),
    st.just(b"\r\n"),
    st.just(b"DISCONNECT\nreceipt:bye\n\n\x00"),
    st.sampled_from(
        [b"SUBSCRIBE\nid:0\ndestination:/q\n\n\x00", b"SEND\nreceipt:x\n\n\x00", STOMP_CONNECT]
    ),
)


@st.composite
def stomp_mutated_streams(draw) -> bytes:
    """A session's bytes (CONNECT, then valid pieces), mutated."""
    data = STOMP_CONNECT + b"".join(draw(st.lists(stomp_valid_pieces, max_size=8)))
    return draw(mutated(data, STOMP_SPECIALS, 6))


stomp_streams = st.one_of(
    stomp_mutated_streams(),
    st.binary(max_size=2048),
    st.builds(lambda b: STOMP_CONNECT + b, st.binary(max_size=2048)),
)


# --- Ripple host (the acceptor's input) -------------------------------------------------------

RIPPLE_HOST_ID = ripple_message("MSG", 0, {"type": "host-id", "hostname": "a.example"})
RIPPLE_SPECIALS = (b" ", b"\n", b"\r\n", b"*", b"0", b"99999", b"END\r\n", b"\xff")

ripplehost_valid_pieces = st.one_of(
    st.builds(lambda n: ripple_message("MSG", 2 * n, {"type": "ping"}), st.integers(1, 50)),
    st.builds(
        lambda n, c: ripple_message("MSG", 2 * n, {"type": "echo", "t": "x" * 60}, chunk_size=c),
        st.integers(1, 50),
        st.integers(1, 30),
    ),
    st.builds(lambda n: ripple_message("RPY", n, {"type": "pong"}), st.integers(0, 9)),
    st.builds(
        lambda n: ripple_message("MSG", n, {"type": "ping"}, to_user="u", from_user="v"),
        st.integers(0, 9),
    ),
    st.sampled_from(
        [b'MSG 1.0 4 * 3\r\n{"tEND\r\n', b"MSG 1.0 6 . 2000000000\r\n", b"\r\n", b"END\r\n"]
    ),
)


@st.composite
def ripplehost_mutated_streams(draw) -> bytes:
    """An association's bytes (host-id, then valid pieces), mutated."""
    data = RIPPLE_HOST_ID + b"".join(draw(st.lists(ripplehost_valid_pieces, max_size=8)))
    return draw(mutated(data, RIPPLE_SPECIALS, 5))


ripplehost_streams = st.one_of(
    ripplehost_mutated_streams(),
    st.binary(max_size=1024),
    st.builds(lambda b: RIPPLE_HOST_ID + b, st.binary(max_size=1024)),
)
