"""The reference frame codec against vectors/stomp/frames.json and
malformed.json; the generator still reproduces the committed files; and the
valid vectors cross-checked against two independent STOMP parsers, stomp.py
(its transport's frame splitting + ``stomp.utils.parse_frame``) and stompman
(``stompman.serde.FrameParser``). Where those read a vector differently, the
vector's ``third_party`` entry says what they read and why, and the test
asserts exactly that, so a documented divergence can neither hide a new one
nor outlive a fix."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from reference_impl.stomp.frame import HEARTBEAT, Frame, FrameError, FrameParser, encode_frame

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "vectors" / "stomp"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_stomp_vectors_frames.py"

FRAMES = json.loads((VECTORS_DIR / "frames.json").read_text(encoding="utf-8"))
MALFORMED = json.loads((VECTORS_DIR / "malformed.json").read_text(encoding="utf-8"))
VALID = FRAMES["vectors"]
INVALID = MALFORMED["vectors"]


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


def as_json(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item is HEARTBEAT:
            out.append("heartbeat")
            continue
        shown = {
            "command": item.command,
            "headers": [list(pair) for pair in item.headers],
            "body_hex": item.body.hex(),
        }
        if b"\x00" not in item.body:
            try:
                shown["body_text"] = item.body.decode("utf-8")
            except UnicodeDecodeError:
                pass
        out.append(shown)
    return out


def parser() -> FrameParser:
    return FrameParser(**FRAMES["limits"])


def test_generator_reproduces_the_committed_files():
    spec = importlib.util.spec_from_file_location("gen_stomp_vectors_frames", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for path, text in generator.outputs().items():
        assert text == path.read_text(encoding="utf-8"), (
            f"{path.name} is stale: rerun {GENERATOR_PATH.name}"
        )


# --------------------------------------------------------------------------- frames.json


@pytest.mark.parametrize("vector", **by_id(VALID))
def test_valid_stream_parses_to_its_items(vector):
    data = bytes.fromhex(vector["hex"])
    assert as_json(parser().receive_data(data)) == vector["items"]


@pytest.mark.parametrize("vector", **by_id(VALID))
def test_valid_stream_parses_the_same_in_any_chunking(vector):
    data = bytes.fromhex(vector["hex"])
    for size in (1, 2, 3, 7):
        one = parser()
        items: list[Any] = []
        for start in range(0, len(data), size):
            items += one.receive_data(data[start : start + size])
        assert as_json(items) == vector["items"], f"chunks of {size} bytes"
        assert one.buffered == b""


@pytest.mark.parametrize("vector", **by_id([v for v in VALID if v["canonical_eol"]]))
def test_canonical_vector_encodes_to_its_bytes(vector):
    frames = [
        Frame(
            item["command"],
            tuple(tuple(pair) for pair in item["headers"]),
            bytes.fromhex(item["body_hex"]),
        )
        for item in vector["items"]
    ]
    eol = {"LF": b"\n", "CRLF": b"\r\n"}[vector["canonical_eol"]]
    encoded = b"".join(
        encode_frame(frame, content_length=None if b"\x00" in frame.body else False, eol=eol)
        for frame in frames
    )
    assert encoded == bytes.fromhex(vector["hex"])


@pytest.mark.parametrize(
    "vector", **by_id([v for v in VALID if v["items"] != ["heartbeat"] * len(v["items"])])
)
def test_valid_frames_survive_encode_then_parse(vector):
    """Whatever the wire form (CRLF, escapes), the codec's own encoding of the
    frames reads back as the same frames, LF and CRLF alike."""
    frames = [
        Frame(
            item["command"],
            tuple(tuple(pair) for pair in item["headers"]),
            bytes.fromhex(item["body_hex"]),
        )
        for item in vector["items"]
        if item != "heartbeat"
    ]
    for eol in (b"\n", b"\r\n"):
        data = b"".join(encode_frame(frame, eol=eol) for frame in frames)
        back = parser().receive_data(data)
        assert [(f.command, f.headers[: len(o.headers)], f.body) for f, o in zip(back, frames)] == [
            (o.command, o.headers, o.body) for o in frames
        ]


def test_valid_vectors_cover_the_brief():
    ids = {vector["id"] for vector in VALID}
    wanted = {
        "send-escaped-values",
        "connect-not-escaped",
        "connected-not-escaped",
        "content-length-nul-in-body",
        "crlf-line-ends",
        "repeated-header-first-wins",
        "heartbeats-between-frames",
        "empty-body-frames",
        "binary-body",
    }
    assert wanted <= ids
    first_wins = next(v for v in VALID if v["id"] == "repeated-header-first-wins")["items"][0]
    frame = Frame(first_wins["command"], tuple(tuple(pair) for pair in first_wins["headers"]))
    assert frame.get("foo") == "World" and frame.all("foo") == ["World", "Hello"]


# --------------------------------------------------------------------------- malformed.json


def _refuse(data: bytes, chunks: list[bytes]) -> tuple[int, FrameError]:
    one = FrameParser(**MALFORMED["limits"])
    frames = 0
    for chunk in chunks + [b""]:
        try:
            frames += sum(1 for item in one.receive_data(chunk) if item is not HEARTBEAT)
        except FrameError as exc:
            # The parser is dead after an error: it says so again.
            with pytest.raises(FrameError):
                one.receive_data(b"SEND\ndestination:/q\n\n\x00")
            return frames, exc
    raise AssertionError(f"the parser accepted {data!r}")


@pytest.mark.parametrize("vector", **by_id(INVALID))
def test_malformed_stream_is_refused_with_its_reason(vector):
    data = bytes.fromhex(vector["hex"])
    pattern = MALFORMED["reasons"][vector["reason"]]["reason_pattern"]
    for chunks in ([data], [data[i : i + 1] for i in range(len(data))]):
        frames, error = _refuse(data, chunks)
        assert re.search(pattern, error.reason), error.reason
        assert frames == vector["frames_before_error"]
        assert len(error.data) <= MALFORMED["limits"]["max_frame_bytes"] + 512
    assert _refuse(data, [data])[1].reason == vector["reference_reason"]


def test_malformed_vectors_cover_every_reason():
    used = {vector["reason"] for vector in INVALID}
    assert used == set(MALFORMED["reasons"])
    for required in (
        "undefined escape",
        "no NUL after content-length body",
        "header without colon",
        "frame too large",
        "unknown command",
    ):
        assert required in used


def test_valid_vectors_fit_the_malformed_limits():
    """The size vectors are malformed only under these limits; the valid ones
    must not be refused under the same ones."""
    assert FRAMES["limits"] == MALFORMED["limits"]


# --------------------------------------------------------------------------- independent parsers


def _first_wins(headers) -> list[list[str]]:
    seen: dict[str, str] = {}
    for name, value in headers:
        seen.setdefault(name, value)
    return [[name, value] for name, value in seen.items()]


def _reference_view(vector) -> list[dict]:
    return [
        {
            "command": item["command"],
            "headers": _first_wins(item["headers"]),
            "body_hex": item["body_hex"],
        }
        for item in vector["items"]
        if item != "heartbeat"
    ]


def _stomppy_read(data: bytes) -> list[dict]:
    stomp_transport = pytest.importorskip("stomp.transport")
    stomp_utils = pytest.importorskip("stomp.utils")

    class Feed(stomp_transport.BaseTransport):
        """stomp.py's own frame splitting (BaseTransport.__read: NUL search,
        content-length, EOLs after frames) fed from bytes, not a socket."""

        def __init__(self, chunks: list[bytes]) -> None:
            super().__init__(auto_decode=False)
            self.chunks = chunks
            self.running = True
            self.blocking = False  # an empty read means "no more for now", as on TLS sockets

        def receive(self):
            return self.chunks.pop(0) if self.chunks else None

    feed = Feed([data])
    raw_frames: list[bytes] = []
    for _ in range(len(data) + 2):  # each round consumes at least one frame or ends
        got = feed._BaseTransport__read()
        if not got:
            break
        raw_frames += got
    out = []
    for raw in raw_frames:
        if raw in (b"\n", b"\r\n"):
            continue  # a heart-beat
        frame = stomp_utils.parse_frame(raw)
        if frame is None:
            continue
        out.append(
            {
                "command": frame.cmd,
                "headers": [[k, v] for k, v in frame.headers.items()],
                "body_hex": bytes(frame.body).hex(),
            }
        )
    return out


def _stompman_read(data: bytes) -> list[dict]:
    serde = pytest.importorskip("stompman.serde")
    frames_module = pytest.importorskip("stompman.frames")
    out = []
    for frame in serde.FrameParser().parse_frames_from_chunk(data):
        if isinstance(frame, frames_module.HeartbeatFrame):
            continue
        out.append(
            {
                "command": serde.FRAMES_TO_COMMANDS[type(frame)].decode(),
                "headers": [[k, v] for k, v in frame.headers.items()],
                "body_hex": getattr(frame, "body", b"").hex(),
            }
        )
    return out


READERS = {"stomp.py": _stomppy_read, "stompman": _stompman_read}


@pytest.mark.parametrize("library", list(READERS))
@pytest.mark.parametrize("vector", **by_id(VALID))
def test_independent_parser_reads_valid_vector(vector, library):
    got = READERS[library](bytes.fromhex(vector["hex"]))
    divergence = vector.get("third_party", {}).get(library)
    if divergence is None:
        assert got == _reference_view(vector), (
            f"{library} reads {vector['id']} differently; bytes {vector['text']}"
        )
    else:
        assert got == divergence["reads"], f"{library} no longer reads {vector['id']} as documented"
        assert got != _reference_view(vector)


def test_divergences_are_documented_in_words():
    for vector in VALID:
        for library, divergence in vector.get("third_party", {}).items():
            assert library in READERS
            assert len(divergence["note"]) > 40, vector["id"]
