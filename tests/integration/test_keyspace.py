"""Key names: the Lua include and keys.py agree; every key carries the queue's tag."""

from __future__ import annotations

import pytest
import redis

from commandstats import script_calls
from echomq import SyncQueue
from echomq.keys import QueueKeys
from echomq.scripts import all_scripts, include_source


def test_lua_include_builds_the_same_names_as_keys_py(redis_client: redis.Redis) -> None:
    keys = QueueKeys("mail.eu-1:x")
    lua = (
        # what includes/fixed.lua gives the includes after it
        "local PREFIX, K_META, META = ARGV[1], nil, {}\nlocal function on_call(reset) end\n"
        + include_source("keys")
        + include_source("tags")
        + include_source("logs")
        + include_source("workers")
        + include_source("metrics")
        + include_source("batch")
        + "\nreturn {job_key(ARGV[2]), lane_key(ARGV[3]), lane_key(''), idem_key(ARGV[4]),"
        + " rate_key(ARGV[3]), queue_rate_key(), Tags.key('customer', ARGV[4]),"
        + " Logs.key(ARGV[2]), Workers.index(), Workers.key(ARGV[5]), Metrics.key('29000000'),"
        + " Batch.key(ARGV[6]), Batch.jobs_key(ARGV[6]), Batch.done_key(ARGV[6]), Batch.index()}"
    )
    got = redis_client.eval(lua, 0, keys.prefix, "job_x", "acme", "inv-7", "w-1", "bat_y")
    assert got == [
        keys.job("job_x"),
        keys.lane("acme"),
        keys.lane(""),
        keys.idem("inv-7"),
        keys.rate("acme"),
        keys.queue_rate,
        keys.tag("customer", "inv-7"),
        keys.log("job_x"),
        keys.workers,
        keys.worker("w-1"),
        keys.metrics(29_000_000),
        keys.batch("bat_y"),
        keys.batch_jobs("bat_y"),
        keys.batch_done("bat_y"),
        keys.batches,
    ]


def test_every_script_takes_the_fixed_keys_in_order() -> None:
    fixed_doc = include_source("fixed")
    names = [
        "meta",
        "counter",
        "ring",
        "turn",
        "weights",
        "served",
        "delayed",
        "retrying",
        "active",
        "completed",
        "dead",
        "wake",
        "settings",
        "events",
        "waiters",
        "renumber",
        "lanectl",
        "lanewake",
        "gone",
        "schedules",
        "fires",
        "fired",
        "blocked",
        "releasing",
        "cancelled",
    ]
    keys = QueueKeys("q")
    assert [k.rsplit(":", 1)[1] for k in keys.fixed()] == names
    for i, name in enumerate(names, start=1):
        assert f"KEYS[{i}]" in fixed_doc and name in fixed_doc
    # every script takes the fixed keys, except a worker's own stop bell (one key)
    others = {s.name for s in all_scripts().values() if s.numkeys != len(keys.fixed())}
    assert others == {"stopBell"}
    for script in all_scripts().values():
        assert "-- @include" not in script.source


def test_every_key_of_a_queue_carries_its_hash_tag(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.set_weight("g", 2)
    sq.add_many(
        [{"name": "j", "group": "g", "key": "k1"}, {"name": "j", "delay": 60}, {"name": "j"}]
    )
    [job] = sq.claim(1)
    sq.fail(job, "x", retry_delay=60)
    [job] = sq.claim(1)
    sq.complete(job)
    tag = "{" + sq.name + "}"
    touched = list(redis_client.scan_iter(match=f"*{sq.name}*"))
    assert len(touched) >= 8
    assert all(k.startswith(f"emq:{tag}:") for k in touched)


def test_script_cache_loss_is_recovered(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add("j")
    redis_client.script_flush()  # our private server: as after a restart or failover
    redis_client.function_flush()
    assert len(sq.claim(1)) == 1


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
def test_add_many_is_one_round_trip(sq: SyncQueue, redis_client: redis.Redis) -> None:
    sq.add("warm-up")  # loads the script

    def calls() -> int:
        return script_calls(redis_client)

    before = calls()
    ids = sq.add_many([{"name": "j", "data": i, "group": f"g{i % 3}"} for i in range(200)])
    assert len(ids) == 200
    assert calls() - before == 1
