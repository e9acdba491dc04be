// echomq dashboard: plain JS, no build step. Follows the open queue's event
// stream (server-sent events, /api/queues/Q/events): each message re-reads the
// API at once (one request chain at a time, at most one every LIVE_GAP ms, so
// a busy queue never piles requests up) and redraws in place. While the
// stream is down it polls every --interval seconds instead. Text from jobs is always set with
// textContent, never parsed as HTML.
"use strict";

const TIER_BITS = 21;
const COUNTER_BITS = 32;
const MAX_TIER = 2 ** TIER_BITS - 1;
const MAX_COUNTER = 2 ** COUNTER_BITS - 1;
const STATES = ["waiting", "delayed", "failed", "active", "completed", "dead", "blocked", "cancelled"];
const TOKEN_KEY = "echomq-token";
const SERIES = [["added", "#3b82f6"], ["completed", "#16a34a"], ["failed", "#dc2626"]];
const PAGE = 50; // rows per page of a job list (the API allows up to 200)
const LIVE_GAP = 250; // ms: the least time between two refreshes events trigger
const LIVE_KEEP = 30; // recent events listed
const SLOW_POLL = 10; // with the stream up, the timer still refreshes every SLOW_POLL × interval (throughput chart)

const ui = {
  info: null,
  queue: null,
  detail: null,
  jobState: "waiting",
  jobLane: "",
  // cursor paging: each list keeps the pages it went through, {cursor, first row}
  jobPages: [{ cursor: "", first: 0 }],
  deadPages: [{ cursor: "", first: 0 }],
  batchPages: [{ cursor: "", first: 0 }],
  batch: null, // the batch whose view is open (its id)
  search: null, // {tags, state, name}: the jobs list shows what find() finds
  bulkStop: false, // set by Stop: a bulk action ends after its current step
  listVersion: 0, // bumped when a list changes what it shows (a refresh started before draws none)
  inspect: null,
  deadSelected: new Set(),
  token: sessionStorage.getItem(TOKEN_KEY),
  timer: null,
  stream: null, // the EventSource of the open queue
  streamQueue: null,
  lastRefresh: 0,
  recent: [], // the last events, newest first
};

// -- small helpers ------------------------------------------------------------
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const pct = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)}%`);

function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const rel = Math.abs(s) < 60 ? `${s}s` : Math.abs(s) < 3600 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  return s >= 0 ? `${rel} ago` : `in ${rel.replace("-", "")}`;
}

function setRows(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function toast(message, kind = "ok") {
  const banner = $("banner");
  banner.textContent = message;
  banner.className = `banner ${kind}`;
  banner.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { banner.hidden = true; }, kind === "ok" ? 4000 : 8000);
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

async function act(path, body = {}) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-EchoMQ-Token": ui.token || "" },
    body: JSON.stringify(body),
  });
  const reply = await response.json().catch(() => ({}));
  if (!response.ok) {
    if (response.status === 401) setToken(null);
    throw new Error(reply.error || `${response.status} ${response.statusText}`);
  }
  return reply;
}

async function runAction(label, path, body) {
  try {
    const reply = await act(path, body);
    toast(`${label}: done`, "ok");
    refreshSoon();
    return reply;
  } catch (err) {
    toast(`${label} refused: ${err.message}`, "error");
    return null;
  }
}

const qpath = (suffix = "") => `/api/queues/${encodeURIComponent(ui.queue)}${suffix}`;

// -- token and mode -------------------------------------------------------------
function setToken(token) {
  ui.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  renderMode();
}

function renderMode() {
  const enabled = ui.info && ui.info.actions;
  const unlocked = Boolean(enabled && ui.token);
  document.body.classList.toggle("unlocked", unlocked);
  $("mode").textContent = !enabled ? "read-only (no token configured)" : unlocked ? "actions unlocked" : "read-only";
  $("mode").className = `badge ${unlocked ? "on" : ""}`;
  $("token-form").hidden = !enabled || unlocked;
  $("lock").hidden = !unlocked;
  for (const button of document.querySelectorAll(".action")) {
    button.disabled = !unlocked;
    button.title = unlocked ? "" : "needs the action token";
  }
}

async function unlock(event) {
  event.preventDefault();
  const token = $("token-input").value.trim();
  if (!token) return;
  ui.token = token;
  try {
    await act("/api/auth");
    setToken(token);
    $("token-input").value = "";
    toast("actions unlocked", "ok");
  } catch (err) {
    setToken(null);
    toast(`unlock refused: ${err.message}`, "error");
  }
}

function readFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.get("token")) setToken(params.get("token"));
  if (params.get("q")) ui.queue = params.get("q");
  history.replaceState(null, "", ui.queue ? `#q=${encodeURIComponent(ui.queue)}` : location.pathname);
}

// -- queue list -------------------------------------------------------------------
function renderQueues(queues) {
  $("no-queues").hidden = queues.length > 0;
  setRows($("queues").tBodies[0], queues.map((q) => el("tr", {
    class: q.name === ui.queue ? "selected" : "",
    dataset: { queue: q.name },
    onclick: () => select(q.name),
  },
  el("td", {}, el("a", { href: `#q=${encodeURIComponent(q.name)}`, text: q.name }),
    q.paused ? el("span", { class: "tag warn", text: "paused" }) : null),
  el("td", { class: "n", text: num(q.counts.waiting) }),
  el("td", { class: "n", text: num(q.counts.active) }),
  el("td", { class: "n", text: num(q.counts.delayed + q.counts.failed) }),
  el("td", { class: "n", text: num(q.counts.dead) }))));
}

function select(name) {
  if (name === ui.queue) return;
  ui.queue = name;
  ui.detail = null;
  ui.jobLane = "";
  ui.search = null;
  resetPages("jobPages");
  resetPages("deadPages");
  resetPages("batchPages");
  ui.batch = null;
  $("batch-view").hidden = true;
  ui.metrics = null; ui.metricsAt = 0; ui.metricsName = null; // the new queue's at once
  ui.deadSelected.clear();
  follow();
  history.replaceState(null, "", `#q=${encodeURIComponent(name)}`);
  refreshSoon();
}

// -- one queue ------------------------------------------------------------------
function renderDetail(d) {
  ui.detail = d;
  $("queue-view").hidden = false;
  $("q-name").textContent = d.name;
  $("q-ordering").textContent = `${d.ordering} ordering`;
  $("q-paused").hidden = !d.paused;
  $("pause-btn").textContent = d.paused ? "Resume" : "Pause";
  $("counts").replaceChildren(...STATES.map((s) => el("div", { class: `card ${s}`, dataset: { state: s } },
    el("div", { class: "label", text: s === "failed" ? "failed (retry pending)" : s }),
    el("div", { class: "value", text: num(d.counts[s]) }))));
  const totals = $("totals");
  totals.textContent = `since the queue was created: ${num(d.totals.added)} added, ${num(d.totals.completed)} completed, ${num(d.totals.failed)} failed attempts`
    + (d.counts.completed >= 1000 ? " (completed and dead jobs are kept up to the queue's retention)" : "");
  Object.assign(totals.dataset, d.totals);
  renderLanes(d);
  renderTiers(d.tiers);
  renderSchedules(d.schedules || []);
  drawChart($("chart"), d.throughput, d.interval);
  const last = d.rate;
  const rate = (x) => num(x >= 10 ? Math.round(x) : Math.round(x * 10) / 10);
  $("rate-now").textContent = last
    ? `now: ${rate(last.added)}/s added, ${rate(last.completed)}/s completed, ${rate(last.failed)}/s failed`
    : "collecting samples…";
}

