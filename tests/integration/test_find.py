"""Tags and find (DESIGN §10 "Find any job"): a job carries tags, ``find`` pages
through the jobs carrying them newest first with a cursor, and a job leaves
its tags' indexes when it is removed, purged or pruned."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
import redis

from echomq import InvalidOption, Queue, SyncQueue
from echomq.keys import QueueKeys
from echomq.tags import JobPage

pytestmark = pytest.mark.timeout(120)


def all_pages(sq: SyncQueue, tags: dict[str, str], count: int, **kw: str) -> list[list[str]]:
    """Every page of a find, as lists of ids, following the cursors to the end."""
    pages: list[list[str]] = []
    cursor: str | None = None
    for _ in range(1000):
        page = sq.find(tags, cursor=cursor, count=count, **kw)  # type: ignore[arg-type]
        pages.append([j.id for j in page.jobs])
        cursor = page.cursor
        if cursor is None:
            return pages
    raise AssertionError("find never ended")


def test_a_job_carries_its_tags(sq: SyncQueue) -> None:
    job_id = sq.add("send", 1, tags={"customer": "42", "region": "eu"})
    got = sq.get(job_id)
    assert got is not None and got.tags == {"customer": "42", "region": "eu"}
    claimed = sq.claim(1)
    assert claimed[0].tags == {"customer": "42", "region": "eu"}
    untagged = sq.add("plain", 1)
    got = sq.get(untagged)
    assert got is not None and got.tags is None


def test_find_lists_the_jobs_with_every_tag_newest_first(sq: SyncQueue) -> None:
    a = sq.add("send", 1, tags={"customer": "42"})
    b = sq.add("send", 2, tags={"customer": "42", "region": "eu"})
    sq.add("send", 3, tags={"customer": "7", "region": "eu"})
    c = sq.add("bill", 4, tags={"customer": "42", "region": "eu"})
    page = sq.find({"customer": "42"})
    assert isinstance(page, JobPage)
    assert [j.id for j in page.jobs] == [c, b, a]
    assert page.cursor is None
    assert [j.id for j in sq.find({"customer": "42", "region": "eu"}).jobs] == [c, b]
    assert [j.id for j in sq.find({"customer": "42"}, name="send").jobs] == [b, a]
    assert sq.find({"customer": "nobody"}).jobs == []
    # by state: claim the oldest waiting job (a), it is active
    assert [j.id for j in sq.claim(1)] == [a]
    assert [j.id for j in sq.find({"customer": "42"}, state="active").jobs] == [a]
    assert [j.id for j in sq.find({"customer": "42"}, state="waiting").jobs] == [c, b]


def test_add_many_and_tasks_carry_tags(sq: SyncQueue) -> None:
    ids = sq.add_many(
        [{"name": "n", "data": i, "tags": {"batch": "b1", "i": str(i)}} for i in range(3)]
    )

    @sq.task(tags=lambda customer, amount: {"customer": str(customer)})
    def charge(customer: int, amount: int) -> None: ...

    @sq.task(tags={"kind": "fixed"})
    def fixed() -> None: ...

    t1 = charge.enqueue(42, 10)
    t2 = charge.enqueue_with(tags={"customer": "override"}).enqueue(42, 11)
    t3 = fixed.enqueue()
    assert {j.id for j in sq.find({"batch": "b1"}).jobs} == set(ids)
    assert [j.id for j in sq.find({"batch": "b1", "i": "1"}).jobs] == [ids[1]]
    assert [j.id for j in sq.find({"customer": "42"}).jobs] == [t1]
    assert [j.id for j in sq.find({"customer": "override"}).jobs] == [t2]
    assert [j.id for j in sq.find({"kind": "fixed"}).jobs] == [t3]


def test_cursor_pages_once_each_while_jobs_come_and_go(sq: SyncQueue) -> None:
    # one add_many: every job has the same creation time (one script call), so
    # the order within it is by id and the cursor must hold its place in the band
    first = sq.add_many([{"name": "n", "tags": {"t": "x"}} for _ in range(120)])
    more = [sq.add("n", i, tags={"t": "x"}) for i in range(30)]
    expected = list(reversed(more)) + sorted(first, reverse=True)
    assert [j for page in all_pages(sq, {"t": "x"}, 25) for j in page] == expected

    # page, then change the index between pages
    p1 = sq.find({"t": "x"}, count=40)
    assert [j.id for j in p1.jobs] == expected[:40]
    newer = sq.add("n", "new", tags={"t": "x"})  # newer than the cursor: not on later pages
    sq.remove(expected[39])  # the cursor's own job is gone: the page goes on after its place
    sq.remove(expected[40])  # the next one is gone too: not shown
    p2 = sq.find({"t": "x"}, cursor=p1.cursor, count=40)
    assert [j.id for j in p2.jobs] == expected[41:81]
    assert newer not in [j.id for j in p2.jobs]
    # inside the band of equal creation times (the add_many's), removing the cursor's job
    p3 = sq.find({"t": "x"}, cursor=p2.cursor, count=40)
    assert [j.id for j in p3.jobs] == expected[81:121]
    sq.remove(expected[120])
    p4 = sq.find({"t": "x"}, cursor=p3.cursor, count=100)
    assert [j.id for j in p4.jobs] == expected[121:]
    assert p4.cursor is None


def test_a_page_does_bounded_work_and_still_carries_a_cursor(sq: SyncQueue) -> None:
    # 1,500 jobs tagged t=x; only the oldest also carries u=y: the walk of the
    # index looks at 500 entries per call, so three pages are empty
    rare = sq.add("n", tags={"t": "x", "u": "y"})
    sq.add_many([{"name": "n", "tags": {"t": "x"}} for _ in range(1500)])
    sq.add_many([{"name": "n", "tags": {"u": "y"}} for _ in range(1600)])
    assert all_pages(sq, {"t": "x", "u": "y"}, 50) == [[], [], [], [rare]]


def test_index_entries_go_with_their_job(
    make_sync: Callable[..., SyncQueue], redis_client: redis.Redis
) -> None:
    sq = make_sync(keep_completed=2, keep_dead=0)
    keys = QueueKeys(sq.name)
    tags = {"customer": "42"}
    index = keys.tag("customer", "42")

    removed = sq.add("n", tags=tags)
    assert redis_client.zcard(index) == 1
    sq.remove(removed)
    assert redis_client.zcard(index) == 0
    assert sq.find(tags).jobs == []

    # pruned by the completed set's count (keep_completed=2)
    done = [sq.add("n", i, tags=tags) for i in range(4)]
    for job in sq.claim(4):
        sq.complete(job, None)
    assert sorted(j.id for j in sq.find(tags).jobs) == sorted(done[2:])
    assert redis_client.zcard(index) == 2

    # dead jobs, pruned at once (keep_dead=0)
    dying = sq.add("n", tags={"customer": "9"}, max_attempts=1)
    sq.fail(sq.claim(1)[0], "boom")
    assert sq.get(dying) is None
    assert redis_client.zcard(keys.tag("customer", "9")) == 0

    # cancel of a waiting job deletes it
    cancelled = sq.add("n", tags={"customer": "5"})
    sq.cancel(cancelled)
    assert redis_client.zcard(keys.tag("customer", "5")) == 0


def test_purge_dead_takes_jobs_out_of_their_indexes(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    dead = sq.add("n", tags={"customer": "3"}, max_attempts=1)
    sq.fail(sq.claim(1)[0], "boom")
    assert [j.id for j in sq.find({"customer": "3"}, state="dead").jobs] == [dead]
    assert sq.purge_dead() == [dead]
    assert redis_client.zcard(QueueKeys(sq.name).tag("customer", "3")) == 0


@pytest.mark.parametrize(
    ("tags", "words"),
    [
        ({}, "allowed 1 … 8"),
        ({f"k{i}": "v" for i in range(9)}, "allowed 1 … 8"),
        ({"Customer": "1"}, "must match"),
        ({"k" * 33: "1"}, "must match"),
        ({"customer": ""}, "1 … 128"),
        ({"customer": "x" * 129}, "1 … 128"),
        ({"customer": 42}, "str value"),
        (["customer"], "must be a mapping"),
        ({"customer": "\ud800"}, "UTF-8"),
    ],
)
def test_bad_tags_are_refused_and_nothing_is_written(
    sq: SyncQueue, redis_client: redis.Redis, tags: object, words: str
) -> None:
    with pytest.raises(InvalidOption, match=words):
        sq.add("n", 1, tags=tags)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match=words):
        sq.add_many([{"name": "n", "tags": tags}])
    assert not redis_client.exists(QueueKeys(sq.name).meta)


def test_find_refuses_bad_input(sq: SyncQueue) -> None:
    with pytest.raises(InvalidOption, match="needs tags"):
        sq.find()
    with pytest.raises(InvalidOption, match="is not one of"):
        sq.find({"a": "b"}, state="sleeping")
    with pytest.raises(InvalidOption, match="count"):
        sq.find({"a": "b"}, count=0)
    with pytest.raises(InvalidOption, match="cursor"):
        sq.find({"a": "b"}, cursor=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sq.find({"a": "b"}, colour="red")  # type: ignore[call-arg]


async def test_the_async_queue_finds_too(aq: Queue) -> None:
    job_id = await aq.add("n", 1, tags={"customer": "42"})
    page = await aq.find({"customer": "42"})
    assert [j.id for j in page.jobs] == [job_id]


def job_pages(sq: SyncQueue, state: str, count: int) -> list[list[str]]:
    """Every cursor page of ``jobs(state)``, as lists of ids."""
    pages: list[list[str]] = []
    cursor = ""
    for _ in range(1000):
        page = sq.jobs(state, cursor=cursor, count=count)
        pages.append([j.id for j in page.jobs])
        if page.cursor is None:
            return pages
        cursor = page.cursor
    raise AssertionError("the pages never ended")


def test_jobs_pages_by_cursor_in_each_set_order(make_sync: Callable[..., SyncQueue]) -> None:
    sq = make_sync(ordering="mint")  # a mint lane: one score per tier, ids in mint order
    waiting = sq.add_many([{"name": "n", "data": i} for i in range(45)])
    assert [j for p in job_pages(sq, "waiting", 10) for j in p] == waiting
    assert sq.jobs("waiting", count=10) == sq.jobs("waiting", cursor="", count=10).jobs
    leased = sq.claim(20)
    for job in leased[:15]:
        sq.complete(job, None)
    completed = [j.id for j in sq.jobs("completed", count=100)]  # newest first
    assert [j for p in job_pages(sq, "completed", 4) for j in p] == completed
    # the lane goes on after the cursor's job when it is gone meanwhile
    p1 = sq.jobs("waiting", cursor="", count=10)
    sq.claim(10)  # exactly the first page's jobs leave the lane
    assert p1.cursor is not None
    p2 = sq.jobs("waiting", cursor=p1.cursor, count=10)
    assert [j.id for j in p2.jobs] == waiting[30:40]


def test_a_job_that_moves_on_is_not_shown_again_on_the_next_page(sq: SyncQueue) -> None:
    sq.add_many([{"name": "n", "data": i} for i in range(6)])
    leased = sq.claim(6, lease=30.0)
    p1 = sq.jobs("active", cursor="", count=3)  # the three earliest deadlines
    first = [j.id for j in p1.jobs]
    shown = next(j for j in leased if j.id == first[0])
    sq.extend(shown, 300.0)  # its deadline moves past every other: after the cursor
    assert p1.cursor is not None
    p2 = sq.jobs("active", cursor=p1.cursor, count=10)
    assert first[0] not in [j.id for j in p2.jobs]
    assert sorted(first + [j.id for j in p2.jobs]) == sorted(j.id for j in leased)
    assert p2.cursor is None


def test_a_cursor_of_another_query_or_changed_by_hand_is_refused(sq: SyncQueue) -> None:
    sq.add_many([{"name": "n", "data": i, "tags": {"t": "x"}} for i in range(5)])
    found = sq.find({"t": "x"}, count=2).cursor
    listed = sq.jobs("waiting", cursor="", count=2).cursor
    assert found is not None and listed is not None
    assert len(sq.find({"t": "x"}, cursor=found, count=10).jobs) == 3
    fingerprint, _, encoded = found.partition(".")
    forged = base64.urlsafe_b64encode(b"abc job_x").decode().rstrip("=")
    for bad, query in (
        (found, {"t": "y"}),  # another query's
        (listed, {"t": "x"}),  # a listing's
        (f"{fingerprint}.{encoded[:-3]}", {"t": "x"}),  # cut
        (f"{fingerprint}.{forged}", {"t": "x"}),  # not a position
        ("garbage", {"t": "x"}),
    ):
        with pytest.raises(InvalidOption, match="cursor"):
            sq.find(query, cursor=bad)
    with pytest.raises(InvalidOption, match="cursor"):
        sq.jobs("waiting", cursor=found)
    with pytest.raises(InvalidOption, match="cursor"):
        sq.jobs("delayed", cursor=listed)  # another state's


def test_names_reads_the_names_of_a_few_jobs(sq: SyncQueue) -> None:
    a, b = sq.add("invoice.send"), sq.add("mail.send")
    sq.remove(b)
    gone = "job_01jzzzzzzzzzzzzzzzzzzzzzzz"
    assert sq.names([a, b, gone, "not-an-id"]) == {
        a: "invoice.send",
        b: None,
        gone: None,
        "not-an-id": None,
    }
    assert sq.names([]) == {}
    with pytest.raises(InvalidOption, match="job ids"):
        sq.names([a] * 101)


def test_job_events_tell_a_jobs_story_from_the_stream(sq: SyncQueue) -> None:
    job_id = sq.add("n", max_attempts=2)
    other = sq.add("other")
    [job, _] = sq.claim(2)
    assert job.id == job_id
    sq.fail(job, "boom")
    story = sq.job_events(job_id)
    assert [e.kind for e in story] == ["added", "claimed", "retrying"]
    assert {e.job_id for e in story} == {job_id} and story[-1].error == "boom"
    assert [e.kind for e in sq.job_events(other)] == ["added", "claimed"]
    assert [e.kind for e in sq.job_events(job_id, entries=1)] == ["retrying"]  # the newest entry
    assert sq.job_events("job_01jzzzzzzzzzzzzzzzzzzzzzzz") == []
    with pytest.raises(InvalidOption, match="entries"):
        sq.job_events(job_id, entries=0)
