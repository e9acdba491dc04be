"""A reference model of deduplication (DESIGN §10, docs/lifecycle.md), plain Python, no I/O.

tests/integration/test_dedupe_model.py drives a real server (on a frozen
clock) and this model with the same random operations and demands the same
answers: which id each add returns, and each job's state and data. So this
file is the spec of the modes, written to be read:

- A key has at most one record: the job that stands for it, the time of the
  add that made that job (``first``) and, once it finished, the time it did.
- ``drop``: an add returns the record's job while it is waiting, delayed,
  blocked, active or pending a retry, and for ``window`` ms after it finished
  (``now < finished + window``); otherwise it makes a new job.
- ``throttle``: an add returns the record's job while ``now < first + window``,
  whatever became of that job; otherwise a new job.
- ``debounce``: an add while the record's job has not started (waiting,
  delayed) replaces its data and, if it is delayed, sets its run time to
  ``min(now + window, first + max_wait)``; otherwise a new job, delayed until
  ``now + window``.
- ``latest``: an add while the record's job has not started (waiting, delayed,
  blocked) replaces its data; while it is active or pending a retry, a new job
  is held (blocked) behind it and becomes the record; otherwise a new job.
  A held job starts waiting when the one it is held behind completes (at once)
  or dies or is removed (at the next maintenance).
- Removing the record's job frees the key; for a latest job held behind
  another that has not finished, the key goes back to that other job.
- A record of a finished job lasts the retention age (drop: its window), and a
  throttle record its window; no record expires while its job has not finished.

Time is the server's, in ms; a job pending a retry (``fail`` with delay 0) is
due at once, and a claim (or maintenance) first makes due jobs waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PENDING = ("waiting", "delayed", "blocked")
ALIVE = (*PENDING, "active", "failed")


@dataclass
class ModelJob:
    id: str
    key: str
    data: object
    state: str
    fire: int | None = None  # delayed or failed: when it is due
    behind: str | None = None  # blocked: the job it is held behind


@dataclass
class Record:
    id: str
    first: int
    finished: int | None = None
    expires: int | None = None  # the record is gone once now > expires
    behind: str | None = None


@dataclass(frozen=True)
class Rule:
    mode: str
    window: int = 0  # ms
    max_wait: int = 0  # ms, 0: none


@dataclass
class DedupeModel:
    now: int
    keep_ms: int = 86_400_000
    jobs: dict[str, ModelJob] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    # jobs held behind one that died or was removed: released at maintenance
    releasing: set[str] = field(default_factory=set)

    def record(self, key: str) -> Record | None:
        rec = self.records.get(key)
        if rec is not None and rec.expires is not None and self.now > rec.expires:
            del self.records[key]
            return None
        return rec

    # -- add ----------------------------------------------------------------
    def decide(self, key: str, rule: Rule) -> tuple[str | None, str | None]:
        """(the id the add returns, or None for a new job; the job a new one is held behind)."""
        rec = self.record(key)
        if rec is None:
            return None, None
        job = self.jobs.get(rec.id)
        state = job.state if job else None
        if rule.mode == "throttle":
            return (rec.id if self.now < rec.first + rule.window else None), None
        if rule.mode == "drop":
            held = state in ALIVE or (
                rec.finished is not None and self.now < rec.finished + rule.window
            )
            return (rec.id if held else None), None
        if job is not None and state in PENDING:
            return rec.id, None
        if rule.mode == "latest" and state in ALIVE:
            return None, rec.id
        return None, None

    def add(self, key: str, rule: Rule, data: object) -> tuple[str | None, str | None]:
        kept, behind = self.decide(key, rule)
        if kept is not None and rule.mode in ("debounce", "latest"):
            job = self.jobs[kept]
            job.data = data
            if rule.mode == "debounce" and job.state == "delayed":
                rec = self.records[key]
                fire = self.now + rule.window
                if rule.max_wait:
                    fire = min(fire, rec.first + rule.max_wait)
                job.fire = fire
        return kept, behind

    def made(self, new_id: str, key: str, rule: Rule, data: object, behind: str | None) -> None:
        """The server made job ``new_id`` for an add the model said was new."""
        if behind is not None:
            job = ModelJob(new_id, key, data, "blocked", behind=behind)
        elif rule.mode == "debounce":
            job = ModelJob(new_id, key, data, "delayed", fire=self.now + rule.window)
        else:
            job = ModelJob(new_id, key, data, "waiting")
        self.jobs[new_id] = job
        expires = self.now + rule.window if rule.mode == "throttle" else None
        self.records[key] = Record(new_id, self.now, expires=expires, behind=behind)

    # -- time and claims ----------------------------------------------------
    def promote(self) -> None:
        for job in self.jobs.values():
            if job.state in ("delayed", "failed") and job.fire is not None and job.fire <= self.now:
                job.state, job.fire = "waiting", None

    def claim_all(self) -> set[str]:
        self.promote()
        got = {j.id for j in self.jobs.values() if j.state == "waiting"}
        for job_id in got:
            self.jobs[job_id].state = "active"
        return got

    def maintain(self) -> None:
        self.promote()
        for job_id in sorted(self.releasing):
            job = self.jobs.get(job_id)
            if job is not None and job.state == "blocked":
                job.state, job.behind = "waiting", None
        self.releasing.clear()

    # -- outcomes -----------------------------------------------------------
    def _finish(self, job: ModelJob, rules: dict[str, Rule]) -> None:
        rec = self.record(job.key)
        if rec is None or rec.id != job.id:
            return
        rule = rules[job.key]
        if rule.mode == "drop":
            rec.finished, rec.expires = self.now, self.now + rule.window
        elif rule.mode != "throttle":
            rec.expires = self.now + self.keep_ms

    def _held_behind(self, job_id: str) -> list[ModelJob]:
        return [j for j in self.jobs.values() if j.state == "blocked" and j.behind == job_id]

    def complete(self, job_id: str, rules: dict[str, Rule]) -> None:
        job = self.jobs[job_id]
        job.state = "completed"
        self._finish(job, rules)
        for held in self._held_behind(job_id):
            held.state, held.behind = "waiting", None

    def fail(self, job_id: str, retry: bool, rules: dict[str, Rule]) -> None:
        job = self.jobs[job_id]
        if retry:
            job.state, job.fire = "failed", self.now
            return
        job.state = "dead"
        self._finish(job, rules)
        self.releasing.update(j.id for j in self._held_behind(job_id))

    def remove(self, job_id: str) -> None:
        job = self.jobs.pop(job_id)
        rec = self.record(job.key)
        if rec is not None and rec.id == job_id:
            other = self.jobs.get(rec.behind) if rec.behind else None
            if other is not None and other.state in ALIVE:
                self.records[job.key] = Record(other.id, rec.first)
            else:
                del self.records[job.key]
        self.releasing.update(j.id for j in self._held_behind(job_id))
