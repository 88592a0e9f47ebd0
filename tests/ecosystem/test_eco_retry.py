"""retry_call: backoff on transient errors, never past the run deadline,
DependencyDown when it gives up."""

from __future__ import annotations

import time

import pytest
from agentscope.message import ToolResultBlock
from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import DependencyDown, Harness, HarnessConfig, retry_call
from agentscope_harness.deadline import _DEADLINE, remaining_time


class Flaky:
    """Fails ``failures`` times with ``exc``, then answers; records call times."""

    def __init__(self, failures: int, exc: type[BaseException] = ConnectionError) -> None:
        self.failures, self.exc, self.times = failures, exc, []

    async def __call__(self, sku: str) -> str:
        self.times.append(time.monotonic())
        if len(self.times) <= self.failures:
            raise self.exc(f"attempt {len(self.times)} failed")
        return f"{sku}: 3 in stock"


async def test_retries_transient_errors_with_backoff():
    flaky = Flaky(failures=2)
    out = await retry_call(flaky, "SKU-7", attempts=3, initial_backoff_s=0.05, max_backoff_s=1)
    assert out == "SKU-7: 3 in stock"
    assert len(flaky.times) == 3
    gaps = [b - a for a, b in zip(flaky.times, flaky.times[1:])]
    assert gaps[0] >= 0.05  # waited before retrying
    assert gaps[1] >= 0.1   # and longer the second time (exponential)
    assert max(gaps) < 1.0


async def test_sync_functions_work_too():
    seen = []

    def lookup() -> str:
        seen.append(1)
        if len(seen) < 2:
            raise TimeoutError("slow")
        return "ok"

    assert await retry_call(lookup, attempts=2, initial_backoff_s=0.01) == "ok"
    assert len(seen) == 2


async def test_gives_up_with_dependency_down():
    flaky = Flaky(failures=99)
    with pytest.raises(DependencyDown) as info:
        await retry_call(flaky, "SKU-7", dependency="inventory service", attempts=3,
                         initial_backoff_s=0.01)
    assert len(flaky.times) == 3
    assert info.value.dependency == "inventory service"
    assert isinstance(info.value.cause, ConnectionError)
    assert str(info.value).startswith("inventory service is unavailable")


async def test_non_transient_errors_are_not_retried():
    flaky = Flaky(failures=5, exc=ValueError)
    with pytest.raises(ValueError):
        await retry_call(flaky, "SKU-7", attempts=5, initial_backoff_s=0.01)
    assert len(flaky.times) == 1


async def test_never_sleeps_past_the_run_deadline():
    flaky = Flaky(failures=99)
    deadline = time.monotonic() + 0.4
    token = _DEADLINE.set(deadline)
    try:
        with pytest.raises(DependencyDown) as info:
            await retry_call(flaky, "SKU-7", attempts=50, initial_backoff_s=0.1, max_backoff_s=5)
        gave_up = time.monotonic()
    finally:
        _DEADLINE.reset(token)
    # no attempt after the deadline, and gave up instead of sleeping past it
    # (the slack is the event loop's wake-up lag on a loaded machine)
    assert all(t < deadline + 0.1 for t in flaky.times)
    assert gave_up < deadline + 0.1
    assert 2 <= len(flaky.times) < 50
    assert isinstance(info.value.cause, ConnectionError)


async def test_past_the_deadline_it_does_not_retry_at_all():
    flaky = Flaky(failures=99)
    token = _DEADLINE.set(time.monotonic() - 1)
    try:
        with pytest.raises(DependencyDown):
            await retry_call(flaky, "SKU-7", attempts=5, initial_backoff_s=0.01)
    finally:
        _DEADLINE.reset(token)
    assert len(flaky.times) == 1


async def test_inside_a_harnessed_run_the_run_deadline_bounds_the_retries():
    flaky = Flaky(failures=99)
    seen_left: list[float] = []

    async def check_stock(sku: str) -> str:
        """Check stock.

        Args:
            sku (str): The SKU.
        """
        seen_left.append(remaining_time())
        return await retry_call(flaky, sku, dependency="inventory service", attempts=100,
                                initial_backoff_s=0.05, max_backoff_s=0.2)

    harness = Harness(HarnessConfig(deadline_s=0.8, wrap_up_s=0), load_entry_points=False)
    model = ScriptedModel([calls(("check_stock", {"sku": "SKU-7"})), text("The stock service is down.")])
    agent = make_agent(model, [check_stock], harness.middlewares())
    harness.instrument(agent.toolkit)
    started = time.monotonic()
    await run(agent, "is SKU-7 in stock?")
    elapsed = time.monotonic() - started

    assert 0 < seen_left[0] <= 0.8  # the tool saw the run's deadline
    assert elapsed < 0.8 + 1.0  # slack for a loaded CI machine
    assert 2 <= len(flaky.times) < 100
    # read the stored result: on a loaded machine the deadline may pass before
    # the next model call, which is then (rightly) skipped for the fallback
    told = next(
        b.output if isinstance(b.output, str) else "".join(t.text for t in b.output)
        for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)
    )
    assert told.rstrip().endswith(
        "[harness:dependency_down] inventory service is unavailable. Do not retry; tell the user.",
    )
    assert remaining_time() is None  # the deadline did not leak to the caller
