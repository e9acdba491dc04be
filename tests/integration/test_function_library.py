"""The scripts go as a function library (FCALL) where the server has functions, and by
EVALSHA where it has not (echomq.scripts.library, echomq.sending.scripts).

Every test runs on every backend; those that read INFO commandstats (one
server's counters) skip the cluster, where tests/cluster/test_cluster.py checks
the library on each primary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from commandstats import SCRIPT_COMMANDS, calls
from echomq import Queue, SyncQueue
from echomq.call import Call
from echomq.scripts import all_scripts
from echomq.scripts.library import READ_ONLY, function_name, library
from echomq.sending import pipelines, scripts
from echomq.sending.scripts import ScriptForm
from localcluster import LocalCluster
from servers import PrivateServer, ServerFactory

Backend = PrivateServer | LocalCluster

#: FUNCTION LOAD as INFO commandstats names it.
LOAD = "function|load"


def _every_script_kind(q: SyncQueue) -> None:
    """Calls of several scripts, read-only ones included (each run at least once)."""
    q.add("j", {"n": 1}, group="g")
    q.add_many([{"name": "j"}, {"name": "j", "priority": 2}])
    [job] = q.claim(1)
    q.complete(job)
    q.stats()
    q.jobs("waiting")
    q.waiting_tiers()


def _counts(client: Any) -> dict[str, int]:
    return calls(client, *SCRIPT_COMMANDS, LOAD)


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


@pytest.fixture
def no_functions_loaded(redis_client: redis.Redis) -> Iterator[None]:
    """The server starts this test without echomq's library (our private server: other
    tests load it again on their next call)."""
    redis_client.function_flush()
    yield


def test_the_library_loads_with_every_script_as_a_function(redis_client: redis.Redis) -> None:
    redis_client.function_load(library().source, replace=True)
    listed: Any = redis_client.function_list(library().name)
    if isinstance(listed, dict):  # a cluster client answers {primary: its list}
        assert len(listed) == 3
        listed = next(iter(listed.values()))
    [entry] = listed
    fields_of_library = dict(zip(entry[::2], entry[1::2], strict=True))
    functions = {}
    for function in fields_of_library["functions"]:
        fields = dict(zip(function[::2], function[1::2], strict=True))
        functions[fields["name"]] = fields["flags"]
    assert set(functions) == {function_name(name) for name in all_scripts()}
    for name in all_scripts():
        flags = functions[function_name(name)]
        assert ("no-writes" in flags) == (name in READ_ONLY), name


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
@pytest.mark.usefixtures("no_functions_loaded")
def test_scripts_go_by_fcall_and_the_library_loads_once(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    before = _counts(redis_client)
    _every_script_kind(sq)
    _every_script_kind(sq)
    sent = _delta(_counts(redis_client), before)
    assert sent[LOAD] == 1, sent
    assert sent["eval"] == sent["evalsha"] == 0, sent
    assert sent["fcall_ro"] == 6  # stats, listJobs, waitingTiers, twice
    assert redis_client.function_list(library().name) != []


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
@pytest.mark.parametrize("functions", [True, False], ids=["fcall", "evalsha"])
def test_every_script_goes_by_name_after_its_first_call(
    sq: SyncQueue, redis_client: redis.Redis, functions: bool
) -> None:
    """stats() (and every other script) sends its source at most once, never per call."""
    sq.sender.scripts.functions = functions
    _every_script_kind(sq)  # the server learns every script used here
    before = _counts(redis_client)
    for _ in range(5):
        sq.stats()
    _every_script_kind(sq)
    sent = _delta(_counts(redis_client), before)
    assert sent["eval"] == 0 and sent[LOAD] == 0, sent
    by_name = sent["fcall"] + sent["fcall_ro"] if functions else sent["evalsha"]
    assert by_name == 5 + 7, sent  # 5 stats, then add, add_many, claim, complete, 3 reads
    assert sent["evalsha" if functions else "fcall"] == 0, sent


async def test_the_asyncio_queue_stats_goes_by_name(
    aq: Queue, backend: Backend, redis_client: redis.Redis
) -> None:
    """On a cluster, counted on the primary that serves the queue's slot."""
    await aq.add("j")
    await aq.stats()
    with contextlib.ExitStack() as stack:
        counted: Any = redis_client
        if isinstance(backend, LocalCluster):
            primary, _ = backend.queue_nodes(aq.name)
            counted = stack.enter_context(primary.client())
        before = _counts(counted)
        for _ in range(5):
            await aq.stats()
        sent = _delta(_counts(counted), before)
    assert sent["fcall_ro"] == 5 and sent["eval"] == sent["evalsha"] == 0, sent


