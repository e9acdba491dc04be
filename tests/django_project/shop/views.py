"""What a view does: save the order and enqueue its receipt in one transaction."""

from __future__ import annotations

import os

from django.db import transaction

from echomq.contrib.django import enqueue
from shop.models import Order


def place_order(total: int, *, fail: bool = False) -> int:
    """Save an order and enqueue its receipt; ``fail`` raises after both (rollback)."""
    with transaction.atomic():
        order = Order.objects.create(total=total)
        enqueue(
            os.environ.get("SHOP_QUEUE", "receipts"),
            "send_receipt",
            {"order": order.pk},
            priority=1,
        )
        if fail:
            raise RuntimeError("payment declined")
    return int(order.pk)