function renderLanes(d) {
  const tbody = $("lanes").tBodies[0];
  $("no-lanes").hidden = d.lanes.length > 0;
  const maxBacklog = Math.max(1, ...d.lanes.map((l) => l.backlog));
  // the rows drawn before, by lane: found in one pass (a find per lane was
  // quadratic: 200 lanes took tens of ms to draw)
  const drawn = new Map([...tbody.rows].map((r) => [r.dataset.lane, r]));
  const rows = d.lanes.map((lane) => laneRow(drawn, lane, maxBacklog));
  const changed = rows.length !== tbody.rows.length || rows.some((row, i) => tbody.rows[i] !== row);
  if (changed) {
    setRows(tbody, rows);
    renderMode();
  }
  const inRing = new Set(d.lanes.map((l) => l.label));
  const idle = d.weights.filter((w) => !inRing.has(w.label));
  $("weights-idle").textContent = idle.length
    ? `Weights of lanes with nothing waiting: ${idle.map((w) => `${w.label}=${w.weight}`).join(", ")}` : "";
}

function laneRow(drawn, lane, maxBacklog) {
  let row = drawn.get(lane.label);
  if (!row) {
    const input = el("input", { type: "number", min: 1, max: 1000, class: "weight-input",
      dataset: { weightFor: lane.label }, oninput: (e) => { e.target.dataset.dirty = "1"; } });
    const button = el("button", { type: "button", class: "action small", text: "Set",
      dataset: { setWeight: lane.label }, onclick: () => setWeight(lane.group, input) });
    const lift = el("button", { type: "button", class: "action small unthrottle", text: "Lift throttle",
      dataset: { unthrottle: lane.label }, onclick: () => unthrottle(lane.group) });
    row = el("tr", { dataset: { lane: lane.label } },
      el("td", { class: "pos" }), el("td", { class: "lane-name" }, el("span", { class: "lane-text" }), lift),
      el("td", { class: "weight" }, el("span", { class: "weight-value" }), input, button),
      el("td", { class: "backlog" }), el("td", { class: "share" }));
  }
  const [pos, name, weight, backlog, share] = row.cells;
  pos.textContent = lane.position < 0 ? "–" : lane.position === 0 ? "head" : String(lane.position + 1);
  name.querySelector(".lane-text").textContent = lane.label
    + (lane.turn_left !== null ? ` (${lane.turn_left} left in turn)` : "") + laneControls(lane);
  name.querySelector(".unthrottle").hidden = !lane.throttled_until;
  weight.querySelector(".weight-value").textContent = String(lane.weight);
  const input = weight.querySelector("input");
  if (!input.dataset.dirty && document.activeElement !== input) input.value = lane.weight;
  backlog.replaceChildren(bar(lane.backlog / maxBacklog, "backlog-bar"), el("span", { text: num(lane.backlog) }));
  share.replaceChildren(
    el("div", { class: "share-row" }, el("span", { class: "k", text: "served" }), bar(lane.served_share || 0, "served-bar"),
      el("span", { text: `${pct(lane.served_share)} (${num(lane.served)})` })),
    el("div", { class: "share-row" }, el("span", { class: "k", text: "weight" }), bar(lane.weight_share, "weight-bar"),
      el("span", { text: pct(lane.weight_share) })));
  return row;
}

function laneControls(lane) {
  const parts = [];
  if (lane.concurrency !== null && lane.concurrency !== undefined) parts.push(`active ${lane.active}/${lane.concurrency}`);
  else if (lane.active) parts.push(`active ${lane.active}`);
  if (lane.rate) parts.push(`rate ${lane.rate.max}/${lane.rate.per_seconds}s`);
  if (lane.paused) parts.push("paused");
  if (lane.parked) parts.push("parked");
  if (lane.throttled_until) parts.push(`throttled until ${lane.throttled_until}`);
  if (lane.max_waiting !== null && lane.max_waiting !== undefined) parts.push(`max waiting ${lane.max_waiting}`);
  return parts.length ? ` · ${parts.join(" · ")}` : "";
}

function bar(fraction, cls) {
  const fill = el("span", { class: "fill" });
  // set through CSSOM: the page's CSP refuses inline style attributes
  fill.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
  return el("span", { class: `bar ${cls}` }, fill);
}

function unthrottle(group) {
  return runAction(`lift the throttle of ${group === null ? "(default)" : group}`,
    qpath("/lanes/unthrottle"), { group });
}

async function setWeight(group, input) {
  const weight = Number(input.value);
  const reply = await runAction(`weight of ${group === null ? "(default)" : group} → ${weight}`,
    qpath("/weights"), { group, weight });
  if (reply) delete input.dataset.dirty;
}

function renderTiers(tiers) {
  const box = $("tiers");
  if (!tiers.length) {
    box.replaceChildren(el("p", { class: "muted", text: "Nothing is waiting." }));
    return;
  }
  box.replaceChildren(...tiers.map((lane) => {
    const max = Math.max(1, ...lane.tiers.map((t) => t.count));
    return el("div", { class: "tier-lane", dataset: { lane: lane.label } },
      el("div", { class: "tier-lane-name", text: lane.label }),
      ...lane.tiers.map((t) => el("div", { class: "tier-row", dataset: { tier: t.tier, count: t.count } },
        el("span", { class: "k", text: `tier ${t.tier}` }), bar(t.count / max, "tier-bar"),
        el("span", { text: num(t.count) }))),
      lane.more ? el("div", { class: "muted small", text: "…and higher tiers" }) : null);
  }));
}

// Every text comes from the server: set as text nodes by el(), never as HTML.
// a fire time in the schedule's own zone, labelled (as the CLI shows it), and how far off
function fireTime(local, iso) {
  return local ? `${local} (${when(iso)})` : "–";
}

function renderSchedules(schedules) {
  $("no-schedules").hidden = schedules.length > 0;
  setRows($("schedules").tBodies[0], schedules.map((s) => {
    const timing = s.cron !== null ? (s.tz === "UTC" ? s.cron : `${s.cron} (${s.tz})`) : `every ${s.every}s`;
    const outcome = (s.last_outcome || "–") + (s.skipped ? ` (${s.skipped} skipped, last: ${s.last_skip})` : "");
    return el("tr", { dataset: { schedule: s.id } },
      el("td", { text: s.id }), el("td", { text: timing }), el("td", { text: s.name }),
      el("td", { text: s.group === null ? "(default)" : s.group }),
      el("td", { text: s.paused ? "paused" : fireTime(s.next_fire_local, s.next_fire) }),
      el("td", { text: fireTime(s.last_fire_local, s.last_fire) }), el("td", { text: outcome }));
  }));
}

// -- throughput chart -------------------------------------------------------------
function drawChart(canvas, points, interval) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 600;
  const height = canvas.clientHeight || 200;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const pad = { l: 44, r: 8, t: 8, b: 20 };
  const now = Date.now();
  const span = Math.max(60_000, points.length ? now - points[0].t : 60_000);
  const top = niceMax(Math.max(1, ...points.flatMap((p) => SERIES.map(([k]) => p[k]))));
  const x = (t) => pad.l + ((t - (now - span)) / span) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / top) * (height - pad.t - pad.b);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#6b7280";
  g.strokeStyle = "#e5e7eb";
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    g.beginPath(); g.moveTo(pad.l, y(v)); g.lineTo(width - pad.r, y(v)); g.stroke();
    g.fillText(v >= 10 ? Math.round(v).toString() : v.toFixed(1), 4, y(v) + 4);
  }
  g.fillText(`-${Math.round(span / 60000)} min`, pad.l, height - 4);
  g.fillText("now", width - pad.r - 22, height - 4);
  if (points.length < 2) {
    g.fillText(`sampling every ${interval}s…`, pad.l + 8, pad.t + 14);
    return;
  }
  for (const [key, color] of SERIES) {
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    points.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p[key])) : g.moveTo(x(p.t), y(p[key]))));
    g.stroke();
  }
}

