"""The reference STOMP server's durable message store: one append-only file.

The Swaptacular profile lets a client count a message delivered only once a
RECEIPT confirms it ("STOMP Connections"), so the server must not lose a
message it has receipted, not even to a SIGKILL or a power cut. The server
therefore appends the message here and waits for :meth:`Store.append` to
return (the bytes written *and* fsynced) before the RECEIPT goes out.

Layout of ``<directory>/messages.log``::

    file    = MAGIC *record
    record  = "R" length:u32be crc:u32be payload        (length = len(payload))
    payload = meta_length:u32be meta:JSON(UTF-8) body   (crc = CRC-32 of length bytes + payload)

``meta`` holds the SEND's destination, type, content-type, receipt and all its
headers (in order); ``body`` is the SEND's body, raw. Records are in
acceptance order.

Why a torn record can only be the last one, and dropping it is safe: records
are only ever appended, and a message is receipted only after the fsync that
made its record (and every record before it) durable. What a crash can leave
broken is therefore what was written after the last completed fsync: the tail
of the file, holding only messages nobody has receipted. Opening for writing
cuts the file at the first record that is incomplete or fails its CRC (and
fsyncs the cut); everything before it is intact by construction. Readers
(:func:`read_messages`, the ``accepted`` command) never write: they stop at
the first broken record, which may just be one the server is writing now.

One writer at a time: the writer holds an exclusive ``flock`` on
``<directory>/lock`` (released by the kernel when the process dies, so a
restart after SIGKILL can open the store at once).
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"SMP-STOMP-STORE 1\n"
LOG_NAME = "messages.log"
LOCK_NAME = "lock"
_RECORD_HEAD = struct.Struct(">cII")  # "R", length, crc
_META_LEN = struct.Struct(">I")
MAX_RECORD_BYTES = 64 << 20
"""Bound on one record's payload when reading: a length above it can only be
damage (a frame is at most a few MiB), and believing it would make a reader
allocate whatever a torn length field says."""


class StoreError(Exception):
    """The store cannot be opened or written (locked, not a store, I/O error)."""


@dataclass(frozen=True)
class StoredMessage:
    """One accepted SEND, as the store keeps it."""

    destination: str
    type: str
    content_type: str
    receipt: str | None
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def adapter_record(self) -> dict:
        """The line the ``accepted`` adapter prints (docs/stomp-adapter.md)."""
        return {
            "destination": self.destination,
            "type": self.type,
            "content-type": self.content_type,
            "receipt": self.receipt,
            "body": self.body.decode("utf-8", "replace"),
        }


def encode_record(message: StoredMessage) -> bytes:
    meta = json.dumps(
        {
            "destination": message.destination,
            "type": message.type,
            "content-type": message.content_type,
            "receipt": message.receipt,
            "headers": [list(pair) for pair in message.headers],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    payload = _META_LEN.pack(len(meta)) + meta + message.body
    length = struct.pack(">I", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(length))
    return b"R" + length + struct.pack(">I", crc) + payload


def _decode_payload(payload: bytes) -> StoredMessage:
    (meta_length,) = _META_LEN.unpack_from(payload)
    meta = json.loads(payload[_META_LEN.size : _META_LEN.size + meta_length].decode("utf-8"))
    return StoredMessage(
        destination=meta["destination"],
        type=meta["type"],
        content_type=meta["content-type"],
        receipt=meta["receipt"],
        body=payload[_META_LEN.size + meta_length :],
        headers=tuple((str(name), str(value)) for name, value in meta["headers"]),
    )


def scan(data: bytes) -> tuple[list[StoredMessage], int]:
    """The messages of a log file's bytes, and the offset where the intact
    records end (a torn or damaged record, or the end of the data)."""
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):
            return [], 0  # a file cut inside its magic: nothing was ever stored in it
        raise StoreError("not a message store (bad magic); refusing to touch it")
    messages: list[StoredMessage] = []
    pos = len(MAGIC)
    while pos < len(data):
        if len(data) - pos < _RECORD_HEAD.size:
            break
        marker, length, crc = _RECORD_HEAD.unpack_from(data, pos)
        start = pos + _RECORD_HEAD.size
        if marker != b"R" or length > MAX_RECORD_BYTES or len(data) - start < length:
            break
        payload = data[start : start + length]
        if zlib.crc32(payload, zlib.crc32(struct.pack(">I", length))) != crc:
            break
        try:
            message = _decode_payload(payload)
        except (ValueError, KeyError, TypeError, struct.error):
            break  # CRC-valid but unreadable: only a bug could write it; stop like at damage
        messages.append(message)
        pos = start + length
    return messages, pos


def read_messages(directory: str | os.PathLike[str]) -> list[StoredMessage]:
    """Every intact message in the store at ``directory``, in acceptance
    order, without writing anything (safe while a server appends)."""
    path = Path(directory) / LOG_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return scan(data)[0]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Store:
    """The writer's handle. :meth:`append` is thread-safe (the asyncio node
    calls it from a worker thread so the fsync does not stall the loop)."""

    def __init__(self, directory: str | os.PathLike[str], *, wipe: bool = False) -> None:
        """Open (creating it if needed) the store at ``directory``, cutting a
        torn tail. ``wipe``: start empty (only the fault
        ``store-lost-on-restart`` asks for it)."""
        self.directory = Path(directory)
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            _fsync_directory(self.directory.parent)  # the new directory's entry is durable too
        self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreError(
                f"{self.directory}: another process has the store open for writing"
            ) from None
        self._mutex = threading.Lock()
        path = self.directory / LOG_NAME
        created = not path.exists()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            data = b"" if wipe else os.pread(self._fd, os.fstat(self._fd).st_size, 0)
            self.count = 0
            if not data.startswith(MAGIC):
                scan(data)  # raises unless empty or a cut magic
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, MAGIC, 0)
                end = len(MAGIC)
            else:
                messages, end = scan(data)
                self.count = len(messages)
                if end < len(data):
                    os.ftruncate(self._fd, end)
            os.fsync(self._fd)
            if created:
                _fsync_directory(self.directory)
        except OSError as exc:
            self._release()
            raise StoreError(f"{path}: {exc.strerror or exc}") from None
        except StoreError:
            self._release()
            raise
        self._end = end

    def _release(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def append(self, messages: Iterable[StoredMessage]) -> None:
        """Append ``messages`` in order and fsync; when it returns they are
        durable. On an I/O error the file is cut back to where it was, so a
        half-written batch never sits before later records."""
        batch = list(messages)
        blob = b"".join(encode_record(message) for message in batch)
        if not blob:
            return
        with self._mutex:
            if self._fd is None:
                raise StoreError("the store is closed")
            try:
                written = 0
                while written < len(blob):
                    written += os.pwrite(self._fd, blob[written:], self._end + written)
                os.fsync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, self._end)
                except OSError:
                    pass
                raise StoreError(f"cannot write the store: {exc.strerror or exc}") from None
            self._end += len(blob)
            self.count += len(batch)

    def messages(self) -> list[StoredMessage]:
        with self._mutex:
            return scan(os.pread(self._fd, self._end, 0))[0]

    def remove(self, drop: Iterable[StoredMessage]) -> None:
        """Rewrite the log without the first occurrence of each of ``drop``.
        Only the fault ``forget-on-connection-cut`` uses it: a conformant
        node never takes back a receipted message."""
        drop_list = list(drop)
        with self._mutex:
            kept: list[StoredMessage] = []
            for message in scan(os.pread(self._fd, self._end, 0))[0]:
                if message in drop_list:
                    drop_list.remove(message)
                else:
                    kept.append(message)
            blob = MAGIC + b"".join(encode_record(message) for message in kept)
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, blob, 0)
            os.fsync(self._fd)
            self._end = len(blob)
            self.count = len(kept)

    def close(self) -> None:
        with self._mutex:
            self._release()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def iter_adapter_lines(directory: str | os.PathLike[str]) -> Iterator[str]:
    """The ``accepted`` adapter's output lines for the store at ``directory``."""
    for message in read_messages(directory):
        yield json.dumps(message.adapter_record(), ensure_ascii=False, separators=(", ", ": "))
