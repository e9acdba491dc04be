"""The outbox tables as Django models: the same tables (names, columns, index) as
``echomq.outbox.Outbox.create_table`` makes, so the same relay serves both."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class OutboxRow(models.Model):
    """A job waiting for its transaction's commit and the relay (echomq.outbox)."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=128)
    name = models.CharField(max_length=512)
    data = models.TextField()
    options = models.TextField(default="", blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "echomq_outbox"
        indexes = [  # noqa: RUF012 - Django's Meta
            models.Index(fields=["queue", "id"], name="echomq_outbox_queue_id")
        ]

    def __str__(self) -> str:
        return f"outbox row {self.id}: {self.name} for {self.queue}"


class DeadRow(models.Model):
    """A row the queue refused for good, with the error (never retried by the relay)."""

    id = models.BigIntegerField(primary_key=True)
    queue = models.CharField(max_length=128)
    name = models.CharField(max_length=512)
    data = models.TextField()
    options = models.TextField(default="", blank=True)
    created_at = models.DateTimeField()
    error = models.TextField()
    dead_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "echomq_outbox_dead"

    def __str__(self) -> str:
        return f"dead outbox row {self.id}: {self.name} for {self.queue}"