function niceMax(v) {
  const step = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * step >= v) return m * step;
  return 10 * step;
}

// -- job lists -----------------------------------------------------------------
function renderJobTabs() {
  const counts = ui.detail ? ui.detail.counts : {};
  $("job-tabs").replaceChildren(...STATES.map((s) => el("button", {
    type: "button", class: s === ui.jobState ? "tab active" : "tab", dataset: { state: s },
    onclick: () => { ui.jobState = s; ui.search = null; resetPages("jobPages"); refreshList("jobPages"); },
  }, `${s} `, el("span", { class: "muted", text: num(counts[s]) }))));
  if (!ui.jobLane && ui.detail && ui.detail.lanes.length) ui.jobLane = ui.detail.lanes[0].label;
  const select = $("job-lane");
  select.hidden = ui.jobState !== "waiting" || ui.search !== null;
  if (ui.search) for (const tab of $("job-tabs").children) tab.classList.remove("active");
  $("search-shown").hidden = ui.search === null;
  if (ui.search) $("search-what").textContent = searchText(ui.search);
  const labels = ui.detail ? ui.detail.lanes.map((l) => l.label) : [];
  if (!labels.includes("(default)")) labels.unshift("(default)");
  if ([...select.options].map((o) => o.value).join() !== labels.join()) {
    select.replaceChildren(...labels.map((l) => el("option", { value: l, text: `lane ${l}` })));
  }
  select.value = ui.jobLane || "(default)";
}

// Cursor paging: ``key`` is the ui field holding the list's pages, the shown one last.
function resetPages(key) { ui[key] = [{ cursor: "", first: 0 }]; }
function shownPage(key) { return ui[key][ui[key].length - 1]; }

// "rows 51–100" with Previous/Next (a search's page may be short: it looks at a bounded
// number of jobs per call, and Next goes on while the server says there is more).
function renderPager(id, page, key) {
  const pages = ui[key];
  const at = shownPage(key).first;
  const rows = page.jobs || page.batches;
  const first = rows.length ? at + 1 : at;
  $(id).replaceChildren(
    el("button", { type: "button", class: "small", text: "‹ Previous", disabled: pages.length === 1,
      dataset: { page: "prev" }, onclick: () => { pages.pop(); refreshList(key); } }),
    el("span", { class: "muted", text: ` rows ${num(first)}–${num(at + rows.length)} ` }),
    el("button", { type: "button", class: "small", text: "Next ›", disabled: !page.more,
      dataset: { page: "next" },
      onclick: () => { pages.push({ cursor: page.cursor, first: at + rows.length }); refreshList(key); } }));
}

// -- search: find() by tags, with a state and a name; a job id opens the inspector
function searchText(search) {
  return [search.tags, search.state && `state ${search.state}`, search.name && `name ${search.name}`]
    .filter(Boolean).join(", ");
}

function runSearch(event) {
  event.preventDefault();
  const text = $("search-tags").value.trim();
  if (/^job_\S+$/.test(text)) { inspect(text); return; }
  if (/^bat_\S+$/.test(text)) { openBatch(text); return; }
  if (!text) { toast("search by tags: key=value (e.g. customer=42), a job id or a batch id", "error"); return; }
  ui.search = { tags: text, state: $("search-state").value, name: $("search-name").value.trim() };
  resetPages("jobPages");
  refreshList("jobPages");
}

// A bulk action on every job the search finds, a step (one page) per request
// until the search ends or Stop is pressed; each step is guarded and audited.
// The bar is determinate: the first step says how many index entries the
// search walks (``candidates``), every step how many are left after its
// cursor (``remaining``): the bar shows the ones behind it (echomq.web.bulk).
async function bulkFound(kind) {
  const search = ui.search;
  if (!search || !confirm(`${kind} every job found by ${searchText(search)} in ${ui.queue}?`)) return;
  const [bar, status, stop] = [$("bulk-progress"), $("bulk-status"), $("bulk-stop")];
  ui.bulkStop = false;
  bar.hidden = false;
  bar.max = 1;
  bar.value = 0;
  bar.setAttribute("aria-valuetext", "starting");
  status.textContent = `${kind}: starting…`;
  stop.hidden = false;
  let cursor = "";
  let looked = 0;
  let done = 0;
  let total = null;
  try {
    do {
      const step = await act(qpath(`/found/${kind}`),
        { tags: search.tags, state: search.state, name: search.name, cursor });
      if (total === null) total = Math.max(1, Number(step.candidates) || 0);
      looked += step.looked;
      done += step.done;
      cursor = step.cursor;
      const behind = cursor ? Math.min(total, Math.max(bar.value, total - (Number(step.remaining) || 0))) : total;
      bar.max = total;
      bar.value = behind;
      bar.setAttribute("aria-valuetext", `${num(behind)} of ${num(total)} looked at`);
      status.textContent = `${kind}: ${num(done)} done, ${num(looked - done)} skipped, `
        + `${pct(behind / total)} of the search${cursor ? "…" : ""}`;
    } while (cursor && !ui.bulkStop);
    toast(`${kind}: ${num(done)} job(s)${cursor ? " (stopped)" : ""}`, "ok");
  } catch (err) {
    toast(`${kind} refused: ${err.message}`, "error");
  } finally {
    stop.hidden = true;
    refreshSoon();
  }
}

function clearSearch() {
  ui.search = null;
  resetPages("jobPages");
  refreshList("jobPages");
}

function jobsPath() {
  const cursor = encodeURIComponent(shownPage("jobPages").cursor);
  if (ui.search) {
    const s = ui.search;
    return qpath(`/find?tags=${encodeURIComponent(s.tags)}&state=${encodeURIComponent(s.state)}`
      + `&name=${encodeURIComponent(s.name)}&count=${PAGE}&cursor=${cursor}`);
  }
  const lane = ui.jobState === "waiting" ? `&group=${encodeURIComponent(ui.jobLane || "(default)")}` : "";
  return qpath(`/jobs?state=${ui.jobState}&count=${PAGE}&cursor=${cursor}${lane}`);
}

function renderJobs(page) {
  renderPager("jobs-pager", page, "jobPages");
  setRows($("jobs").tBodies[0], page.jobs.map((job) => el("tr", {
    class: "clickable", dataset: { jobId: job.id }, onclick: () => inspect(job.id),
  },
  el("td", { class: "mono", text: job.id }), el("td", { text: job.name }), el("td", { text: job.lane }),
  el("td", { class: "n", text: job.priority }), el("td", { class: "n", text: `${job.attempts}/${job.max_attempts}` }),
  el("td", { class: "when", text: when(job.finished_at || job.created_at) }))));
}