def test_a_flushed_server_gets_the_library_again(sq: SyncQueue, redis_client: Any) -> None:
    sq.add("j")
    redis_client.script_flush()  # as a restart without persistence, or a new primary
    redis_client.function_flush()
    sq.add("j")  # "Function not found": FUNCTION LOAD, then FCALL again
    assert len(sq.claim(2)) == 2
    assert sq.stats().counts["active"] == 2
    assert redis_client.function_list(library().name) != []


def _older_library() -> tuple[str, str]:
    """Another version's library (as an older client would load): its name and text."""
    other = "echomq_" + "0" * len(library().version)
    return other, library().source.replace(library().name, other)


def test_two_library_versions_coexist(sq: SyncQueue, redis_client: Any) -> None:
    other, source = _older_library()
    try:
        redis_client.function_load(source, replace=True)
        sq.add("j")  # this client's version loads beside it, replacing nothing
        assert redis_client.function_list(other) != []
        assert redis_client.function_list(library().name) != []
        # the other version's functions still answer (an older client keeps working)
        keys = sq.engine.keys.fixed()
        block = [sq.engine.keys.prefix, *sq.options.script_block()]
        reply = redis_client.execute_command(
            "FCALL_RO", f"{other}_stats", len(keys), *keys, *block, "10"
        )
        assert int(reply[0][0]) == 1  # one waiting job
    finally:
        redis_client.function_delete(other)


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
def test_a_sender_told_there_are_no_functions_uses_evalsha(
    sq: SyncQueue, redis_client: redis.Redis
) -> None:
    sq.sender.scripts.functions = False
    before = _counts(redis_client)
    _every_script_kind(sq)
    sent = _delta(_counts(redis_client), before)
    assert sent["fcall"] == sent["fcall_ro"] == sent[LOAD] == 0, sent
    assert sent["evalsha"] >= 7, sent


#: a server whose FCALL (and FCALL_RO, FUNCTION) or only FUNCTION is unknown, as on a
#: server before version 7 or one that does not let this user load functions.
#: (the options file takes one line per option; the newlines add the other renames)
NO_FCALL = {"rename-command": 'FCALL ""\nrename-command FCALL_RO ""\nrename-command FUNCTION ""'}
NO_FUNCTION_LOAD = {"rename-command": 'FUNCTION ""'}


