"""The page itself in headless Chromium (Debian's ``chromium``, driven by Playwright).

Skipped with a reason when Playwright or a Chromium binary is missing (a
failure when ``CI`` is set: tests/prerequisites.py); CI installs both
(``apt-get install chromium``; never ``playwright install``).
Runs on Valkey only: the API tests cover both backends. The last test keeps a
screenshot in ``test-artifacts/dashboard.png``.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from echomq import SyncQueue
from echomq.score import encode
from prerequisites import missing
from web.conftest import Dashboard, StartDashboard
from web.webtools import TOKEN, make_dead, wait_for

try:
    import playwright.sync_api as playwright_api
except ImportError:
    missing("playwright", "pip install -e '.[dev]'", module=True)

CHROMIUM_ENV = "ECHOMQ_CHROMIUM"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1440, "height": 1000}
UI_TIMEOUT_MS = 10_000

pytestmark = pytest.mark.parametrize("backend", ["valkey"], indirect=True)


def chromium_path() -> str | None:
    """$ECHOMQ_CHROMIUM, else Debian's chromium on PATH."""
    found = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")
    return found if found and os.access(found, os.X_OK) else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        missing("chromium", "Debian: apt-get install chromium; or set ECHOMQ_CHROMIUM")
    with playwright_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, start_dashboard: StartDashboard) -> Iterator[Any]:
    """A fresh page; fails the test on any script error or console error it logged.

    It depends on ``start_dashboard`` so that it closes before the dashboards stop.
    """
    context = browser.new_context(viewport=VIEWPORT)
    opened = context.new_page()
    opened.set_default_timeout(UI_TIMEOUT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield opened
    context.close()
    unexpected = [e for e in errors if "status of 40" not in e]  # refused actions are 40x
    assert unexpected == []


def open_dashboard(
    page: Any, d: Dashboard, queue: str, token: str | None = None, lanes: bool = True
) -> None:
    """Open the page on ``queue`` and wait for its first render (and its lanes)."""
    fragment = f"#q={queue}" + (f"&token={token}" if token else "")
    page.goto(d.base + "/" + fragment)
    page.wait_for_selector("#queue-view", state="visible")
    if lanes:
        page.wait_for_selector("#lanes tbody tr")


def seed_lanes(q: SyncQueue) -> None:
    q.set_weight("acme", 3)
    q.add_many(
        [
            {"name": "send", "group": g, "priority": p}
            for g in ("acme", "globex", None)
            for p in (0, 0, 1, 4)
        ]
    )


def test_page_shows_the_queue_its_lanes_and_tiers_read_only(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    seed_lanes(sq)
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    assert page.locator("#queues tbody tr").count() == 1
    assert page.text_content("#q-name") == sq.name
    assert page.text_content('.card[data-state="waiting"] .value') == "12"
    labels = page.locator("#lanes tbody tr").evaluate_all("rows => rows.map(r => r.dataset.lane)")
    assert labels == ["acme", "globex", "(default)"]
    assert page.text_content('#lanes tr[data-lane="acme"] .weight-value') == "3"
    tiers = page.locator('#tiers .tier-lane[data-lane="globex"] .tier-row').evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.tier), Number(r.dataset.count)])"
    )
    assert tiers == [[0, 2], [1, 1], [4, 1]]
    # read-only: no token form (none configured), every action button disabled
    assert page.text_content("#mode") == "read-only (no token configured)"
    assert page.is_hidden("#token-form")
    assert page.locator("button.action:enabled").count() == 0
    status = page.evaluate(
        """async (q) => (await fetch(`/api/queues/${q}/pause`, {
        method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"})).status""",
        sq.name,
    )
    assert status == 403
    assert not sq.stats().paused