function renderDead(page) {
  renderPager("dead-pager", page, "deadPages");
  $("no-dead").hidden = page.jobs.length > 0;
  const ids = new Set(page.jobs.map((j) => j.id));
  for (const id of [...ui.deadSelected]) if (!ids.has(id)) ui.deadSelected.delete(id);
  setRows($("dead").tBodies[0], page.jobs.map((job) => el("tr", { dataset: { jobId: job.id } },
    el("td", {}, el("input", { type: "checkbox", checked: ui.deadSelected.has(job.id), "aria-label": `select ${job.id}`,
      onchange: (e) => (e.target.checked ? ui.deadSelected.add(job.id) : ui.deadSelected.delete(job.id)) })),
    el("td", { class: "mono clickable", text: job.id, onclick: () => inspect(job.id) }),
    el("td", { text: job.name }), el("td", { text: job.lane }),
    el("td", { class: "n", text: `${job.attempts}/${job.max_attempts}` }),
    el("td", { class: "when", text: when(job.finished_at) }),
    el("td", { class: "error", text: job.error || "" }),
    el("td", {}, el("button", { type: "button", class: "action small", text: "Retry", dataset: { retry: job.id },
      onclick: () => runAction(`retry ${job.id}`, qpath("/dead/retry"), { ids: [job.id] }) })))));
  renderMode();
}

function deadAction(kind, all) {
  const ids = [...ui.deadSelected];
  if (!all && !ids.length) { toast("select dead jobs first", "error"); return; }
  const what = all ? "every dead job" : `${ids.length} dead job(s)`;
  if ((kind === "purge" || all) && !confirm(`${kind} ${what} of ${ui.queue}?`)) return;
  runAction(`${kind} ${what}`, qpath(`/dead/${kind}`), all ? { all: true } : { ids });
  ui.deadSelected.clear();
}

// Accepted actions and refused requests are listed apart, so a flood of
// refused requests never hides the changes that were made.
function renderAudit(entries) {
  const row = (e) => el("tr", {},
    el("td", { text: new Date(e.at).toLocaleTimeString() }), el("td", { text: e.client }),
    el("td", { text: e.queue }), el("td", { text: e.action }),
    el("td", { class: "mono small", text: JSON.stringify(e.detail) }),
    el("td", { class: e.outcome === "ok" ? "" : "error", text: e.outcome }));
  setRows($("audit").tBodies[0], entries.filter((e) => !e.refused).slice(0, 20).map(row));
  const refused = entries.filter((e) => e.refused);
  $("refused-panel").hidden = refused.length === 0;
  setRows($("refused").tBodies[0], refused.slice(0, 5).map(row));
}

// -- job inspector -----------------------------------------------------------------
function inspect(id) {
  ui.inspect = id;
  $("inspect-id").value = id;
  loadInspector();
  $("inspector-panel").scrollIntoView({ behavior: "smooth", block: "nearest" });
}

async function loadInspector() {
  if (!ui.inspect || !ui.queue) return;
  try {
    renderInspector(await api(qpath(`/jobs/${encodeURIComponent(ui.inspect)}`)));
  } catch (err) {
    $("inspector").replaceChildren(el("p", { class: "error", text: err.message }));
  }
}

function field(name, value) {
  return el("tr", {}, el("th", { text: name }), el("td", { text: value === null || value === undefined ? "–" : String(value) }));
}

// "25 blocked: id, id, … (and 5 more)", or null when there are none
function someIds(total, shown, what) {
  if (!total) return null;
  const more = total > shown.length ? ` (and ${total - shown.length} more)` : "";
  return `${total} ${what}: ${shown.join(", ")}${more}`;
}

// "2 of 5 pending: job_a, job_b, … (and 3 more)", each id a link to the inspector
const SHOWN_DEPENDENCIES = 10;
function dependencyField(job) {
  const ids = job.dependencies || [];
  if (!ids.length) return field("depends on", null);
  const pending = job.pending === null || job.pending === undefined ? 0 : job.pending;
  const links = [];
  for (const id of ids.slice(0, SHOWN_DEPENDENCIES)) {
    if (links.length) links.push(", ");
    links.push(el("a", { href: "#", class: "mono", text: id, dataset: { inspect: id },
      onclick: (e) => { e.preventDefault(); inspect(id); } }));
  }
  const more = ids.length > SHOWN_DEPENDENCIES ? ` (and ${num(ids.length - SHOWN_DEPENDENCIES)} more)` : "";
  return el("tr", {}, el("th", { text: "depends on" }),
    el("td", {}, `${num(pending)} of ${num(ids.length)} pending: `, ...links, more));
}

// The job's story: its events the stream still holds, oldest first (the stream is
// capped, so an old job's first events may be gone: the creation time says when it began).
function timeline(job) {
  const events = job.events || [];
  const detail = (e) => e.error || (e.next_run ? `next run ${new Date(e.next_run).toLocaleTimeString()}` : "")
    || (e.attempt ? `attempt ${e.attempt}` : "");
  const rows = events.map((e) => el("tr", {},
    el("td", { class: "when", text: e.at ? new Date(e.at).toLocaleTimeString() : "" }),
    el("td", { text: e.kind }), el("td", { text: detail(e) })));
  const note = events.length && events[0].kind === "added" ? null
    : el("p", { class: "muted small", text: events.length
      ? "earlier events are no longer in the queue's event stream"
      : "none of its events are in the queue's recent event stream" });
  return el("div", { class: "timeline" }, el("h4", { text: "events" }), note,
    rows.length ? el("table", { class: "jobs", id: "timeline" }, el("tbody", {}, ...rows)) : null);
}

function renderInspector(job) {
  const fields = el("table", { class: "fields" },
    field("id", job.id), field("name", job.name), field("state", job.state), field("lane", job.lane),
    field("tier (priority)", job.priority), field("attempts", `${job.attempts} of ${job.max_attempts}`),
    field("stalls", job.stalls), field("idempotency key", job.key), field("created", job.created_at),
    field("run at", job.run_at), field("claimed", job.claimed_at), field("lease until", job.lease_deadline),
    field("finished", job.finished_at),
    field("run time", job.duration === null || job.duration === undefined ? null : `${job.duration.toFixed(3)} s`),
    field("worker", job.worker), dependencyField(job),
    field("dependents", someIds(job.dependents && job.dependents.blocked, job.dependents && job.dependents.blocked_ids, "blocked")),
    field("read by", someIds(job.dependents && job.dependents.readers, job.dependents && job.dependents.reader_ids, "dependents")),
    field("schedule", job.schedule_id ? `${job.schedule_id}, fire time ${job.fire_time}` : null),
    batchField(job.batch));
  const score = job.aged_key !== undefined ? agedKeyView(job.aged_key) : scoreFigure(job.score_fields);
  const parts = [el("div", { class: "inspector-top" }, fields, el("div", {},
    positionView(job.position), el("h4", { text: "score" }), score, progressView(job.progress)))];
  parts.push(timeline(job));
  const cut = job.truncated || {};
  const json = (v) => JSON.stringify(v, null, 2);
  parts.push(...longField("data", job.data, cut.data, json, null, true));
  parts.push(...longField("result", job.result, cut.result, json, null, job.result !== null));
  parts.push(...longField("error", job.error, cut.error, String, "error", Boolean(job.error)));
  parts.push(...longField("traceback", job.traceback, cut.traceback, String, "traceback", Boolean(job.traceback)));
  for (const name of ["progress", "headers", "dependencies"]) {
    if (cut[name]) parts.push(...longField(name, null, cut[name], String, null, true));
  }
  parts.push(el("h4", { text: `log (${(job.log || []).length} lines)` }), logView(job.log || []));
  $("inspector").replaceChildren(...parts);
  $("inspector").dataset.jobId = job.id;
  $("inspector").dataset.state = job.state;
  if (job.batch) loadBatch(job.batch, job.id);
}

