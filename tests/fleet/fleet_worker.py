"""Worker processes of the fleet tests. Spawned children import this module
by name, so it lives apart from the test files. Each worker stays up for a
whole test module and runs one scenario per command, starting it together
with the other workers on a shared barrier."""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

PROCS, OPS = 4, 50


def make_store(backend: str, target: str, prefix: str) -> Any:
    from agentscope_harness.stores import RedisStore, SQLiteStore

    if backend == "sqlite":
        return SQLiteStore(target, timeout_s=10.0)
    return RedisStore(target, prefix=prefix, timeout_s=10.0)


async def scenario(store: Any, name: str, key: str, in_flight: Any) -> list[Any]:
    """Run ``OPS`` operations of ``name``; the worker's own log of outcomes."""
    log: list[Any] = []
    for _ in range(OPS):
        if name == "lease_hold":  # never released: exactly max_in_flight in all
            log.append(await store.lease_acquire(key, 3, lease_s=60))
        elif name == "lease_churn":  # acquire, count in flight, release
            lid = await store.lease_acquire(key, 3, lease_s=60)
            if lid is None:
                log.append(None)
                continue
            with in_flight.get_lock():
                in_flight.value += 1
                log.append(in_flight.value)
            await asyncio.sleep(0.001)
            with in_flight.get_lock():
                in_flight.value -= 1
            await store.lease_release(key, lid)
        elif name == "rate":
            log.append(await store.rate_acquire(key, per_min=5))
        elif name == "tokens":
            log.append(await store.rate_acquire(key, per_min=1000, cost=30))
        elif name == "reserve":
            rid = await store.reserve_spend(key, 0.25, quota=10.0)
            log.append(None if rid is None else await store.settle_spend(key, rid, 0.25))
        elif name == "reserve_under":  # settle below the hold: the freed rest is reused
            rid = await store.reserve_spend(key, 0.5, quota=10.0)
            log.append(None if rid is None else await store.settle_spend(key, rid, 0.25))
        elif name == "allow":
            log.append(await store.breaker_allow(key, cooldown_s=0, probe_lease_s=60))
        elif name.startswith("harness_"):
            return await harness_scenario(store, name, key, in_flight)
        else:
            raise ValueError(name)
    return log


PRICE = (2.0, 8.0)
MAX_OUT = 100


def harness_agent(harness: Any, script: list[Any], search: Any) -> Any:
    """A real Agent under ``harness`` with one tool, ``search``."""
    from agentscope.agent import Agent, InjectionConfig
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_harness.testing import ScriptedModel

    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")
    return Agent(
        name="shop", system_prompt="You are a helpful shop assistant.",
        model=ScriptedModel(script), toolkit=harness.instrument(Toolkit(tools=[FunctionTool(search, permission=allow)])),
        middlewares=harness.middlewares(), injection_config=InjectionConfig(enabled=False),
    )


async def call_estimate() -> float:
    """The reservation of one ``harness_quota`` run's model call (USD)."""
    from agentscope.message import UserMsg

    from agentscope_harness import Harness
    from agentscope_harness.fleet import estimate_input_tokens, max_output_tokens
    from agentscope_harness.testing import text

    harness = Harness(load_entry_points=False)

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        return q

    agent = harness_agent(harness, [text("ok")], search)
    async for _ in agent.reply_stream(UserMsg("user", "go")):
        pass
    turn = agent.model.calls[0]
    config = harness_config("harness_quota", None, 1.0)
    return (PRICE[0] * estimate_input_tokens(turn.messages, turn.tools or [])
            + PRICE[1] * max_output_tokens(agent.model, config)) / 1e6


def harness_config(name: str, store: Any, quota: float) -> Any:
    from agentscope_harness import CostPolicy, HarnessConfig, RateLimit

    if name == "harness_rate":
        return HarnessConfig(store=store, rate_limits=[RateLimit(scope="tool", tool="search", calls_per_min=5)])
    if name == "harness_probe":
        return HarnessConfig(store=store, breaker_cooldown_s=0.001, breaker_failures=1)
    return HarnessConfig(store=store, cost=CostPolicy(
        prices={"scripted": PRICE}, daily_quota_usd=quota, max_output_tokens=MAX_OUT))


async def harness_scenario(store: Any, name: str, key: str, finished: Any) -> list[Any]:
    """``OPS`` runs of one principal through a Harness on ``store``, side by
    side; per run: (the tool ran, the first tool result, the run's spend)."""
    from agentscope.message import UserMsg

    from agentscope_harness import Harness, Principal
    from agentscope_harness.testing import calls, text

    principal, _, quota = key.partition("|")
    harness = Harness(harness_config(name, store, float(quota or 0)), load_entry_points=False)
    user = Principal(user_id=principal, tenant="acme")

    async def one(i: int) -> Any:
        ran: list[str] = []

        async def search(q: str) -> str:
            """Search.

            Args:
                q (str): The query.
            """
            ran.append(q)
            if name == "harness_probe":  # the probe holds on until every other run ended
                while finished.value < PROCS * OPS - 1:
                    await asyncio.sleep(0.01)
            return f"found {q}"

        script = ([text("ok", inp=50, out=50)] if name == "harness_quota"
                  else [calls(("search", {"q": f"q{i}"})), text("ok")])
        agent = harness_agent(harness, script, search)
        try:
            with harness.acting_for(user):
                async for _ in agent.reply_stream(UserMsg("user", "go")):
                    pass
        finally:
            with finished.get_lock():
                finished.value += 1
        report = harness.last_report(agent)
        told = _results(agent)
        return (bool(ran), told[0] if told else None, report.spent_usd, report.reason)

    return list(await asyncio.gather(*(one(i) for i in range(OPS))))


def _results(agent: Any) -> list[str]:
    from agentscope.message import ToolResultBlock

    return [b.output if isinstance(b.output, str) else "".join(getattr(x, "text", "") for x in b.output)
            for m in agent.state.context if not isinstance(m.content, str)
            for b in m.content if isinstance(b, ToolResultBlock)]


def serve(commands: Any, out: Any, barrier: Any, in_flight: Any) -> None:
    """Run commands ``(backend, target, prefix, scenario, key)`` until None."""

    async def one(command: tuple[str, str, str, str, str]) -> list[Any]:
        backend, target, prefix, name, key = command
        store = make_store(backend, target, prefix)
        barrier.wait(timeout=30)
        try:
            return await scenario(store, name, key, in_flight)
        finally:
            if backend == "redis":
                await store.aclose()

    while (command := commands.get()) is not None:
        try:
            out.put(("ok", asyncio.run(one(command))))
        except Exception as exc:
            out.put(("error", repr(exc)))


class Fleet:
    """``PROCS`` spawned worker processes."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier, self.out = ctx.Barrier(PROCS), ctx.Queue()
        self.in_flight = ctx.Value("i", 0)
        self.queues = [ctx.Queue() for _ in range(PROCS)]
        self.procs = [ctx.Process(target=serve, args=(q, self.out, self.barrier, self.in_flight),
                                  daemon=True) for q in self.queues]
        for p in self.procs:
            p.start()

    def run(self, backend: str, target: str, prefix: str, name: str, key: str) -> list[list[Any]]:
        """Every worker's log of one scenario run by all at once."""
        for q in self.queues:
            q.put((backend, target, prefix, name, key))
        results = [self.out.get(timeout=60) for _ in self.queues]
        errors = [detail for status, detail in results if status == "error"]
        assert not errors, errors
        return [log for _, log in results]

    def close(self) -> None:
        for q in self.queues:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10)
