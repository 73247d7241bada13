"""Malformed input to the RIPP consumer over TCP (hypothesis): whatever the
bytes, and whatever length a header claims, the node neither crashes nor
hangs nor buffers more than one bounded envelope; it keeps serving."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import HealthCheck, given, settings, strategies as st
from ..fuzz_budget import examples

from reference_impl.ripp.envelope import HEADER_SIZE, MAX_PAYLOAD, OVERHEAD
from reference_impl.ripp.node import ConsumerNode, load_registry_file
from reference_impl.ripp.session import ConsumerSession

from .test_node import REGISTRY

REPLY_WINDOW = 2.0


def header(length: int, magic: bytes = b"RIPP") -> bytes:
    data = bytearray(magic + bytes(HEADER_SIZE - 4))
    data[4] = 1
    data[55:59] = struct.pack("<i", length)
    return bytes(data)


garbage = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda n, tail: header(n) + tail,
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.binary(max_size=64),
    ),
    st.builds(lambda tail: b"RIPP" + tail, st.binary(max_size=120)),
)


async def _probe(port: int, data: bytes) -> tuple[bool, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    writer.write_eof()
    received = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(4096), REPLY_WINDOW)
            if not chunk:
                return True, received
            received += chunk
    except asyncio.TimeoutError:
        return False, received
    finally:
        writer.close()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(garbage, min_size=1, max_size=3))
def test_consumer_survives_malformed_input(chunks):
    async def main():
        node = ConsumerNode("fuzz", load_registry_file(str(REGISTRY)))
        _, port = await node.start("127.0.0.1", 0)
        try:
            for data in chunks:
                closed, received = await _probe(port, data)
                assert closed, (
                    f"the node did not close within {REPLY_WINDOW} s after {data[:80].hex()}"
                )
                # Nothing but a Schema_negotiation could ever answer, and only a Handshake.
                assert len(received) < OVERHEAD + 4096
            # still serving: a fresh connection is accepted and closed on EOF
            closed, _ = await _probe(port, b"")
            assert closed
        finally:
            await node.close()

    asyncio.run(main())


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=32))
def test_session_buffer_stays_bounded_whatever_length_is_claimed(length, tail):
    session = ConsumerSession("fuzz", load_registry_file(str(REGISTRY)))
    session.start(0)
    session.receive_data(header(length) + tail, 1)
    assert session.closed is not None or session._reader.buffered <= OVERHEAD + MAX_PAYLOAD
    if not 0 <= length <= MAX_PAYLOAD:
        assert session.closed is not None and session.closed.check == "length"