// The batch of the inspected job: a progress bar, its state, its children by
// state and which callbacks fired (GET /api/queues/{q}/batches/{id}).
async function loadBatch(batchId, jobId) {
  let batch;
  try {
    batch = await api(qpath(`/batches/${encodeURIComponent(batchId)}`));
  } catch (err) {
    batch = null;
  }
  if ($("inspector").dataset.jobId !== jobId) return;  // another job is shown now
  const box = el("div", { class: "batch", dataset: { batch: batchId } }, el("h4", {}, "batch ", batchLink(batchId)));
  if (!batch) {
    box.append(el("p", { text: "gone (expired with its retention)" }));
  } else {
    box.append(
      el("progress", { max: String(batch.total || 1), value: String(batch.finished) }),
      el("span", { class: "batch-state", text: ` ${batch.finished} of ${batch.total} finished: ${batch.state}${batch.closed ? "" : " (open)"}` }),
      el("p", { class: "small", text: ["waiting", "active", "completed", "dead", "cancelled"].map((s) => `${s} ${batch[s]}`).join(" · ") }),
      el("p", { class: "small", text: Object.entries(batch.callbacks).map(([name, id]) => `${name}: ${id ? `fired (${id})` : "not fired"}`).join(" · ") || "no callbacks" }));
  }
  $("inspector").append(box);
}

// A batch id as a link that opens the batch's view.
function batchLink(batchId) {
  return el("a", { href: "#", class: "mono", text: batchId, dataset: { openBatch: batchId },
    onclick: (e) => { e.preventDefault(); openBatch(batchId); } });
}

function batchField(batchId) {
  if (!batchId) return field("batch", null);
  return el("tr", {}, el("th", { text: "batch" }), el("td", {}, batchLink(batchId)));
}

// -- batches ----------------------------------------------------------------------
const BATCH_STATES = ["waiting", "active", "completed", "dead", "cancelled"];
const BATCH_ENDED = ["succeeded", "failed", "cancelled"];

const loadBatches = () => api(qpath(`/batches?count=${PAGE}&cursor=${encodeURIComponent(shownPage("batchPages").cursor)}`));

// "1 of 2": the callbacks that fired of those the batch was given
function callbacksFired(batch) {
  const ids = Object.values(batch.callbacks);
  return ids.length ? `${ids.filter(Boolean).length} of ${ids.length}` : "none given";
}

const batchState = (batch) => batch.state + (batch.closed || batch.state === "cancelled" ? "" : " (not closed)");

function renderBatches(page) {
  renderPager("batches-pager", page, "batchPages");
  $("no-batches").hidden = page.batches.length > 0 || ui.batchPages.length > 1;
  setRows($("batches").tBodies[0], page.batches.map((b) => el("tr", {
    class: `clickable${b.id === ui.batch ? " selected" : ""}`, dataset: { batch: b.id, state: b.state },
    onclick: () => openBatch(b.id),
  },
  el("td", { class: "mono", text: b.id }), el("td", { text: batchState(b) }),
  el("td", { class: "progress" }, bar(b.progress, "batch-bar"), el("span", { text: `${num(b.finished)}/${num(b.total)}` })),
  ...BATCH_STATES.map((s) => el("td", { class: "n", dataset: { count: s }, text: num(b[s]) })),
  el("td", { text: callbacksFired(b) }), el("td", { class: "when", text: when(b.created_at) }))));
}

function openBatch(batchId) {
  ui.batch = batchId;
  for (const row of $("batches").tBodies[0].rows) row.classList.toggle("selected", row.dataset.batch === batchId);
  loadBatchView();
  $("batches-panel").scrollIntoView({ behavior: "smooth", block: "nearest" });
}

async function loadBatchView() {
  const batchId = ui.batch;
  if (!batchId || !ui.queue) return;
  const view = $("batch-view");
  try {
    const batch = await api(qpath(`/batches/${encodeURIComponent(batchId)}`));
    if (ui.batch === batchId) renderBatchView(batch);
  } catch (err) {
    if (ui.batch !== batchId) return;
    view.replaceChildren(closeBatchButton(), el("p", { class: "error", text: `batch ${batchId}: ${err.message}` }));
    view.dataset.batch = batchId;
    view.dataset.state = "";
    view.hidden = false;
  }
}

function closeBatchButton() {
  return el("button", { type: "button", class: "small", text: "Close", dataset: { closeBatch: "" },
    onclick: closeBatchView });
}

function closeBatchView() {
  ui.batch = null;
  $("batch-view").hidden = true;
  for (const row of $("batches").tBodies[0].rows) row.classList.remove("selected");
}

