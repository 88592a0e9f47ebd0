"""The fleet benchmark stays runnable (quick sizes; no figures asserted)."""

from __future__ import annotations

import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import fleet


async def test_fleet_benchmark_measures_every_store_it_can_reach(monkeypatch):
    url = os.environ.get("HARNESS_TEST_REDIS_URL")
    if url is None:  # no Redis for the tests: the Redis rows must be skipped, saying so
        monkeypatch.setenv("HARNESS_BENCH_REDIS_URL", "redis://127.0.0.1:1/0")
    section = await fleet.run("quick")
    stores = ["memory", "sqlite"] + (["redis"] if section.data["redis"] else [])
    assert list(section.data["latency"]) == stores
    for by_op in section.data["latency"].values():
        assert list(by_op) == list(fleet.OPS)
        assert all(0 < p50 <= p99 and math.isfinite(p99) for p50, p99 in by_op.values())
    for by_procs in section.data["throughput"].values():
        assert list(by_procs) == list(fleet.SIZES["quick"].procs)
        assert all(rate > 0 for rate in by_procs.values())
    assert all(b > 0 for b in section.data["memory"].values())
    if not section.data["redis"]:
        assert any("Redis rows skipped" in line for line in section.details)
