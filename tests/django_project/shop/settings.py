"""Settings of the test project: the database from SHOP_DB (``sqlite:PATH`` or
``postgresql:HOST:PORT:NAME:USER:PASSWORD``), Valkey from SHOP_VALKEY."""

from __future__ import annotations

import os
from typing import Any

SECRET_KEY = "tests-only"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "echomq.contrib.django", "shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _database(spec: str) -> dict[str, Any]:
    kind, _, rest = spec.partition(":")
    if kind == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": rest}
    host, port, name, user, password = rest.split(":", 4)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": host,
        "PORT": port,
        "NAME": name,
        "USER": user,
        "PASSWORD": password,
    }


DATABASES = {"default": _database(os.environ.get("SHOP_DB", "sqlite:/tmp/shop.db"))}
ECHOMQ = {"URL": os.environ.get("SHOP_VALKEY"), "POLL": 0.1}
