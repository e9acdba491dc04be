"""The Django app of echomq.contrib.django."""

from __future__ import annotations

from django.apps import AppConfig


class EchoMQConfig(AppConfig):
    name = "echomq.contrib.django"
    label = "echomq"
    verbose_name = "echomq"
    default_auto_field = "django.db.models.BigAutoField"
