"""reference_impl/stomp/store.py: the durable append-only store.

A receipted message is one whose record was completely written and fsynced
before later records; a crash can only leave a torn tail. Opening cuts that
tail and nothing before it; readers stop at it without writing."""

from __future__ import annotations

import json

import pytest

from reference_impl.stomp.store import (
    LOG_NAME,
    MAGIC,
    Store,
    StoredMessage,
    StoreError,
    encode_record,
    iter_adapter_lines,
    read_messages,
)


def message(i: int, body: bytes | None = None) -> StoredMessage:
    return StoredMessage(
        destination="/exchange/smp",
        type="ConfigureAccount",
        content_type="application/json",
        receipt=f"r-{i}",
        body=body if body is not None else f'{{"n":{i}}}'.encode(),
        headers=(("destination", "/exchange/smp"), ("x-i", str(i))),
    )


def test_round_trip_in_acceptance_order(tmp_path):
    with Store(tmp_path) as store:
        store.append([message(0), message(1)])
        store.append([message(2, b"binary\x00\xff body")])
        assert store.count == 3
        assert store.messages() == [message(0), message(1), message(2, b"binary\x00\xff body")]
    assert read_messages(tmp_path) == [message(0), message(1), message(2, b"binary\x00\xff body")]
    with Store(tmp_path) as store:  # reopened: nothing lost, appends continue after
        assert store.count == 3
        store.append([message(3)])
    assert [m.receipt for m in read_messages(tmp_path)] == ["r-0", "r-1", "r-2", "r-3"]


def test_every_torn_tail_is_cut_and_nothing_before_it(tmp_path):
    with Store(tmp_path) as store:
        store.append([message(0), message(1)])
    intact = (tmp_path / LOG_NAME).read_bytes()
    last = encode_record(message(2))
    for cut in range(len(last)):
        (tmp_path / LOG_NAME).write_bytes(intact + last[:cut])
        assert read_messages(tmp_path) == [
            message(0),
            message(1),
        ]  # the reader stops, writes nothing
        assert (tmp_path / LOG_NAME).stat().st_size == len(intact) + cut
        with Store(tmp_path) as store:
            assert store.count == 2
        assert (tmp_path / LOG_NAME).read_bytes() == intact  # the writer cut the tail


def test_damaged_last_record_is_cut(tmp_path):
    with Store(tmp_path) as store:
        store.append([message(0), message(1)])
    data = bytearray((tmp_path / LOG_NAME).read_bytes())
    data[-3] ^= 0x40  # a bit flip inside the last body
    (tmp_path / LOG_NAME).write_bytes(bytes(data))
    with Store(tmp_path) as store:
        assert store.messages() == [message(0)]


def test_a_cut_magic_is_an_empty_store_and_foreign_files_are_refused(tmp_path):
    (tmp_path / LOG_NAME).write_bytes(MAGIC[:5])
    with Store(tmp_path) as store:
        assert store.count == 0
        store.append([message(0)])
    assert read_messages(tmp_path) == [message(0)]
    other = tmp_path / "other"
    other.mkdir()
    (other / LOG_NAME).write_bytes(b"something else entirely")
    with pytest.raises(StoreError, match="not a message store"):
        Store(other)
    assert (other / LOG_NAME).read_bytes() == b"something else entirely"


def test_one_writer_at_a_time(tmp_path):
    with Store(tmp_path):
        with pytest.raises(StoreError, match="another process"):
            Store(tmp_path)
    Store(tmp_path).close()  # released on close


def test_huge_length_field_is_damage_not_an_allocation(tmp_path):
    (tmp_path / LOG_NAME).write_bytes(MAGIC + b"R\xff\xff\xff\xff\x00\x00\x00\x00")
    assert read_messages(tmp_path) == []


def test_wipe_and_remove_serve_only_the_faults(tmp_path):
    with Store(tmp_path) as store:
        store.append([message(0), message(1), message(2)])
        store.remove([message(1)])
        assert [m.receipt for m in store.messages()] == ["r-0", "r-2"]
    with Store(tmp_path, wipe=True) as store:
        assert store.count == 0
    assert read_messages(tmp_path) == []


def test_adapter_lines(tmp_path):
    with Store(tmp_path) as store:
        store.append([message(0, '{"note":"ünï"}'.encode())])
    [line] = list(iter_adapter_lines(tmp_path))
    assert json.loads(line) == {
        "destination": "/exchange/smp",
        "type": "ConfigureAccount",
        "content-type": "application/json",
        "receipt": "r-0",
        "body": '{"note":"ünï"}',
    }
