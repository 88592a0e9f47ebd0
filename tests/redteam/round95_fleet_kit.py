"""Round 95 (fleet) helpers: two workers' stores on one SQLite file or one
Redis (``HARNESS_TEST_REDIS_URL``, db 6 in this round), real tools."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope_harness.stores import RedisStore, SQLiteStore

ACTED: list[tuple[str, Any]] = []


def kinds() -> list[str]:
    return ["sqlite", "redis"] if os.environ.get("HARNESS_TEST_REDIS_URL") else ["sqlite"]


def store_of(kind: str, tmp_path: Path) -> Callable[[], Any]:
    """A factory of handles on one shared store (each call: one worker's)."""
    if kind == "sqlite":
        path = str(tmp_path / f"shared-{uuid.uuid4().hex[:6]}.db")
        return lambda: SQLiteStore(path)
    prefix = f"rt95{uuid.uuid4().hex[:8]}"
    return lambda: RedisStore(os.environ["HARNESS_TEST_REDIS_URL"], prefix=prefix)


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    ACTED.append(("pay_out", amount))
    return f"paid {amount}"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    ACTED.append(("lookup", q))
    return f"found {q}"
