"""Stored formats 1, 2 and 3 -> 4 (docs/design.md §9, issues 29 and 35).

A queue is written by the code of the last commit of an older format (taken
from git history into a temporary directory and run in a subprocess, so the
older scripts are the real ones), holding waiting, delayed, active, retrying,
blocked, dead and completed jobs, a stored setting, a lane weight and a lane
cap. The first format-4 queue object that connects upgrades it; then every
job is readable, the feature word and the default lane's counts are where
format 4 reads them, and the queue drains in order with every job run once,
the cap and the weight obeyed.

Clients of both formats running side by side while the queue is upgraded:
test_format_upgrade_under_load.py (design.md §9 says what that may cost and
that older processes are to be restarted).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import SyncQueue, storage
from echomq.keys import QueueKeys

#: the last commit whose code writes each older stored format
FORMAT_COMMITS = {1: "e28804d", 2: "3d73bcb", 3: "ae3cfc0"}
REPO = Path(__file__).resolve().parents[2]


BUILD_FORMAT_1 = r"""
import json, sys
from echomq import SyncQueue

url, name = sys.argv[1], sys.argv[2]
ids = {}
with SyncQueue(name, url) as q:
    q.set_weight("heavy", 3)
    q.set_lane("capped", concurrency=1)
    ids["active"] = q.add("run", {"k": "active"})
    [job] = q.claim(1, lease=120)
    assert job.id == ids["active"]
    ids["retrying"] = q.add("run", {"k": "retrying"})
    [job] = q.claim(1)
    q.fail(job, "later", retry_delay=1.0)
    ids["dead"] = q.add("run", {"k": "dead"})
    [job] = q.claim(1)
    q.fail(job, "no", retry=False)
    ids["completed"] = q.add("run", {"k": "completed"})
    [job] = q.claim(1)
    q.complete(job, {"ok": 1})
    q.configure(max_attempts=1)  # stored: every job added after it gets 1
    ids["blocked"] = q.add("run", {"k": "blocked"}, depends_on=[ids["active"]])
    ids["delayed"] = q.add("run", {"k": "delayed"}, delay=1.0)
    ids["waiting"] = [q.add("run", {"k": f"w{i}"}) for i in range(3)]
    ids["heavy"] = [q.add("run", {"k": f"h{i}"}, group="heavy") for i in range(6)]
    ids["capped"] = [q.add("run", {"k": f"c{i}"}, group="capped") for i in range(3)]
    if len(sys.argv) > 3:  # more: a paused lane with jobs, a schedule
        q.set_lane("held", paused=True)
        ids["held"] = [q.add("run", {"k": f"p{i}"}, group="held") for i in range(2)]
        q.schedule("nightly", every=3600.0, name="tick")