// One batch: its state, a progress bar (finished of total), its children by state,
// each callback (fired: its job, a link to the inspector) and its events.
function renderBatchView(b) {
  const view = $("batch-view");
  const ended = BATCH_ENDED.includes(b.state);
  const cancel = el("button", { type: "button", class: "action danger small", text: "Cancel batch",
    hidden: ended, dataset: { cancelBatch: b.id }, onclick: () => cancelBatch(b.id) });
  const progress = el("progress", { max: String(b.total || 1), value: String(b.total ? b.finished : b.progress) });
  const callbacks = b.callback_jobs.map((c) => el("tr", { dataset: { callback: c.callback } },
    el("td", { text: c.callback }),
    el("td", {}, c.id ? el("a", { href: "#", class: "mono", text: c.id, dataset: { inspect: c.id },
      onclick: (e) => { e.preventDefault(); inspect(c.id); } }) : el("span", { class: "muted", text: "not fired" })),
    el("td", { text: c.name || "" }), el("td", { text: c.id ? c.state || "gone" : "" })));
  const events = b.events.map((e) => el("tr", {},
    el("td", { class: "when", text: e.at ? new Date(e.at).toLocaleString() : "" }), el("td", { text: e.kind })));
  view.replaceChildren(
    el("div", { class: "batch-head" }, el("h4", {}, "batch ", el("span", { class: "mono", text: b.id })),
      el("span", { class: `tag${b.state === "failed" || b.state === "cancelled" ? " warn" : ""}`, dataset: { batchState: "" }, text: batchState(b) }),
      el("span", { class: "spacer" }), cancel, closeBatchButton()),
    el("p", {}, progress, el("span", { class: "batch-progress", text: ` ${num(b.finished)} of ${num(b.total)} finished (${pct(b.progress)})` })),
    el("div", { class: "cards" }, ...BATCH_STATES.map((s) => el("div", { class: `card ${s}`, dataset: { state: s } },
      el("div", { class: "label", text: s }), el("div", { class: "value", text: num(b[s]) })))),
    el("p", { class: "muted small", text: `created ${b.created_at ? new Date(b.created_at).toLocaleString() : "–"}` }),
    el("h4", { text: "callbacks" }),
    callbacks.length ? el("table", { class: "jobs callbacks" },
      el("thead", {}, el("tr", {}, ...["callback", "job", "name", "state"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...callbacks)) : el("p", { class: "muted", text: "none given" }),
    el("h4", { text: "events" }),
    events.length ? el("table", { class: "jobs batch-events" }, el("tbody", {}, ...events))
      : el("p", { class: "muted small", text: "none of its events are in the queue's recent event stream" }));
  view.dataset.batch = b.id;
  view.dataset.state = b.state;
  view.hidden = false;
  renderMode();
}

function cancelBatch(batchId) {
  if (!confirm(`Cancel batch ${batchId} of ${ui.queue}? Its children not started end cancelled, `
    + "running ones are stopped (dead), and no callback fires.")) return;
  runAction(`cancel batch ${batchId}`, qpath("/batches/cancel"), { batch: batchId });
}

// A job's log: one row per line (time, attempt, level, message as text: never markup).
function logView(lines) {
  if (!lines.length) return el("p", { class: "muted", text: "nothing logged" });
  return el("pre", { class: "job-log" }, ...lines.map((l) => el("span", { class: `log-${l.level.toLowerCase()}`,
    text: `${l.at.slice(11, 23)}Z  #${l.attempt}  ${l.level.padEnd(8)} ${l.message}\n` })));
}

// -- server-side metrics per job name ----------------------------------------------
const SPARKS = "▁▂▃▄▅▆▇█";
function sparkline(values) {
  const top = Math.max(0, ...values);
  return values.map((v) => (v === 0 || top === 0 ? " " : SPARKS[Math.min(7, Math.floor((v * 8 - 1) / top))])).join("");
}
const secs = (v) => (v === null || v === undefined ? "–" : v < 1 ? `≤${Math.round(v * 1000)} ms` : `≤${v} s`);

// one value per minute of the window, oldest first (a minute without jobs: 0)
function perMinute(points, minutes, key) {
  const last = Math.floor(Date.now() / 60000);
  const width = Math.min(minutes, 120);
  const step = Math.ceil(minutes / width);
  const out = new Array(width).fill(0);
  for (const p of points) {
    const slot = width - 1 - Math.floor((last - Math.floor(Date.parse(p.minute) / 60000)) / step);
    if (slot >= 0 && slot < width) out[slot] += p[key];
  }
  return out;
}

function renderMetrics(m) {
  ui.metrics = m;
  $("no-metrics").hidden = m.names.length > 0;
  setRows($("metrics").tBodies[0], m.names.map((n) => {
    const runs = n.points.filter((p) => p.run_p50 !== null);
    const worst = (k) => (runs.length ? Math.max(...runs.map((p) => p[k] || 0)) : null);
    return el("tr", { class: "clickable", dataset: { name: n.name }, onclick: () => drawNameChart(n.name) },
      el("td", { text: n.name }), el("td", { text: num(n.completed) }), el("td", { text: num(n.failed) }),
      el("td", { text: num(n.dead) }), el("td", { text: num(n.cancelled || 0) }), el("td", { class: "mono spark", text: sparkline(perMinute(n.points, m.minutes, "completed")) }),
      el("td", { text: `${secs(worst("run_p50"))} / ${secs(worst("run_p95"))}` }),
      el("td", { text: `${secs(worst("wait_p50"))} / ${secs(worst("wait_p95"))}` }));
  }));
  if (ui.metricsName) drawNameChart(ui.metricsName);
}

// the selected name's run and wait p95 per minute over the window (drawn here, no library)
function drawNameChart(name) {
  ui.metricsName = name;
  const entry = ui.metrics && ui.metrics.names.find((n) => n.name === name);
  const canvas = $("metrics-chart");
  canvas.hidden = !entry;
  $("metrics-chart-legend").hidden = !entry;
  if (!entry) return;
  $("metrics-chart-legend").textContent = `${name}: run p95 (blue) and wait p95 (orange) per minute, seconds (bucket bounds)`;
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 600;
  const height = canvas.clientHeight || 160;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, height);
  const pad = { l: 44, r: 8, t: 8, b: 20 };
  const last = Math.floor(Date.now() / 60000);
  const first = last - ui.metrics.minutes + 1;
  const pts = entry.points.map((p) => ({ m: Math.floor(Date.parse(p.minute) / 60000), run: p.run_p95 || 0, wait: p.wait_p95 || 0 }));
  const top = niceMax(Math.max(0.001, ...pts.flatMap((p) => [p.run, p.wait])));
  const x = (m) => pad.l + ((m - first) / Math.max(1, last - first)) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / top) * (height - pad.t - pad.b);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#6b7280";
  g.fillText(String(top), 4, pad.t + 8);
  g.fillText(`-${ui.metrics.minutes} min`, pad.l, height - 4);
  g.fillText("now", width - pad.r - 22, height - 4);
  for (const [key, color] of [["run", "#2563eb"], ["wait", "#ea580c"]]) {
    g.fillStyle = color;
    for (const p of pts) g.fillRect(x(p.m) - 1.5, y(p[key]) - 1.5, 3, 3);
  }
}

async function loadMetrics(force = false) {
  const minutes = Number($("metrics-minutes").value);
  // at most every 30 s: the server counts per minute
  if (!force && ui.metricsAt && Date.now() - ui.metricsAt < 30_000 && ui.metrics && ui.metrics.minutes === minutes) return;
  ui.metricsAt = Date.now();
  renderMetrics(await api(qpath(`/metrics?minutes=${minutes}`)));
}

function renderWorkers(workers) {
  $("no-workers").hidden = workers.length > 0;
  setRows($("workers").tBodies[0], workers.map((w) => {
    const running = w.running.slice(0, 3).map((id) => el("span", { class: "mono clickable", text: `${id} `, onclick: () => inspect(id) }));
    if (w.running.length > 3) running.push(el("span", { class: "muted", text: `(+${w.running.length - 3})` }));
    return el("tr", { dataset: { worker: w.id } },
      el("td", { class: "mono", text: w.id }), el("td", { text: `${w.host}:${w.pid}` }),
      el("td", { text: w.queues.join(", ") }), el("td", { text: `${w.running.length}/${w.concurrency}` }),
      el("td", { text: when(w.started_at) }), el("td", { text: when(w.seen_at) }), el("td", {}, ...running));
  }));
}

