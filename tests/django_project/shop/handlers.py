"""The worker's handlers (manage.py echomq_worker shop.handlers:handlers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def send_receipt(job: Any) -> str:
    with Path(os.environ["SHOP_RECEIPTS"]).open("a", encoding="utf-8") as receipts:
        receipts.write(f"{job.data['order']}\n")
    return "sent"


handlers = {"send_receipt": send_receipt}
