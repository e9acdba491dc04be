"""A payload in pieces (stored format 4, scripts/includes/text.lua, issue 29).

A payload longer than 64 bytes (the servers' default hash-max-listpack-value)
is stored in pieces of at most 64 bytes, "d", "d2", ... up to 16, each cut at
a UTF-8 character boundary, so the job's hash stays a listpack at the
server's default settings; a longer payload is stored whole. Every reader
joins the pieces: a claim, get, peek and read_field, a listing's full rows,
wait, change, a dedupe replacement; schedules and batch callbacks write them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import Dedupe, SyncQueue
from echomq.job import PAYLOAD_PIECES, encode_payload

#: characters of 1 to 4 UTF-8 bytes, so that a cut lands inside each kind
CHARS = ["a", "é", "€", "😀"]


def _payloads() -> list[Any]:
    out: list[Any] = [None, "", "x" * 62, "x" * 63, "x" * 64, "x" * 98, "y" * 1000]
    for char in CHARS:  # the 64-byte boundary falls inside a character at every offset
        for shift in range(4):
            out.append("a" * shift + char * 40)
    out.append({"nested": ["€" * 30, {"k": "😀" * 50}], "n": 12345})
    out.append("z" * 2000)  # more than 16 pieces: stored whole
    return out


PAYLOADS = _payloads()


def _until(check: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _fields(client: redis.Redis | RedisCluster, key: str) -> dict[str, str]:
    return client.hgetall(key)  # type: ignore[return-value]


@contextmanager
def _server_default_listpack(client: redis.Redis | RedisCluster) -> Iterator[None]:
    """The server's default hash-max-listpack-value (64) for the block."""
    before = str(client.config_get("hash-max-listpack-value")["hash-max-listpack-value"])
    client.config_set("hash-max-listpack-value", 64)
    try:
        yield
    finally:
        client.config_set("hash-max-listpack-value", before)


def test_every_reader_gets_the_payload_whole(sq: SyncQueue, redis_client: redis.Redis) -> None:
    ids = [sq.add("job", data) for data in PAYLOADS]
    for job_id, data in zip(ids, PAYLOADS, strict=True):
        job = sq.get(job_id)
        assert job is not None and job.data == data
        assert sq.read_field(job_id, "data") == encode_payload(data)
        preview = sq.peek(job_id, preview=4096)
        assert preview is not None and preview.job.data == data and not preview.cut
    listed = {job.id: job.data for job in sq.jobs("waiting", count=100)}
    assert listed == dict(zip(ids, PAYLOADS, strict=True))
    claimed: list[Any] = []
    while len(claimed) < len(ids):
        got = sq.claim(10)
        assert got, f"claimed {len(claimed)} of {len(ids)}"
        claimed += got
    assert {job.id: job.data for job in claimed} == dict(zip(ids, PAYLOADS, strict=True))
    for job in claimed:
        sq.complete(job, None)
    done = sq.wait(ids[-2], timeout=10.0)
    assert done.data == PAYLOADS[-2]


def test_a_peek_cuts_the_joined_payload_at_a_character(sq: SyncQueue) -> None:
    data = "€" * 100  # 302 bytes of JSON: five pieces
    job_id = sq.add("job", data)
    preview = sq.peek(job_id, preview=100)
    assert preview is not None
    cut = preview.cut["data"]
    assert cut.size == len(encode_payload(data).encode())
    assert 97 <= len(cut.text.encode()) <= 100 and encode_payload(data).startswith(cut.text)


def test_pieces_are_valid_utf8_of_at_most_64_bytes(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    for data in PAYLOADS[1:-1]:
        job_id = sq.add("job", data)
        h = _fields(redis_client, sq.engine.keys.job(job_id))  # decoded: each piece is UTF-8
        pieces = [h[name] for name in PAYLOAD_PIECES if name in h]
        text = encode_payload(data)
        assert "".join(pieces) == text
        if len(text.encode()) > 64:
            assert len(pieces) > 1 and all(len(p.encode()) <= 64 for p in pieces), pieces
        else:
            assert pieces == [text]
    whole = sq.add("job", PAYLOADS[-1])  # beyond 16 pieces: one field
    h = _fields(redis_client, sq.engine.keys.job(whole))
    assert "d2" not in h and h["d"] == encode_payload(PAYLOADS[-1])


def test_a_waiting_jobs_hash_stays_a_listpack_at_the_server_default(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    if isinstance(redis_client, RedisCluster):
        pytest.skip("the setting is per server; one server shows it")
    with _server_default_listpack(redis_client):
        for data, encoding in (("x" * 98, "listpack"), ("y" * 1000, "listpack")):
            job_id = sq.add("job", data, group="tenant-7", priority=2)
            assert redis_client.object("encoding", sq.engine.keys.job(job_id)) == encoding
            [job] = sq.claim(1)  # a lease's fields keep it one
            assert job.id == job_id and job.data == data
            assert redis_client.object("encoding", sq.engine.keys.job(job_id)) == encoding
            sq.complete(job, None)


def test_a_dedupe_replacement_leaves_no_piece_of_the_old_payload(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    latest = Dedupe("latest", "latest")
    job_id = sq.add("job", "€" * 200, dedupe=latest)  # many pieces
    for data in ("short", "x" * 130, "é" * 400, None):
        assert sq.add("job", data, dedupe=latest) == job_id
        h = _fields(redis_client, sq.engine.keys.job(job_id))
        pieces = [name for name in PAYLOAD_PIECES if name in h]
        assert pieces == list(PAYLOAD_PIECES[: len(pieces)]), pieces  # no gap, no leftover
        job = sq.get(job_id)
        assert job is not None and job.data == data


def test_schedules_batch_callbacks_and_change_keep_the_payload(sq: SyncQueue) -> None:
    data = {"report": "€" * 90}
    sq.schedule("often", every=1.0, name="tick", data=data)

    def fire() -> bool:
        sq.maintain()  # fires what is due
        return sq.stats().counts["waiting"] >= 1

    _until(fire, "the schedule's first fire")
    sq.unschedule("often")
    [fired] = sq.claim(1)
    assert fired.name == "tick" and fired.data == data
    sq.complete(fired, None)
    batch = sq.batch(on_success={"name": "done", "data": data})
    batch.add("child", "é" * 70)
    batch.close()
    [child] = sq.claim(1)
    assert child.data == "é" * 70
    sq.complete(child, None)
    got: list[Any] = []

    def callback() -> bool:
        sq.maintain()
        got.extend(sq.claim(1))
        return bool(got)

    _until(callback, "the batch's callback")
    assert got[0].name == "done" and got[0].data == data
    moved = sq.change(sq.add("job", "😀" * 40), priority=3, group="other")
    assert moved.data == "😀" * 40 and moved.priority == 3


def test_a_waiter_reads_a_payload_in_pieces(sq: SyncQueue) -> None:
    job_id = sq.add("job", "€" * 50)
    waited: list[Any] = []
    waiter = threading.Thread(target=lambda: waited.append(sq.wait(job_id, timeout=20.0)))
    waiter.start()
    try:
        [job] = sq.claim(1)
        sq.complete(job, {"ok": True})
    finally:
        waiter.join(timeout=30.0)
    assert waited and waited[0].data == "€" * 50 and waited[0].result == {"ok": True}
