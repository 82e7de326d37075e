"""UUIDv7 ids: valid, unique, and in creation order within a process."""

from __future__ import annotations

import threading
import time
import uuid

from agentstore.ids import is_uuid7, new_id, new_token


def test_ids_are_canonical_uuid7() -> None:
    value = new_id()
    parsed = uuid.UUID(value)

    assert str(parsed) == value
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert is_uuid7(value)
    # The first 48 bits are the Unix time in milliseconds.
    assert abs((parsed.int >> 80) - time.time_ns() // 1_000_000) < 1000


def test_ids_sort_in_creation_order_even_within_one_millisecond() -> None:
    ids = [new_id() for _ in range(20_000)]

    assert all(str(uuid.UUID(value)) == value for value in ids)  # canonical text, every one
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_ids_from_many_threads_are_unique() -> None:
    results: list[list[str]] = [[] for _ in range(8)]

    def make(bucket: list[str]) -> None:
        bucket.extend(new_id() for _ in range(2000))

    threads = [threading.Thread(target=make, args=(bucket,)) for bucket in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    every = [value for bucket in results for value in bucket]
    assert len(set(every)) == len(every)
    for bucket in results:
        assert bucket == sorted(bucket)


def test_is_uuid7_rejects_other_forms() -> None:
    assert not is_uuid7(str(uuid.uuid4()))
    assert not is_uuid7(new_id().upper())
    assert not is_uuid7(new_id().replace("-", ""))
    assert not is_uuid7("")


def test_tokens_are_16_hex_characters() -> None:
    token = new_token()
    assert len(token) == 16
    int(token, 16)
    assert new_token() != token