def test_schedules_panel_lists_schedules_as_text(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.schedule("nightly", cron="0 3 * * *", tz="Europe/Berlin", name="<img src=x onerror=1>")
    sq.schedule("beat", every=30, name="ping")
    sq.pause_schedule("beat")
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name, lanes=False)
    page.wait_for_selector("#schedules tbody tr")
    ids = page.locator("#schedules tbody tr").evaluate_all("rs => rs.map(r => r.dataset.schedule)")
    assert ids == ["beat", "nightly"]
    nightly = page.text_content('#schedules tr[data-schedule="nightly"]') or ""
    assert "0 3 * * * (Europe/Berlin)" in nightly and "<img src=x onerror=1>" in nightly
    # its next fire in its own zone, labelled, as the CLI shows it (not the browser's zone)
    assert re.search(r"\d{4}-\d\d-\d\d 03:00:00 CES?T \(in \d+[smh]\)", nightly), nightly
    assert page.locator("#schedules img").count() == 0
    assert "paused" in (page.text_content('#schedules tr[data-schedule="beat"]') or "")
    assert page.text_content('.card[data-state="blocked"] .value') == "0"


def test_change_a_weight_with_the_token(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    seed_lanes(sq)
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name, token=TOKEN)
    page.wait_for_selector("body.unlocked")
    assert page.url.endswith(f"#q={sq.name}")  # the token left the address bar
    page.fill('input[data-weight-for="globex"]', "5")
    page.click('button[data-set-weight="globex"]')
    wait_for(lambda: sq.weights().get("globex") == 5, what="weight 5 on the server")
    page.click("#lock")
    page.wait_for_function(
        """() => document.querySelector('#lanes tr[data-lane="globex"] .weight-value')
                 .textContent === "5" """
    )
    page.wait_for_selector('#audit td:text-is("set_weight")')


def test_lift_a_lane_throttle_with_the_token(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    seed_lanes(sq)
    sq.throttle("globex", 10 * 365 * 86_400)
    assert [j.group for j in sq.claim(4)] == ["acme", "acme", "acme", None]  # globex parked
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name, token=TOKEN)
    page.wait_for_selector("body.unlocked")
    lift = 'button[data-unthrottle="globex"]'
    page.wait_for_selector(lift, state="visible")
    assert "throttled until" in (page.text_content('#lanes tr[data-lane="globex"]') or "")
    assert page.is_hidden('button[data-unthrottle="acme"]')
    page.click(lift)
    wait_for(lambda: all(x.throttled_until is None for x in sq.lanes()), what="the throttle lifted")
    page.wait_for_selector(lift, state="hidden")
    page.wait_for_selector('#audit td:text-is("unthrottle")')
    assert "globex" in {j.group for j in sq.claim(8)}  # served again


def test_retry_a_dead_job_after_unlocking(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    dead = make_dead(sq, 2, error="smtp 550 mailbox unavailable")
    sq.add("keeps-the-ring-busy")
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name)
    page.wait_for_selector(f'#dead tr[data-job-id="{dead[0]}"]')
    assert page.is_disabled(f'button[data-retry="{dead[0]}"]')
    page.fill("#token-input", "not-the-token")
    page.click("#token-form button")
    page.wait_for_selector('#banner:has-text("unlock refused")')
    assert page.text_content("#mode") == "read-only"
    page.fill("#token-input", TOKEN)
    page.click("#token-form button")
    page.wait_for_selector("body.unlocked")
    page.click(f'button[data-retry="{dead[0]}"]')
    page.wait_for_selector(f'#dead tr[data-job-id="{dead[0]}"]', state="detached")
    job = sq.get(dead[0])
    assert job is not None and job.state == "waiting"
    assert [j.id for j in sq.dead()] == [dead[1]]


def test_drop_the_queue_after_confirming(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    seed_lanes(sq)
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name, token=TOKEN)
    page.wait_for_selector("body.unlocked")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss() if len(asked) == 1 else dialog.accept()

    page.on("dialog", answer)
    page.click("#drop-btn")  # dismissed: nothing happens
    wait_for(lambda: len(asked) == 1, what="the confirmation")
    assert f"Drop queue {sq.name}" in asked[0]
    assert sq.exists() is True
    page.click("#drop-btn")
    wait_for(lambda: not sq.exists(), what="the queue dropped")
    page.wait_for_selector('#audit td:text-is("drop")')


