"""The Ripple host frame codec: the vectors both ways, byte-at-a-time feeding,
encoding round trips, bounds, and the generator reproducing the files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.ripplehost.frame import (
    MAX_MSGNO,
    Frame,
    FrameError,
    FrameParser,
    MessageReader,
    Reassembler,
    decode_body,
    encode_frame,
    header_problem,
    message_frames,
    parse_frames,
)

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "vectors" / "ripplehost"
FRAMES = json.loads((VECTORS / "frames.json").read_text(encoding="utf-8"))
MALFORMED = json.loads((VECTORS / "malformed.json").read_text(encoding="utf-8"))
LIMITS = FRAMES["limits"]


def read_all(data: bytes, step: int | None = None):
    """Frames and messages of ``data`` fed whole or ``step`` bytes at a time;
    the FrameError (or None) and the frames read before it."""
    parser = FrameParser(max_header_line=LIMITS["max_header_line"], max_size=LIMITS["max_size"])
    reassembler = Reassembler(
        max_message=LIMITS["max_message"], max_in_progress=LIMITS["max_in_progress"]
    )
    frames, messages = [], []
    pieces = [data] if step is None else [data[at : at + step] for at in range(0, len(data), step)]
    try:
        for piece in pieces:
            try:
                got = parser.receive_data(piece)
            except FrameError as exc:
                got, error = exc.frames, exc
            else:
                error = None
            for frame in got:
                frames.append(frame)
                message = reassembler.add(frame)
                if message is not None:
                    messages.append(message)
            if error is not None:
                raise error
    except FrameError as exc:
        return frames, messages, exc
    assert parser.buffered == 0, "bytes left over after a complete stream"
    return frames, messages, None


def frame_json(frame: Frame) -> dict:
    shown = {
        "type": frame.type,
        "version": frame.version,
        "msgno": frame.msgno,
        "more": "*" if frame.more else ".",
        "size": len(frame.payload),
    }
    if frame.to_user is not None:
        shown["to_user"], shown["from_user"] = frame.to_user, frame.from_user
    if len(frame.payload) <= 4096:
        shown["payload_hex"] = frame.payload.hex()
    else:
        shown["payload_sha_prefix"] = frame.payload[:32].hex()
    return shown


@pytest.mark.parametrize("vector", FRAMES["vectors"], ids=lambda v: v["id"])
@pytest.mark.parametrize("step", [None, 1, 7])
def test_valid_vectors_parse_to_their_frames_and_messages(vector, step):
    frames, messages, error = read_all(bytes.fromhex(vector["hex"]), step)
    assert error is None, error.reason
    assert [frame_json(f) for f in frames] == vector["frames"]
    assert [
        {
            "type": m.type,
            "msgno": m.msgno,
            "version": m.version,
            "frames": m.frames,
            "to_user": m.to_user,
            "from_user": m.from_user,
            "body": m.body,
        }
        for m in messages
    ] == vector["messages"]


@pytest.mark.parametrize("vector", FRAMES["vectors"], ids=lambda v: v["id"])
def test_valid_vectors_reencode_byte_for_byte(vector):
    data = bytes.fromhex(vector["hex"])
    assert b"".join(encode_frame(f) for f in parse_frames(data)) == data


@pytest.mark.parametrize("vector", MALFORMED["vectors"], ids=lambda v: v["id"])
@pytest.mark.parametrize("step", [None, 1])
def test_malformed_vectors_fail_with_their_reason(vector, step):
    frames, _messages, error = read_all(bytes.fromhex(vector["hex"]), step)
    assert error is not None, "accepted"
    assert error.reason == vector["reason"]
    assert len(frames) == vector["frames_before_error"]


def test_every_reason_has_a_vector():
    assert {v["reason"] for v in MALFORMED["vectors"]} == set(MALFORMED["reasons"])


def test_generator_reproduces_the_files():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_ripplehost_vectors.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_parser_is_dead_after_an_error():
    parser = FrameParser()
    with pytest.raises(FrameError):
        parser.receive_data(b"XYZ 1.0 0 . 0\r\nEND\r\n")
    with pytest.raises(FrameError) as again:
        parser.receive_data(b'MSG 1.0 0 . 15\r\n{"type":"ping"}END\r\n')
    assert again.value.reason == "unknown frame type"


def test_huge_size_is_refused_from_the_header_without_buffering():
    parser = FrameParser()
    with pytest.raises(FrameError) as error:
        parser.receive_data(b"MSG 1.0 0 . 2000000000\r\n")
    assert error.value.reason == "size above bound" and parser.buffered == 0


def test_incomplete_frame_waits_and_buffer_stays_bounded():
    parser = FrameParser(max_size=1000)
    assert parser.receive_data(b"MSG 1.0 0 . 1000\r\n" + b"x" * 999) == []
    assert parser.buffered == 18 + 999
    with pytest.raises(FrameError):
        parser.receive_data(b"x" + b"NOPE!")


def test_reassembly_bound_on_message_size():
    reassembler = Reassembler(max_message=10)
    assert reassembler.add(Frame("MSG", "1.0", 0, True, b"123456")) is None
    with pytest.raises(FrameError) as error:
        reassembler.add(Frame("MSG", "1.0", 0, False, b"78901"))
    assert error.value.reason == "message above bound"


def test_message_frames_chunks_and_round_trips():
    body = {"type": "echo", "text": "x" * 100}
    frames = message_frames("RPY", 7, body, chunk_size=30, to_user="bob", from_user="alice")
    content_length = len(json.dumps(body, separators=(",", ":")))
    assert len(frames) == -(-content_length // 30) == 5
    assert [f.more for f in frames] == [True] * 4 + [False]
    assert all(len(f.payload) <= 30 for f in frames)
    [message] = MessageReader().receive_data(b"".join(encode_frame(f) for f in frames))
    assert message.body == body and message.frames == 5 and message.to_user == "bob"


def test_encode_refuses_what_the_parser_would_refuse():
    for bad in (
        Frame("ANS", "1.0", 0, False, b""),
        Frame("MSG", "1 0", 0, False, b""),
        Frame("MSG", "1.0", MAX_MSGNO + 1, False, b""),
        Frame("MSG", "1.0", 0, False, b"", "alice", None),
        Frame("MSG", "1.0", 0, False, b"", "al ice", "bob"),
    ):
        with pytest.raises(ValueError):
            encode_frame(bad)


def test_header_problem_names_each_field():
    assert header_problem(b"MSG 1.0 0 . 15") is None
    assert header_problem(b"MSG 1.0 0 . 15 alice bob") is None
    assert header_problem(b"MSG 1.0 0 , 15") == "more is neither . nor *"
    assert header_problem(b"RPY 1.0 00 . 15") == "msgno has a leading zero"


def test_decode_body_rules():
    assert decode_body(b'{"type":"ping","n":1}') == {"type": "ping", "n": 1}
    for content, reason in (
        (b"[]", "message is not a JSON object"),
        (b'{"type":null}', "message has no type"),
        (b'\xef\xbb\xbf{"type":"x"}', "message is not JSON"),
        (b"[" * 100000 + b"]" * 100000, "message is not JSON"),
        (b'{"type":"x","v":Infinity}', "message is not JSON"),
    ):
        with pytest.raises(FrameError) as error:
            decode_body(content)
        assert error.value.reason == reason


frames_strategy = st.builds(
    Frame,
    st.sampled_from(["MSG", "RPY", "ERR"]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=16),
    st.integers(0, MAX_MSGNO),
    st.booleans(),
    st.binary(max_size=300),
    st.one_of(
        st.none(),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=128),
    ),
    st.none(),
).map(lambda f: f._replace(from_user=None if f.to_user is None else f.to_user[::-1]))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(frames_strategy, max_size=8), st.lists(st.integers(1, 400), max_size=10))
def test_any_encoded_frames_parse_back_in_any_chunking(frames, cuts):
    data = b"".join(encode_frame(f) for f in frames)
    parser = FrameParser()
    got, at = [], 0
    for cut in cuts + [len(data)]:
        got += parser.receive_data(data[at : at + cut])
        at += cut
    got += parser.receive_data(data[at:])
    assert got == frames and parser.buffered == 0


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_never_raise_anything_but_frame_error(data):
    try:
        frames = FrameParser().receive_data(data)
    except FrameError as exc:
        assert exc.reason
        return
    for frame in frames:
        assert encode_frame(frame) in data