const bytes = (n) => (n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} bytes`);

// One long field of the inspector: whole, or (cut by the server) its first bytes
// as stored, marked truncated, with a link that downloads it whole.
function longField(name, value, cut, show, cls, present) {
  if (!cut) return present ? [el("h4", { text: name }), el("pre", { class: cls, text: show(value) })] : [];
  return [el("h4", { text: name }),
    el("p", { class: "truncated", dataset: { field: name } },
      el("span", { text: `truncated: the first ${bytes(cut.shown)} of ${bytes(cut.size)} shown ` }),
      el("a", { href: cut.download, download: "", text: `download all ${bytes(cut.size)}` })),
    el("pre", { class: cls, text: `${cut.preview}…` })];
}

function progressView(progress) {
  if (progress === null || progress === undefined) return el("p", { class: "muted", text: "no progress reported" });
  const n = typeof progress === "number" ? progress : typeof progress === "object" && typeof progress.percent === "number" ? progress.percent : null;
  return el("div", {}, el("h4", { text: "progress" }), n !== null ? bar(n / 100, "progress-bar") : null,
    el("pre", { text: JSON.stringify(progress) }));
}

// Where a waiting job stands (docs/ordering.md "Where a job stands"); nothing otherwise.
function positionView(p) {
  if (!p) return el("span", { hidden: true });
  const ahead = p.queue_ahead === null ? "not counted: its lane is paused, capped, throttled or over its rate"
    : `${p.queue_ahead} (the weighted rotation, if nothing is added)`;
  const eta = p.eta === null ? "unknown (no job completed in the last 10 minutes)" : `${p.eta.toFixed(1)} s`;
  return el("div", { id: "inspector-position" },
    el("h4", { text: "position" }),
    el("table", { class: "fields" },
      field("ahead in its lane", p.lane_ahead), field("claims before it", ahead), field("estimated wait", eta)));
}

// An aged lane key: due time + tier × age_step (ms), read back with the job's tier.
function agedKeyView(k) {
  if (!k) return el("p", { class: "muted", text: "no key (it gets one when it becomes waiting)" });
  const iso = (ms) => new Date(ms).toISOString();
  return el("div", { id: "inspector-aged" },
    el("p", { text: `aged key ${k.key} = due ${iso(k.due_ms)} + tier ${k.tier} × age_step ${k.age_step_ms / 1000} s` }),
    el("p", { class: "muted", text: `served before every tier-0 job of its lane that became due after ${iso(k.key)}` }));
}

function scoreFigure(s) {
  const box = el("div", { class: "score-figure" });
  box.append(el("div", { class: "score-line" }, el("strong", { text: num(s.score) }),
    el("span", { class: "muted", text: ` = ${num(s.tier)} × 2³² + ${num(s.counter)}` })));
  box.append(bitStrip(s.bits, null));
  box.append(el("div", { class: "bit-legend" },
    el("span", { class: "key tier", text: `tier bits ${s.tier_bits[1]}–${s.tier_bits[0]} = ${num(s.tier)}` }), " | ",
    el("span", { class: "key counter", text: `counter bits ${s.counter_bits[1]}–${s.counter_bits[0]} = ${num(s.counter)}` })));
  return box;
}

// A 53-cell strip, high bit first: tier bits | counter bits. ``onHover(field, bit)``
// is called as the pointer moves over it (null when it leaves).
function bitStrip(bits, onHover) {
  const strip = el("div", { class: "bit-strip" });
  const total = TIER_BITS + COUNTER_BITS;
  for (let i = 0; i < total; i++) {
    const bit = total - 1 - i;
    const fieldName = bit >= COUNTER_BITS ? "tier" : "counter";
    const cell = el("span", { class: `bit ${fieldName}${bits[i] === "1" ? " one" : ""}`, text: bits[i],
      dataset: { bit, field: fieldName }, title: `bit ${bit} (${fieldName})` });
    if (bit === COUNTER_BITS) cell.classList.add("edge");
    strip.append(cell);
  }
  strip.addEventListener("mouseover", (e) => {
    const cell = e.target.closest(".bit");
    if (!cell) return;
    strip.dataset.hl = cell.dataset.field;
    if (onHover) onHover(cell.dataset.field, Number(cell.dataset.bit));
  });
  strip.addEventListener("mouseleave", () => { delete strip.dataset.hl; if (onHover) onHover(null, null); });
  return strip;
}

// -- score explorer ----------------------------------------------------------------
function composite(tier, counter) {
  return (BigInt(tier) << BigInt(COUNTER_BITS)) | BigInt(counter);
}

function clampInt(value, max) {
  const n = Math.floor(Number(value));
  return Number.isFinite(n) ? Math.min(max, Math.max(0, n)) : 0;
}

const fromSlider = (pos, bits) => Math.min(2 ** bits - 1, Math.round(2 ** ((bits * pos) / 1000)) - 1);
const toSlider = (value, bits) => Math.round((1000 * Math.log2(value + 1)) / bits);

function explorerHover(fieldName, bit) {
  const tier = clampInt($("ex-tier").value, MAX_TIER);
  const counter = clampInt($("ex-counter").value, MAX_COUNTER);
  const text = $("ex-hover");
  $("explorer").dataset.hl = fieldName || "";
  if (fieldName === null) {
    text.textContent = "Hover over the bits or the fields to see what each range holds.";
  } else if (fieldName === "tier") {
    text.textContent = `Tier field, bits 52–32: ${num(tier)}.` + (bit !== null ? ` Bit ${bit} is worth 2^${bit} = tier bit ${bit - COUNTER_BITS}.` : "")
      + " One tier step (2^32) is larger than any counter, so a lower tier always pops first.";
  } else {
    text.textContent = `Counter field, bits 31–0: ${num(counter)}.` + (bit !== null ? ` Bit ${bit} is worth 2^${bit}.` : "")
      + " The arrival counter orders jobs within one tier: first in, first out.";
  }
}

function renderExplorer(source) {
  let tier = clampInt($("ex-tier").value, MAX_TIER);
  let counter = clampInt($("ex-counter").value, MAX_COUNTER);
  if (source === "tier-range") { tier = fromSlider(Number($("ex-tier-range").value), TIER_BITS); $("ex-tier").value = tier; }
  if (source === "counter-range") { counter = fromSlider(Number($("ex-counter-range").value), COUNTER_BITS); $("ex-counter").value = counter; }
  if (source !== "tier-range") $("ex-tier-range").value = toSlider(tier, TIER_BITS);
  if (source !== "counter-range") $("ex-counter-range").value = toSlider(counter, COUNTER_BITS);
  const score = composite(tier, counter);
  $("ex-score").textContent = Number(score).toLocaleString("en-US");
  $("ex-score").dataset.score = score.toString();
  $("ex-hex").textContent = `0x${score.toString(16)}`;
  $("ex-formula").replaceChildren(
    el("span", { class: "key tier", dataset: { field: "tier" }, text: `tier ${num(tier)}` }), " × 4,294,967,296 + ",
    el("span", { class: "key counter", dataset: { field: "counter" }, text: `counter ${num(counter)}` }));
  $("ex-bits").replaceChildren(bitStrip(score.toString(2).padStart(TIER_BITS + COUNTER_BITS, "0"), explorerHover));
  renderCompare();
}

function renderCompare() {
  const read = (p) => ({
    tier: clampInt($(`cmp-${p}-tier`).value, MAX_TIER),
    counter: clampInt($(`cmp-${p}-counter`).value, MAX_COUNTER),
  });
  const a = read("a");
  const b = read("b");
  const sa = composite(a.tier, a.counter);
  const sb = composite(b.tier, b.counter);
  $("cmp-a-score").textContent = `score ${Number(sa).toLocaleString("en-US")}`;
  $("cmp-b-score").textContent = `score ${Number(sb).toLocaleString("en-US")}`;
  let verdict;
  let first = null;
  if (sa === sb) {
    verdict = "Same score. In composite ordering two waiting jobs never share a counter; in mint ordering equal scores are ordered by job id, i.e. creation order.";
  } else {
    first = sa < sb ? "A" : "B";
    const [w, l] = first === "A" ? [a, b] : [b, a];
    verdict = w.tier !== l.tier
      ? `${first} pops first: its tier ${num(w.tier)} is lower than ${num(l.tier)}. A tier step (2^32) outweighs every counter value, so ${num(l.counter)} vs ${num(w.counter)} does not matter.`
      : `${first} pops first: same tier ${num(w.tier)}, and it arrived first (counter ${num(w.counter)} < ${num(l.counter)}).`;
  }
  $("cmp-verdict").textContent = `${verdict} (Within one lane; across lanes the weighted ring decides whose turn it is.)`;
  $("cmp-verdict").dataset.first = first || "tie";
  $("cmp-a").classList.toggle("winner", first === "A");
  $("cmp-b").classList.toggle("winner", first === "B");
}

// -- live events -----------------------------------------------------------------------
function streamUp() {
  return Boolean(ui.stream && ui.stream.readyState === EventSource.OPEN);
}

// Follow the open queue's event stream (EventSource reconnects by itself and
// resumes after the last id it got).
function follow() {
  if (ui.streamQueue === ui.queue) return;
  if (ui.stream) ui.stream.close();
  ui.stream = null;
  ui.streamQueue = ui.queue;
  ui.recent = [];
  renderRecent();
  if (!ui.queue) return;
  const stream = new EventSource(qpath("/events"));
  stream.addEventListener("events", (message) => {
    const batch = JSON.parse(message.data);
    ui.recent = [...batch.events.reverse(), ...ui.recent].slice(0, LIVE_KEEP);
    renderRecent();
    refreshLive();
  });
  stream.addEventListener("open", () => { $("live").title = "live: following the event stream"; });
  stream.addEventListener("error", () => { $("live").title = "event stream down: polling"; });
  ui.stream = stream;
}

// A refresh triggered by events: at once, or LIVE_GAP after the last one.
function refreshLive() {
  const wait = Math.max(0, ui.lastRefresh + LIVE_GAP - Date.now());
  clearTimeout(ui.timer);
  ui.timer = setTimeout(refresh, wait);
}

function renderRecent() {
  const tbody = $("events").tBodies[0];
  setRows(tbody, ui.recent.map((e) => el("tr", {},
    el("td", { class: "mono", text: e.id }),
    el("td", { class: "when", text: e.at ? new Date(e.at).toLocaleTimeString() : "" }),
    el("td", { text: e.kind === "missed" ? `missed ${e.skipped}` : e.kind }),
    el("td", { class: "mono", text: e.job_id || "" }),
    el("td", { text: e.name || "" }),
    el("td", { text: e.group === null || e.group === undefined ? "(default)" : e.group }),
    el("td", { text: e.error || (e.attempt ? `attempt ${e.attempt}` : "") }))));
  $("no-events").hidden = ui.recent.length > 0;
}

// -- refresh loop --------------------------------------------------------------------
async function refresh() {
  clearTimeout(ui.timer);
  ui.lastRefresh = Date.now();
  try {
    const queues = await api("/api/queues");
    if (!ui.queue && queues.length) ui.queue = queues[0].name;
    renderQueues(queues);
    follow();
    if (ui.queue) await refreshQueue();
    $("live").className = "live ok";
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("live").className = "live down";
    $("updated").textContent = `update failed: ${err.message}`;
  } finally {
    const every = ((ui.info && ui.info.interval) || 2) * 1000;
    const slow = streamUp() ? SLOW_POLL : 1; // events drive the page while the stream is up
    ui.timer = setTimeout(refresh, (document.hidden ? every * 5 : every) * slow);
  }
}

// The shown job list's page (a state, or a search). A refused search (a bad tag)
// ends the search, and says why.
function loadJobs() {
  return api(jobsPath()).catch((err) => {
    if (!ui.search) throw err;
    toast(`search: ${err.message}`, "error");
    ui.search = null;
    resetPages("jobPages");
    return api(jobsPath());
  });
}

const loadDead = () => api(qpath(`/jobs?state=dead&count=${PAGE}&cursor=${encodeURIComponent(shownPage("deadPages").cursor)}`));

// A tab, a page or a search changes one list only: it is read and drawn at once,
// without the rest of the queue view (the next refresh redraws everything).
async function refreshList(key) {
  ui.listVersion += 1; // a refresh already under way no longer draws the lists
  try {
    if (key === "deadPages") renderDead(await loadDead());
    else if (key === "batchPages") renderBatches(await loadBatches());
    else {
      const page = await loadJobs();
      renderJobTabs();
      renderJobs(page);
    }
  } catch (err) {
    toast(`cannot read the list: ${err.message}`, "error");
  }
}

async function refreshQueue() {
  const version = ui.listVersion;
  const lane = ui.jobLane;
  // every read at once (the job names' metrics too: read and drawn alongside)
  const [detail, jobPage, deadPage, batchPage, audit, workers] = await Promise.all(
    [api(qpath()), loadJobs(), loadDead(), loadBatches(), api("/api/audit"), api(qpath("/workers")),
      loadMetrics()]);
  renderDetail(detail);
  renderWorkers(workers);
  renderJobTabs();
  const current = version === ui.listVersion;
  if (current) renderDead(deadPage);
  if (current) renderBatches(batchPage);
  if (ui.batch) await loadBatchView();
  // the first view of a queue learns its lanes with this read: the waiting list
  // then shows the ring's first lane at once, not at the next refresh
  if (lane !== ui.jobLane && ui.jobState === "waiting" && !ui.search) {
    resetPages("jobPages");
    refreshList("jobPages");
  } else if (current) {
    renderJobs(jobPage);
  }
  renderAudit(audit);
  if (ui.inspect && !["completed", "dead"].includes($("inspector").dataset.state)) await loadInspector();
}

function refreshSoon() {
  clearTimeout(ui.timer);
  ui.timer = setTimeout(refresh, 50);
}

async function start() {
  readFragment();
  try {
    ui.info = await api("/api/info");
    $("server").textContent = ui.info.server;
    if (ui.info.eviction) {
      $("eviction").textContent = `This server may delete keys (maxmemory-policy ${ui.info.eviction}, `
        + "not noeviction): when it runs out of memory, jobs vanish without a trace. "
        + "Set maxmemory-policy noeviction (docs/delivery.md).";
      $("eviction").hidden = false;
    }
  } catch (err) {
    toast(`cannot load the dashboard: ${err.message}`, "error");
  }
  renderMode();
  $("token-form").addEventListener("submit", unlock);
  $("lock").addEventListener("click", () => setToken(null));
  $("pause-btn").addEventListener("click", () => {
    const paused = ui.detail && ui.detail.paused;
    runAction(paused ? "resume" : "pause", qpath(paused ? "/resume" : "/pause"), {});
  });
  $("drop-btn").addEventListener("click", () => {
    const name = ui.queue;
    if (!confirm(`Drop queue ${name} and every job in it for good? Stop its workers first.`)) return;
    runAction(`drop ${name}`, qpath("/drop"), { confirm: name });
  });
  $("weight-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const group = $("weight-group").value.trim();
    runAction(`weight of ${group || "(default)"}`, qpath("/weights"),
      { group: group || null, weight: Number($("weight-value").value) });
  });
  $("job-lane").addEventListener("change", (e) => { ui.jobLane = e.target.value; resetPages("jobPages"); refreshList("jobPages"); });
  $("search-form").addEventListener("submit", runSearch);
  $("search-clear").addEventListener("click", clearSearch);
  for (const button of document.querySelectorAll("[data-bulk]")) {
    button.addEventListener("click", () => bulkFound(button.dataset.bulk));
  }
  $("bulk-stop").addEventListener("click", () => { ui.bulkStop = true; });
  $("dead-all").addEventListener("change", (e) => {
    for (const box of $("dead").tBodies[0].querySelectorAll("input[type=checkbox]")) {
      box.checked = e.target.checked;
      const id = box.closest("tr").dataset.jobId;
      if (e.target.checked) ui.deadSelected.add(id); else ui.deadSelected.delete(id);
    }
  });
  $("retry-selected").addEventListener("click", () => deadAction("retry", false));
  $("retry-all").addEventListener("click", () => deadAction("retry", true));
  $("purge-selected").addEventListener("click", () => deadAction("purge", false));
  $("purge-all").addEventListener("click", () => deadAction("purge", true));
  $("metrics-minutes").addEventListener("change", () => loadMetrics(true));
  $("inspect-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("inspect-id").value.trim();
    if (id) inspect(id);
  });
  for (const id of ["ex-tier", "ex-counter", "ex-tier-range", "ex-counter-range"]) {
    $(id).addEventListener("input", () => renderExplorer(id.replace("ex-", "")));
  }
  for (const id of ["cmp-a-tier", "cmp-a-counter", "cmp-b-tier", "cmp-b-counter"]) {
    $(id).addEventListener("input", renderCompare);
  }
  $("ex-formula").addEventListener("mouseover", (e) => {
    const key = e.target.closest("[data-field]");
    if (key) explorerHover(key.dataset.field, null);
  });
  $("ex-formula").addEventListener("mouseleave", () => explorerHover(null, null));
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshSoon(); });
  window.addEventListener("hashchange", () => {
    const q = new URLSearchParams(location.hash.slice(1)).get("q");
    if (q) select(q);
  });
  renderExplorer(null);
  refresh();
}

document.addEventListener("DOMContentLoaded", start);
