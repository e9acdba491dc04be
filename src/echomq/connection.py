"""Placeholder until helper-1 lands the real module."""
from __future__ import annotations

import redis
import redis.asyncio as aioredis


def async_client(url: str | None) -> aioredis.Redis:
    return aioredis.Redis.from_url(url or "redis://127.0.0.1:7777", decode_responses=True)


def sync_client(url: str | None) -> redis.Redis:
    return redis.Redis.from_url(url or "redis://127.0.0.1:7777", decode_responses=True)