def test_an_evicting_server_shows_a_banner(
    page: Any, start_dashboard: StartDashboard, server_factory: Any, backend_url: str
) -> None:
    evicting = server_factory("valkey", {"maxmemory": "256mb", "maxmemory-policy": "allkeys-lru"})
    with SyncQueue("shown", evicting.url) as shown:
        shown.add("x")
    d = start_dashboard(evicting.url)
    open_dashboard(page, d, "shown", lanes=False)
    page.wait_for_selector("#eviction", state="visible")
    assert "allkeys-lru" in (page.text_content("#eviction") or "")
    safe = start_dashboard(backend_url)
    page.goto(safe.base + "/")
    page.wait_for_function("() => document.querySelector('#server').textContent !== ''")
    assert page.is_hidden("#eviction")


def test_inspector_draws_the_score_as_tier_and_counter_bits(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    job_id = sq.add("render", {"page": 7}, priority=5)
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.click(f'#jobs tr[data-job-id="{job_id}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{job_id}"]')
    job = sq.get(job_id)
    assert job is not None
    assert page.locator("#inspector .bit").count() == 53
    assert page.locator("#inspector .bit.tier").count() == 21
    tier_bits = "".join(page.locator("#inspector .bit.tier").all_text_contents())
    counter_bits = "".join(page.locator("#inspector .bit.counter").all_text_contents())
    assert int(tier_bits, 2) == 5 and (5 << 32) + int(counter_bits, 2) == job.score
    assert '"page": 7' in page.text_content("#inspector pre")


def test_score_explorer_and_the_two_job_comparison(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    sq.add("x")
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.fill("#ex-tier", "2")
    page.fill("#ex-counter", "7")
    assert page.get_attribute("#ex-score", "data-score") == str(encode(2, 7))
    page.fill("#ex-tier", str(2**21 - 1))
    page.fill("#ex-counter", str(2**32 - 1))
    assert page.get_attribute("#ex-score", "data-score") == str(encode(2**21 - 1, 2**32 - 1))
    page.hover('#ex-bits .bit[data-bit="40"]')
    assert page.get_attribute("#explorer", "data-hl") == "tier"
    assert "Bit 40" in page.text_content("#ex-hover")
    page.hover('#ex-bits .bit[data-bit="3"]')
    assert page.get_attribute("#explorer", "data-hl") == "counter"
    page.fill("#ex-tier-range", "500")  # the slider (log scale) drives the number field
    assert int(page.input_value("#ex-tier")) == round(2**10.5) - 1
    page.fill("#ex-tier", "1")
    page.fill("#ex-counter", "999")
    assert page.get_attribute("#ex-score", "data-score") == "4294968295"
    assert page.get_attribute("#cmp-verdict", "data-first") == "A"  # tier 1 beats tier 2
    page.fill("#cmp-b-tier", "1")
    page.fill("#cmp-b-counter", "5")
    assert page.get_attribute("#cmp-verdict", "data-first") == "B"  # same tier, earlier
    assert "arrived first" in page.text_content("#cmp-verdict")


class Load:
    """A producer and a consumer thread on one queue, for a bounded time."""

    def __init__(self, url: str, queue: str, seconds: float) -> None:
        self.url, self.queue, self.seconds = url, queue, seconds
        self.stop = threading.Event()
        self.added = self.completed = 0
        self.threads = [
            threading.Thread(target=self._produce),
            threading.Thread(target=self._consume),
        ]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)

    def _running(self, started: float) -> bool:
        return not self.stop.is_set() and time.monotonic() - started < self.seconds

    def _produce(self) -> None:
        q, started = SyncQueue(self.queue, self.url), time.monotonic()
        try:
            while self._running(started):
                groups = ("acme", "globex", "initech", None)
                q.add_many(
                    [
                        {"name": "work", "group": groups[i % 4], "priority": i % 3}
                        for i in range(100)
                    ]
                )
                self.added += 100
        finally:
            q.close()

    def _consume(self) -> None:
        q, started = SyncQueue(self.queue, self.url), time.monotonic()
        try:
            while self._running(started):
                jobs = q.claim(80)
                if jobs:
                    q.complete_many([(j, None) for j in jobs])
                    self.completed += len(jobs)
        finally:
            q.close()


def test_live_updates_under_load_and_keep_a_screenshot(
    page: Any,
    start_dashboard: StartDashboard,
    backend_url: str,
    sq: SyncQueue,
    request: pytest.FixtureRequest,
) -> None:
    sq.set_weight("acme", 3)
    sq.set_weight("globex", 2)
    make_dead(sq, 3, error="smtp 550 mailbox unavailable")
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN, interval=0.3)
    open_dashboard(page, d, sq.name, token=TOKEN, lanes=False)
    seen: list[int] = []

    def completed_total() -> int:  # the card is capped by retention; the total is not
        return int(page.get_attribute("#totals", "data-completed") or 0)

    with Load(backend_url, sq.name, seconds=12.0) as load:

        def page_moved() -> bool:
            value = completed_total()
            if not seen or value != seen[-1]:
                seen.append(value)
            return len(seen) >= 4

        wait_for(page_moved, timeout=10.0, what="the page to update while under load")
        latency = timed_get(d, f"/api/queues/{sq.name}")
    assert seen == sorted(seen) and seen[-1] > seen[0]
    assert load.completed > 0 and latency < 2.0
    page.wait_for_function(
        "() => !document.querySelector('#rate-now').textContent.startsWith('collecting')"
    )
    first_dead = sq.dead()[0].id
    page.click(f'#dead tr[data-job-id="{first_dead}"] td.clickable')
    page.wait_for_selector(f'#inspector[data-job-id="{first_dead}"]')
    page.hover('#ex-bits .bit[data-bit="44"]')
    page.evaluate("window.scrollTo(0, 0)")
    artifacts = Path(request.config.rootpath) / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)
    assert (artifacts / "dashboard.png").stat().st_size > 10_000


