"""``echomq inspect`` reads a long field's first 64 KiB; ``--whole`` reads it all."""

from __future__ import annotations

import json

import orjson

from cli.clitools import RunCli
from echomq import SyncQueue
from echomq.engine import PREVIEW_BYTES

STORED = 400_000  # bytes of the payload as stored: over the preview, under max_payload


def test_inspect_shows_a_long_payload_truncated_and_whole_on_request(
    cli: RunCli, sq: SyncQueue
) -> None:
    data = {"blob": "<x>" * ((STORED - len('{"blob":""}')) // 3)}
    stored = orjson.dumps(data)
    job_id = sq.add("import", data)
    [job] = sq.claim(1)
    error = "E" * 200_000
    sq.fail(job, error, "Traceback (most recent call last):\n  ValueError: " + error)

    shown = cli("inspect", job_id)
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())
    assert f"data (truncated: the first 64.0 KiB of {len(stored) / 1024:.1f} KiB shown;" in words
    assert "last error (truncated: the first 64.0 KiB of 195.3 KiB shown;" in words
    assert "traceback (truncated: the first 64.0 KiB of" in words
    assert len(shown.stdout) < 4 * PREVIEW_BYTES  # three previews, not 800 KB of fields

    as_json = json.loads(cli("inspect", job_id, "--json").stdout)
    assert as_json["data"] is None and as_json["error"] is None
    cut = as_json["truncated"]["data"]
    assert cut["size"] == len(stored) and stored.startswith(cut["preview"].encode())
    assert cut["shown"] == PREVIEW_BYTES
    assert set(as_json["truncated"]) == {"data", "error", "traceback"}

    whole = json.loads(cli("inspect", job_id, "--json", "--whole").stdout)
    assert whole["data"] == data and whole["error"] == error and whole["truncated"] == {}
    whole_text = cli("inspect", job_id, "--whole").stdout
    assert "(truncated:" not in whole_text and len(whole_text) > 2 * STORED

    small = sq.add("small", {"fits": True})
    assert json.loads(cli("inspect", small, "--json").stdout)["truncated"] == {}
    removed = cli("remove", job_id)
    assert removed.returncode == 0 and "(import, failed)" in removed.stdout