print(json.dumps(ids))
"""


def older_source(tmp_path: Path, commit: str) -> Path:
    """The package as ``commit`` had it, extracted into ``tmp_path``."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("needs the repository's git history (the older format's code)")
    known = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], check=False
    )
    if known.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone (a shallow clone?)")
    archive = subprocess.run(
        [git, "-C", str(REPO), "archive", commit, "src/echomq"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    return tmp_path / "src"


def build_older_queue(
    tmp_path: Path, url: str, name: str, stored: int, *, more: bool = False
) -> dict[str, Any]:
    """The queue ``name`` written by the code of format ``stored`` (extracted into
    ``tmp_path / "src"``); ``more`` adds a paused lane with two jobs and a schedule.
    Returns the ids of the jobs it added, by kind."""
    source = older_source(tmp_path, FORMAT_COMMITS[stored])
    more_args = ["more"] if more else []
    ids: dict[str, Any] = json.loads(run_older(source, BUILD_FORMAT_1, url, name, *more_args))
    return ids


def run_older(source: Path, script: str, *args: str) -> str:
    """Run ``script`` (Python text) with the older code extracted at ``source``;
    returns the last line it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "PYTHONPATH": str(source)},
        cwd=source.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("stored", sorted(FORMAT_COMMITS))
def test_an_older_queue_is_upgraded_and_drains_in_order(
    tmp_path: Path, backend_url: str, queue_name: str, redis_client: redis.Redis, stored: int
) -> None:
    ids = build_older_queue(tmp_path, backend_url, queue_name, stored)
    keys = QueueKeys(queue_name)
    assert redis_client.hget(keys.meta, "v") == str(stored)
    if stored == 1:  # the default lane's count: in the lane controls' hash
        assert redis_client.hget(keys.lanectl, "a:") == "1"
    elif stored == 2:  # in the meta hash, beside format 2's mark fields
        assert redis_client.hget(keys.meta, "a:") == "1"
        assert {"fs", "fl", "fg"} <= set(redis_client.hgetall(keys.meta))
    else:  # in the meta hash; the feature word without format 4's tags letter
        assert redis_client.hget(keys.meta, "a:") == "1"
        assert "t" not in str(redis_client.hget(keys.meta, "f"))
    with SyncQueue(queue_name, backend_url) as q:
        assert q.get(ids["active"]) is not None  # the first call: the greeting upgrades
        meta = redis_client.hgetall(keys.meta)
        assert meta["v"] == str(storage.FORMAT)
        # the word: a setting, a lane control, a weight, no waiter; every job letter
        # (format 3 knew which of them its jobs held; format 4 adds tags)
        job_letters = set("gdt") if stored == 3 else set("kgdobt")
        word = str(meta["f"])
        assert set(re.sub(r"\d", "", word)) == set("scw") | job_letters
        assert re.search(r"s\d{16}", word), word  # the settings' version
        assert not {"fs", "fl", "fg", "fw"} & set(meta)
        assert meta["a:"] == "1" and redis_client.hget(keys.lanectl, "a:") is None
        probe = q.get(q.add("probe"))  # the stored setting is still obeyed (its letter: s)
        assert probe is not None and probe.max_attempts == 1
        assert q.remove(probe.id)

        states = {
            "active": "active",
            "retrying": "failed",
            "dead": "dead",
            "completed": "completed",
            "blocked": "blocked",
            "delayed": "delayed",
        }
        for kind, state in states.items():
            job = q.get(ids[kind])
            assert job is not None and job.state == state, (kind, job)
        for job_id in ids["waiting"] + ids["heavy"] + ids["capped"]:
            job = q.get(job_id)
            assert job is not None and job.state == "waiting"

        active = q.get(ids["active"])
        assert active is not None
        q.complete(active, {"ran": "after the upgrade"})  # releases the blocked job

        claimed: list[str] = []
        deadline = time.monotonic() + 20
        expected = 1 + 1 + 1 + 3 + 6 + 3  # retrying, blocked, delayed, waiting, heavy, capped
        while len(claimed) < expected:
            assert time.monotonic() < deadline, f"drained {len(claimed)} of {expected}"
            batch = q.claim(10)
            capped = [job for job in batch if job.group == "capped"]
            assert len(capped) <= 1, "the lane cap of 1 was not obeyed after the upgrade"
            for job in batch:
                claimed.append(job.id)
                q.complete(job, None)
            if not batch:
                time.sleep(0.05)
        assert len(claimed) == len(set(claimed)) == expected, "a job ran twice"
        waiting = [i for i in claimed if i in ids["waiting"]]
        assert waiting == ids["waiting"], "the default lane's order changed"
        heavy = [i for i in claimed if i in ids["heavy"]]
        assert heavy == ids["heavy"]
        counts = q.stats().counts
        assert counts["dead"] == 1 and counts["completed"] == expected + 2
        assert redis_client.hget(keys.meta, "a:") == "0"
        assert redis_client.hget(keys.lanectl, "a:") is None


def test_a_new_queue_is_written_in_the_current_format_and_the_greeting_writes_nothing_before(
    backend_url: str, queue_name: str, redis_client: redis.Redis
) -> None:
    keys = QueueKeys(queue_name)
    with SyncQueue(queue_name, backend_url) as q:
        assert q.stats().counts["waiting"] == 0  # the greeting ran: nothing was stored
        assert redis_client.exists(keys.meta) == 0
        q.add("j")
        assert redis_client.hget(keys.meta, "v") == str(storage.FORMAT)
        assert redis_client.hget(keys.meta, "f") == ""  # the feature word: nothing used


BUILD_TAGGED = r"""
import json, sys
from echomq import SyncQueue

url, name = sys.argv[1], sys.argv[2]
with SyncQueue(name, url) as q:
    tagged = q.add("tagged", 1, tags={"customer": "42"})
    [job] = q.claim(1)
    q.complete(job, None)
    print(json.dumps(tagged))
"""


def test_tags_a_format_3_client_wrote_leave_their_index_when_pruned_after_the_upgrade(
    tmp_path: Path, backend_url: str, queue_name: str, redis_client: redis.Redis
) -> None:
    """Format 3 knew no tags letter: the upgrade to 4 sets it, so a completion that
    prunes a tagged job a format-3 client wrote still takes it out of its index."""
    source = older_source(tmp_path, FORMAT_COMMITS[3])
    tagged = json.loads(run_older(source, BUILD_TAGGED, backend_url, queue_name))
    keys = QueueKeys(queue_name)
    index = "emq:{" + queue_name + "}:tag:customer=42"
    assert redis_client.hget(keys.meta, "v") == "3"
    assert "t" not in str(redis_client.hget(keys.meta, "f"))
    assert redis_client.zscore(index, tagged) is not None
    with SyncQueue(queue_name, backend_url, keep_completed=1) as q:
        q.add("plain", 1)
        [job] = q.claim(1)
        q.complete(job, None)  # prunes the tagged job for the count
        assert q.get(tagged) is None
    assert "t" in str(redis_client.hget(keys.meta, "f"))
    assert redis_client.exists(index) == 0