def timed_get(d: Dashboard, path: str) -> float:
    started = time.monotonic()
    assert d.http.get(path).status_code == 200
    return time.monotonic() - started


def test_blocked_jobs_tab_and_the_inspector_show_dependencies(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    parent = sq.add("parent")
    child = sq.add("child", depends_on=[parent])
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    assert page.text_content('.card[data-state="blocked"] .value') == "1"
    page.click('#job-tabs button[data-state="blocked"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{child}"]')
    page.click(f'#jobs tr[data-job-id="{child}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{child}"]')
    fields = page.text_content("#inspector table.fields") or ""
    assert "blocked" in fields and f"depends on1 of 1 pending: {parent}" in fields
    story = page.locator("#timeline td:nth-child(2)").all_text_contents()
    assert story == ["added"]  # the job's events, from the stream
    # the parent's inspector names it as a dependent
    page.click('#job-tabs button[data-state="waiting"]')
    page.click(f'#jobs tr[data-job-id="{parent}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{parent}"]')
    assert f"dependents1 blocked: {child}" in (page.text_content("#inspector table.fields") or "")


def test_the_inspector_counts_pending_dependencies_and_links_them(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    parents = sq.add_many([{"name": f"p{i}"} for i in range(12)])
    child = sq.add("child", depends_on=parents)
    for job in sq.claim(2):  # two of them complete
        sq.complete(job, None)
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.fill("#inspect-id", child)
    page.click("#inspect-form button[type=submit]")
    page.wait_for_selector(f'#inspector[data-job-id="{child}"]')
    fields = page.text_content("#inspector table.fields") or ""
    assert "depends on10 of 12 pending: " in fields and "(and 2 more)" in fields
    assert page.locator("#inspector a[data-inspect]").count() == 10
    page.click(f'#inspector a[data-inspect="{parents[3]}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{parents[3]}"]')


def test_job_lists_page_through_every_job(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    """Issue 14: the list once showed 15 rows and no more; now 50 a page, with paging."""
    ids = sq.add_many([{"name": f"n{i}"} for i in range(120)])
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    shown = "rows => rows.map(r => r.dataset.jobId)"
    page.wait_for_selector(f'#jobs tr[data-job-id="{ids[49]}"]')
    assert page.locator("#jobs tbody tr").evaluate_all(shown) == ids[:50]
    assert page.is_disabled('#jobs-pager button[data-page="prev"]')
    page.click('#jobs-pager button[data-page="next"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{ids[50]}"]')
    assert page.locator("#jobs tbody tr").evaluate_all(shown) == ids[50:100]
    page.click('#jobs-pager button[data-page="next"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{ids[119]}"]')
    assert page.locator("#jobs tbody tr").evaluate_all(shown) == ids[100:]
    assert page.is_disabled('#jobs-pager button[data-page="next"]')
    assert "rows 101–120" in page.text_content("#jobs-pager")
    page.click('#jobs-pager button[data-page="prev"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{ids[50]}"]')


def test_inspector_marks_a_long_payload_truncated_and_downloads_it_whole(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    data = {"rows": ["<b>row</b> é"] * 20_000}  # ~340 KB stored, over the 64 KiB preview
    job_id = sq.add("export", data)
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.click(f'#jobs tr[data-job-id="{job_id}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{job_id}"]')
    mark = page.locator('#inspector p.truncated[data-field="data"]')
    assert "truncated: the first 64.0 KiB of 312.5 KiB shown" in (mark.text_content() or "")
    shown = page.locator("#inspector pre").first.text_content() or ""
    assert shown.startswith('{"rows":["<b>row</b> é"') and shown.endswith("…")
    assert 60_000 < len(shown.encode()) < 66_000  # the preview, as text (never parsed as HTML)
    link = mark.locator("a")
    assert link.get_attribute("href") == f"/api/queues/{sq.name}/jobs/{job_id}/fields/data"
    with page.expect_download() as download:
        link.click()
    saved = Path(download.value.path()).read_bytes()
    assert saved == orjson.dumps(data)
    assert download.value.suggested_filename == f"{job_id}-data.json"


def test_the_inspector_shows_a_childs_batch(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    b = sq.batch(on_success={"name": "done"}, on_death={"name": "alarm"})
    first, *_ = b.add_many([{"name": "child", "data": "<b>x</b>"}] * 4)
    b.close()
    sq.complete(sq.claim(1)[0])
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.click('#job-tabs button[data-state="completed"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{first}"]')
    page.click(f'#jobs tr[data-job-id="{first}"]')
    page.wait_for_selector(f'#inspector .batch[data-batch="{b.id}"]')
    box = page.text_content("#inspector .batch") or ""
    assert "1 of 4 finished: running" in box
    assert "waiting 3 · active 0 · completed 1 · dead 0 · cancelled 0" in box
    assert "on_success: not fired" in box and "on_death: not fired" in box
    assert page.get_attribute("#inspector .batch progress", "value") == "1"
    assert f"batch{b.id}" in (page.text_content("#inspector table.fields") or "")


def test_the_batches_view_follows_progress_and_cancels_a_batch(
    page: Any,
    start_dashboard: StartDashboard,
    backend_url: str,
    sq: SyncQueue,
    request: pytest.FixtureRequest,
) -> None:
    markup = "report<img src=x onerror=alert(1)>"
    done = sq.batch(on_success={"name": markup}, on_death={"name": "alarm"})
    done.add_many([{"name": "child"}] * 2)
    done.close()
    sq.complete_many([(job, None) for job in sq.claim(2)])
    fired = sq.batch_status(done.id).callbacks["on_success"]
    assert fired is not None
    big = sq.batch(on_complete={"name": "never"})
    children = big.add_many([{"name": "resize", "data": i} for i in range(6)])
    big.close()
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name)
    page.wait_for_selector(f'#batches tr[data-batch="{done.id}"]')
    rows = page.locator("#batches tbody tr").evaluate_all("rows => rows.map(r => r.dataset.batch)")
    assert rows == [big.id, done.id]  # newest first
    # a batch id in the search box opens its view; a callback's name is shown as text
    page.fill("#search-tags", done.id)
    page.click("#search-form button")
    page.wait_for_selector(f'#batch-view[data-batch="{done.id}"][data-state="succeeded"]')
    on_success = page.locator('#batch-view tr[data-callback="on_success"] td')
    assert on_success.all_text_contents() == ["on_success", fired, markup, "delayed"]
    assert page.locator("#batch-view img").count() == 0
    assert "not fired" in (page.text_content('#batch-view tr[data-callback="on_death"]') or "")
    assert page.is_hidden("#batch-view [data-cancel-batch]")  # finished: nothing to cancel
    kinds = page.locator("#batch-view .batch-events td:nth-child(2)").all_text_contents()
    assert kinds == ["batch_created", "batch_closed", "batch_succeeded"]
    # a child's inspector links to its batch's view
    page.wait_for_selector(f'#jobs tr[data-job-id="{children[0]}"]')
    page.click(f'#jobs tr[data-job-id="{children[0]}"]')
    page.click(f'#inspector table.fields a[data-open-batch="{big.id}"]')
    page.wait_for_selector(f'#batch-view[data-batch="{big.id}"][data-state="running"]')
    view = "#batch-view"
    assert page.get_attribute(f"{view} progress", "max") == "6"
    assert page.get_attribute(f"{view} progress", "value") == "0"
    # children complete elsewhere: the bar and the counts follow (live events)
    claimed = sq.claim(2)
    assert [job.batch for job in claimed] == [big.id, big.id]
    sq.complete_many([(job, None) for job in claimed])
    page.wait_for_function(
        "() => document.querySelector('#batch-view progress').getAttribute('value') === '2'"
        " && document.querySelector('#batch-view .card[data-state=\"completed\"] .value')"
        ".textContent === '2'"
    )
    assert page.text_content(f'{view} .card[data-state="waiting"] .value') == "4"
    assert "2 of 6 finished (33.3%)" in (page.text_content(f"{view} .batch-progress") or "")
    big_row = f'#batches tr[data-batch="{big.id}"]'
    page.wait_for_selector(f'{big_row} td[data-count="completed"]:text-is("2")')
    # cancel: refused until unlocked, then asked first, then audited
    cancel = f'{view} button[data-cancel-batch="{big.id}"]'
    assert page.is_disabled(cancel)
    page.fill("#token-input", TOKEN)
    page.click("#token-form button")
    page.wait_for_selector("body.unlocked")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss() if len(asked) == 1 else dialog.accept()

    page.on("dialog", answer)
    page.click(cancel)  # dismissed: nothing happens
    wait_for(lambda: len(asked) == 1, what="the confirmation")
    assert f"Cancel batch {big.id}" in asked[0]
    assert sq.batch_status(big.id).state == "running"
    page.click(cancel)
    page.wait_for_selector(f'#batch-view[data-batch="{big.id}"][data-state="cancelled"]')
    assert page.text_content(f'{view} .card[data-state="cancelled"] .value') == "4"
    assert page.is_hidden(cancel)
    status = sq.batch_status(big.id)
    assert (status.state, status.cancelled, status.completed) == ("cancelled", 4, 2)
    page.wait_for_selector('#audit td:text-is("cancel_batch")')
    page.wait_for_selector(f'{big_row}[data-state="cancelled"]')
    artifacts = Path(request.config.rootpath) / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    page.locator("#batches-panel").screenshot(path=str(artifacts / "dashboard-batches.png"))


def test_search_by_tags_pages_by_cursor_and_a_job_id_opens_the_inspector(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    ids = sq.add_many(
        [{"name": "invoice", "data": i, "tags": {"customer": str(i % 2)}} for i in range(130)]
    )
    mine = [job_id for i, job_id in enumerate(ids) if i % 2 == 0][::-1]  # newest first
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    shown = "rows => rows.map(r => r.dataset.jobId)"
    page.fill("#search-tags", "customer=0")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector(f'#jobs tr[data-job-id="{mine[0]}"]')
    assert page.locator("#jobs tbody tr").evaluate_all(shown) == mine[:50]
    assert "customer=0" in page.text_content("#search-shown")
    page.click('#jobs-pager button[data-page="next"]')
    page.wait_for_selector(f'#jobs tr[data-job-id="{mine[50]}"]')
    assert page.locator("#jobs tbody tr").evaluate_all(shown) == mine[50:]
    assert "rows 51–65" in page.text_content("#jobs-pager")
    page.fill("#search-tags", "nonsense")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#banner.error")  # refused, said, and the list goes back to a state
    page.wait_for_selector(f'#jobs tr[data-job-id="{ids[49]}"]')
    page.fill("#search-tags", ids[7])
    page.click("#search-form button[type=submit]")
    wait_for(lambda: ids[7] in (page.text_content("#inspector") or ""), what="the inspector")


def test_a_bulk_action_on_a_search_runs_in_steps_to_the_end(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    from echomq.web.bulk import STEP

    found = sq.add_many([{"name": "n", "tags": {"customer": "42"}} for _ in range(2 * STEP + 5)])
    kept = sq.add("n", tags={"customer": "7"})
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name, token=TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    page.fill("#search-tags", "customer=42")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector(f'#jobs tr[data-job-id="{found[-1]}"]')
    page.click('[data-bulk="remove"]')
    wait_for(lambda: "remove: 205 done" in (page.text_content("#bulk-status") or ""), what="steps")
    assert sq.stats().counts["waiting"] == 1 and sq.get(kept) is not None
    wait_for(lambda: page.locator("#jobs tbody tr").count() == 0, what="the emptied search")


def test_a_bulk_retry_draws_a_determinate_bar_that_goes_up_to_its_max(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    from echomq.web.bulk import STEP

    n = 3 * STEP + 17
    dead = sq.add_many(
        [{"name": "n", "tags": {"customer": "42"}, "max_attempts": 1} for _ in range(n)]
    )
    for job in sq.claim(n):
        sq.fail(job, "boom")
    waiting = sq.add_many([{"name": "n", "tags": {"customer": "42"}} for _ in range(40)])
    d = start_dashboard(backend_url, queues=[sq.name], token=TOKEN)
    open_dashboard(page, d, sq.name, token=TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    page.fill("#search-tags", "customer=42")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector(f'#jobs tr[data-job-id="{waiting[-1]}"]')
    # every value the bar takes, as the page sets it
    page.evaluate(
        """() => {
        const bar = document.getElementById("bulk-progress");
        window.barSeen = [];
        new MutationObserver(() => window.barSeen.push([bar.value, bar.max])).observe(
            bar, { attributes: true, attributeFilter: ["value", "max"] });
    }"""
    )
    page.click('[data-bulk="retry"]')
    wait_for(
        lambda: f"retry: {n} done" in (page.text_content("#bulk-status") or ""), what="the steps"
    )
    bar = page.locator("#bulk-progress")
    assert bar.is_visible() and bar.get_attribute("aria-label")
    total = n + 40  # every job the search walks
    assert page.evaluate("() => document.getElementById('bulk-progress').max") == total
    assert page.evaluate("() => document.getElementById('bulk-progress').value") == total
    values = [v for v, m in page.evaluate("() => window.barSeen") if m == total]
    assert values == sorted(values) and values[-1] == total
    assert any(0 < v < total for v in values), values  # it moved through the steps
    assert "100.0% of the search" in (page.text_content("#bulk-status") or "")
    assert sq.stats().counts["dead"] == 0
    assert {sq.get(job_id).state for job_id in dead} == {"waiting"}  # type: ignore[union-attr]


def test_the_first_view_lists_the_rings_first_lane_at_once(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    # no job in the default lane: the page learns the ring's first lane with its
    # first read and must list it then, not at a refresh 10 x 60 s later
    ids = sq.add_many([{"name": "n", "group": g} for g in ("acme", "globex")])
    d = start_dashboard(backend_url, queues=[sq.name], interval=60.0)
    open_dashboard(page, d, sq.name)
    rows = "rows => rows.map(r => r.dataset.jobId)"
    wait_for(
        lambda: page.locator("#jobs tbody tr").evaluate_all(rows) in ([ids[0]], [ids[1]]),
        timeout=5.0,
        what="the first lane's jobs",
    )


def test_inspector_shows_where_a_waiting_job_stands(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    ids = sq.add_many([{"name": "j", "group": g} for g in ("a", "a", "b")])
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name)
    page.click(f'#jobs tr[data-job-id="{ids[1]}"]')
    page.wait_for_selector(f'#inspector[data-job-id="{ids[1]}"]')
    # a b a: the second a job waits for 2 claims, 1 of them in its lane
    rows = page.locator("#inspector-position tr").all_text_contents()
    assert rows[0] == "ahead in its lane1"
    assert rows[1].startswith("claims before it2 ")
    assert rows[2].startswith("estimated waitunknown")


def test_inspector_shows_the_job_log_as_text_and_the_workers_panel_lists_workers(
    page: Any, start_dashboard: StartDashboard, backend_url: str, sq: SyncQueue
) -> None:
    from echomq.joblogs import JobLog
    from echomq.registry import info_text

    sq.add("logged")
    [job] = sq.claim(1, worker="w-browser")
    job._log = JobLog(job.attempts)
    job.log("charging <img src=x onerror=alert(1)>")
    job.log("declined", level="ERROR")
    sq.complete(job, None)
    sq.worker_beat("w-browser", 30.0, info_text("host-b", 11, [sq.name], 4, []))
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name, lanes=False)  # no job waits: no lane to show
    page.wait_for_selector('#workers tr[data-worker="w-browser"]')
    assert "host-b:11" in page.text_content('#workers tr[data-worker="w-browser"]')
    page.fill("#inspect-id", job.id)
    page.click("#inspect-form button")
    page.wait_for_selector(f'#inspector[data-job-id="{job.id}"]')
    log = page.text_content("#inspector .job-log")
    assert "charging <img src=x onerror=alert(1)>" in log and "declined" in log
    assert page.locator("#inspector .job-log img").count() == 0  # shown as text
    assert page.locator("#inspector .job-log .log-error").count() == 1
    assert "w-browser" in page.text_content("#inspector .fields")


def test_job_names_panel_shows_the_server_metrics_and_draws_a_name(
    page: Any,
    start_dashboard: StartDashboard,
    backend_url: str,
    sq: SyncQueue,
    request: pytest.FixtureRequest,
) -> None:
    sq.configure(metrics=True)
    sq.add_many([{"name": "send<b>"} for _ in range(4)] + [{"name": "bill"}])
    jobs = sq.claim(5)
    sq.complete_many([(job, None) for job in jobs if job.name != "bill"])
    sq.fail(next(job for job in jobs if job.name == "bill"), "no", retry=False)
    sq.cancel(sq.add("bill"))  # cancelled before it ran
    d = start_dashboard(backend_url, queues=[sq.name])
    open_dashboard(page, d, sq.name, lanes=False)
    row = page.wait_for_selector('#metrics tr[data-name="send<b>"]')
    cells = row.query_selector_all("td")
    assert [c.text_content() for c in cells[:5]] == ["send<b>", "4", "0", "0", "0"]
    assert "█" in (cells[5].text_content() or "")
    bill = page.query_selector('#metrics tr[data-name="bill"]')
    assert bill is not None
    assert [c.text_content() for c in bill.query_selector_all("td")][3:5] == ["1", "1"]
    row.click()
    page.wait_for_selector("#metrics-chart:not([hidden])")
    assert "send<b>" in page.text_content("#metrics-chart-legend")
    artifacts = Path(request.config.rootpath) / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    page.locator("#metrics-panel").screenshot(path=str(artifacts / "dashboard-metrics.png"))