#: a user allowed scripts (EVAL, EVALSHA) but not functions.
NOT_ALLOWED = ("on", "nopass", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function")


@pytest.mark.parametrize(
    ("options", "user"),
    [(NO_FCALL, None), (NO_FUNCTION_LOAD, None), ({}, NOT_ALLOWED)],
    ids=["no-fcall", "no-load", "not-allowed"],
)
async def test_a_server_without_functions_gets_scripts_by_evalsha(
    server_factory: ServerFactory, options: dict[str, str], user: tuple[str, ...] | None
) -> None:
    server = server_factory("valkey", options)
    url = server.url
    if user is not None:
        with server.client() as admin:
            admin.execute_command("ACL", "SETUSER", "scripts-only", *user)
        url = url.replace("redis://", "redis://scripts-only:any@")
    with SyncQueue("q", url) as q:
        _every_script_kind(q)
        assert q.sender.scripts.functions is False
        _every_script_kind(q)
        assert q.stats().counts["completed"] == 2
    async with Queue("q", url) as aq:
        await aq.add("j")
        assert aq.sender.scripts.functions is False
        assert (await aq.stats()).counts["waiting"] == 5
    with server.client() as client:
        sent = calls(client, "evalsha", "eval", "script|load")
    assert sent["evalsha"] >= 15 and sent["eval"] == 0, sent
    assert 1 <= sent["script|load"] <= 2 * len(all_scripts()), sent


@pytest.mark.no_cluster("a pipeline on one server's connection")
@pytest.mark.parametrize("functions", [True, False], ids=["fcall", "evalsha"])
def test_in_a_pipeline_only_the_calls_from_the_first_unknown_one_go_again(
    sq: SyncQueue, redis_client: redis.Redis, functions: bool
) -> None:
    counter = f"t:{sq.name}:ran"
    before: Call[int] = Call(parse=int, command=("INCR", counter))
    calls: list[Call[Any]] = [before, sq.engine.add("a"), sq.engine.add("b")]
    redis_client.script_flush()
    redis_client.function_flush()
    form = ScriptForm(functions)
    execute = pipelines.on_client(redis_client)
    replies = scripts.send(execute, pipelines.load_with(execute), form, calls)
    assert [type(r) for r in replies[1:]] == [list, list], replies  # the ids, no errors
    assert int(redis_client.get(counter) or 0) == 1  # ran once, not sent again
    assert sq.stats().counts["waiting"] == 2
    assert form.functions is functions
    redis_client.delete(counter)


@pytest.mark.no_cluster("INFO commandstats counts one server's calls")
@pytest.mark.parametrize("functions", [True, False], ids=["fcall", "evalsha"])
def test_a_rarely_used_script_is_not_sent_again_when_others_churn_eval_scripts(
    sq: SyncQueue, redis_client: redis.Redis, functions: bool
) -> None:
    """Valkey 8.1+ evicts scripts cached by EVAL once more than 500 are (LRU): on a
    server shared with clients that send many EVAL scripts, stats() must not be sent
    in full on every call. Functions and SCRIPT LOAD-ed scripts are never evicted."""
    sq.sender.scripts.functions = functions
    redis_client.script_flush()
    sq.stats()  # the server learns it (FUNCTION LOAD or SCRIPT LOAD, never EVAL)
    before = _counts(redis_client)
    for churn in range(3):
        with redis_client.pipeline(transaction=False) as pipe:
            for i in range(600):  # another client's scripts
                pipe.eval(f"return {churn * 1000 + i}", 0)
            pipe.execute()
        sq.stats()
    sent = _delta(_counts(redis_client), before)
    assert sent["eval"] == 3 * 600, sent  # the churn only
    assert sent["fcall_ro" if functions else "evalsha"] == 3, sent  # each stats() once


def test_by_evalsha_a_flushed_server_gets_the_scripts_again(
    sq: SyncQueue, redis_client: Any
) -> None:
    sq.sender.scripts.functions = False
    sq.add("j")
    redis_client.script_flush()  # on a cluster: every primary
    sq.add("j")  # NOSCRIPT: SCRIPT LOAD, then EVALSHA again
    assert len(sq.claim(2)) == 2
    assert sq.stats().counts["active"] == 2
    assert sq.sender.scripts.functions is False


@pytest.mark.parametrize("functions", [True, False], ids=["fcall", "evalsha"])
async def test_the_asyncio_queue_recovers_a_flushed_server(
    aq: Queue, redis_client: Any, functions: bool
) -> None:
    aq.sender.scripts.functions = functions
    await aq.add("j")
    redis_client.script_flush()
    redis_client.function_flush()
    await aq.add("j")
    assert len(await aq.claim(2)) == 2
    assert (await aq.stats()).counts["active"] == 2
    assert aq.sender.scripts.functions is functions


def test_a_library_the_server_cannot_compile_turns_the_sender_to_evalsha(
    sq: SyncQueue, redis_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused once, it would be refused on every call: the sender stops trying."""
    broken = f"#!lua name={library().name}\nredis.register_function('x', function() return 1 + end)"
    for module in (scripts, pipelines):  # where the load command is built
        monkeypatch.setattr(module, "load_command", lambda: ("FUNCTION", "LOAD", broken))
    redis_client.function_flush()
    assert sq.add("j")  # Function not found, the load refused, then SCRIPT LOAD + EVALSHA
    assert sq.sender.scripts.functions is False
    assert len(sq.claim(1)) == 1


def test_every_script_compiles_as_one_chunk_for_evalsha(server_factory: ServerFactory) -> None:
    """Sent by EVALSHA (a server without functions), a script is one Lua chunk of
    its includes and its body, which Lua limits to 200 locals: each must compile."""
    server = server_factory("valkey")
    with server.client() as client:
        for script in all_scripts().values():
            assert client.script_load(script.source) == script.sha, script.name
