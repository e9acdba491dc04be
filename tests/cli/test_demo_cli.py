"""``echomq demo`` on a private server: it finishes, reports, and leaves no keys behind."""

from __future__ import annotations

import re

import redis

from cli.clitools import RunCli


def test_demo_reports_shares_and_first_claims_then_cleans_up(
    cli: RunCli, backend_url: str, redis_client: redis.Redis
) -> None:
    args = ("demo", "--jobs", "90", "--work", "0.002", "--concurrency", "4", "--url", backend_url)
    proc = cli(*args, queue=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    match = re.search(r"on queue (demo-[0-9a-f]{8})", out)
    assert match is not None, out
    assert redis_client.keys(f"emq:{{{match.group(1)}}}:*") == []  # the demo queue is gone
    shares = dict(re.findall(r"│ (acme|globex|initech)\s+│\s+\d\s+│\s+[\d.]+%\s+│\s+(\d+)", out))
    assert set(shares) == {"acme", "globex", "initech"}
    # claimed 3 : 2 : 1 (up to one partial rotation) until acme runs out of jobs
    acme, globex, initech = (int(shares[g]) for g in ("acme", "globex", "initech"))
    assert acme >= 12 and abs(acme - 3 * initech) <= 3 and abs(globex - 2 * initech) <= 2
    claims = re.findall(r"│\s+(\d+) │ (\w+) \(w\d\)\s+│ (alert|report)\s+│\s+(\d)", out)
    assert [(lane, job, tier) for _, lane, job, tier in claims[:6]] == [
        ("acme", "alert", "0"),
        ("acme", "alert", "0"),
        ("acme", "report", "1"),
        ("globex", "alert", "0"),
        ("globex", "alert", "0"),
        ("initech", "alert", "0"),
    ]
    assert "90 jobs in" in out
    # the first claims' high counters are explained, with the figures of this run
    first_counter = re.search(r"│\s+1 │ acme \(w3\)\s+│ alert\s+│\s+0 │\s+(\d+) │", out)
    assert first_counter is not None, out
    assert f"Why alert {first_counter.group(1)} comes before report 1" in out, out
    assert "score = tier × 2^32 + counter" in out
    assert "echomq server stop" not in out  # on --url: no embedded server was started
