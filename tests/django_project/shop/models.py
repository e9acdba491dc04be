"""An order: the application's own table, written in the same transaction as its job."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    total = models.IntegerField()

    def __str__(self) -> str:
        return f"order {self.pk}"
