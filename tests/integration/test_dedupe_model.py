"""Random operations on a real server (frozen clock) and on tests/dedupe_model.py
give the same ids, states and data (DESIGN §10 "Deduplication and debounce").

Each seed runs a few hundred operations over one key per mode: adds, claims,
completions, failures with and without a retry, removals, maintenance and clock
moves chosen to land on and beside the windows' edges. A failure prints the
seed and the operations so far.
"""

from __future__ import annotations

import random

import pytest

from conftest import FrozenServer
from dedupe_model import DedupeModel, Rule
from echomq import Dedupe, SyncQueue

RULES = {
    "d": Rule("drop", window=2_000),
    "t": Rule("throttle", window=2_000),
    "b": Rule("debounce", window=1_000, max_wait=3_000),
    "l": Rule("latest"),
}
STEPS = (0, 1, 999, 1_000, 1_001, 1_999, 2_000, 3_000)
OPERATIONS = 250


def dedupe_of(key: str) -> Dedupe:
    rule = RULES[key]
    window = rule.window / 1000 if rule.window else None
    max_wait = rule.max_wait / 1000 if rule.max_wait else None
    return Dedupe(key, rule.mode, window, max_wait)  # type: ignore[arg-type]


def check_jobs(q: SyncQueue, model: DedupeModel, trail: list[str]) -> None:
    for job_id, want in model.jobs.items():
        job = q.get(job_id)
        assert job is not None, (job_id, trail[-20:])
        assert (str(job.state), job.data) == (want.state, want.data), (job_id, want, trail[-20:])


@pytest.mark.parametrize("seed", [1, 2, 3, random.randrange(1_000_000)])
def test_dedupe_follows_the_model(frozen_server: FrozenServer, queue_name: str, seed: int) -> None:
    rng = random.Random(seed)
    clock = frozen_server.clock
    q = SyncQueue(queue_name, frozen_server.url, max_attempts=1000)
    model = DedupeModel(clock.now_ms)
    trail: list[str] = [f"seed {seed}"]
    active: dict[str, object] = {}  # id -> the Job a claim gave
    try:
        for n in range(OPERATIONS):
            op = rng.choice(
                ["add"] * 6 + ["claim", "complete", "fail", "retry", "remove", "tick", "maintain"]
            )
            if op == "add":
                key = rng.choice(list(RULES))
                data = {"n": n}
                kept, behind = model.add(key, RULES[key], data)
                got = q.add("j", data, dedupe=dedupe_of(key))
                trail.append(f"add {key} {data} -> {got} (model {kept}, behind {behind})")
                if kept is None:
                    assert got not in model.jobs, trail[-20:]
                    model.made(got, key, RULES[key], data, behind)
                else:
                    assert got == kept, trail[-20:]
            elif op == "claim":
                claimed = q.claim(50, lease=3_600)
                trail.append(f"claim -> {[j.id for j in claimed]}")
                assert {j.id for j in claimed} == model.claim_all(), trail[-20:]
                active.update({j.id: j for j in claimed})
            elif op in ("complete", "fail", "retry") and active:
                job_id = rng.choice(sorted(active))
                job = active.pop(job_id)
                trail.append(f"{op} {job_id}")
                if op == "complete":
                    q.complete(job)  # type: ignore[arg-type]
                    model.complete(job_id, RULES)
                else:
                    retry = op == "retry"
                    q.fail(job, "boom", retry=retry, retry_delay=0 if retry else None)  # type: ignore[arg-type]
                    model.fail(job_id, retry, RULES)
            elif op == "remove" and model.jobs:
                job_id = rng.choice(sorted(model.jobs))
                trail.append(f"remove {job_id}")
                assert q.remove(job_id)
                model.remove(job_id)
                active.pop(job_id, None)
            elif op == "tick":
                step = rng.choice(STEPS)
                clock.advance(step)
                model.now = clock.now_ms
                trail.append(f"tick {step}")
            elif op == "maintain":
                q.maintain()
                model.maintain()
                trail.append("maintain")
            check_jobs(q, model, trail)
    finally:
        q.close()
