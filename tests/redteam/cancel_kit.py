"""Shared kit for the cancellation enumeration."""
from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from scripted import ALICE, Ids, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, RateLimit
from agentscope_harness.stores import MemoryStore, SQLiteStore

PRICE = (1.0, 1.0)  # $ per Mtok in/out


class Provider(ScriptedModel):
    """Scripted provider with many awaits per request; records what it served
    (done: the usage
    cut: cancelled after the request went out -> its input)."""

    def __init__(self, *a: Any, spins: int = 5, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.spins = spins
        self.served: list[tuple[str, int, int]] = []
        self.inflight = 0

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.inflight += 1
        try:
            for _ in range(self.spins):
                await asyncio.sleep(0)
            res = await super()._call_api(*args, **kwargs)
        except asyncio.CancelledError:
            # the request is out at the provider: its input is billed
            self.served.append(("cut", 10, 0))
            raise
        finally:
            self.inflight -= 1
        u = res.usage if not self.stream else self.usage[-1]
        self.served.append(("done", u.input_tokens, u.output_tokens))
        return res

    def served_usd(self) -> float:
        return sum((i * PRICE[0] + o * PRICE[1]) / 1e6 for _, i, o in self.served)


def make_store(kind: str, tmp: str) -> Any:
    if kind == "memory":
        return MemoryStore()
    return SQLiteStore(f"{tmp}/s.db")


def held_reservations(store: Any) -> float:
    if isinstance(store, MemoryStore):
        return sum(u for holds in store._holds.values() for (u, _) in holds.values())
    conn = sqlite3.connect(store.path)
    try:
        return float(conn.execute("SELECT COALESCE(SUM(usd),0) FROM harness_holds").fetchone()[0])
    finally:
        conn.close()


def rate_levels(store: Any) -> dict[str, float]:
    """seconds of bucket held per key (tat - now)."""
    if isinstance(store, MemoryStore):
        now = store._clock()
        return {k: max(0.0, t - now) for k, t in store._rates.items()}
    conn = sqlite3.connect(store.path)
    try:
        now = store._clock()
        return {k: max(0.0, t - now) for k, t in conn.execute("SELECT key, tat FROM harness_rates")}
    finally:
        conn.close()


def build(kind: str, tmp: str, *, shape: str, rates: bool, quota: bool, where: str = "tool",
          stream: bool = False, spins: int = 5, cap: float | None = 100.0, deadline: float | None = None,
          parallel: bool = False, rate_wait: bool = False) -> dict[str, Any]:
    store = make_store(kind, tmp)
    rer = Provider(lambda turn: calls(("generate_structured_output", {"ids": ["c1"]}), inp=10, out=5),
                   model="rer", spins=spins, stream=stream)
    base_script = []
    if where == "tool":
        first = calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), inp=10, out=5) if parallel else \
            calls(("lookup", {"q": "a"}), inp=10, out=5)
        base_script = [first, text("done", inp=10, out=5)]
    else:
        base_script = [text("done", inp=10, out=5)]
    base = Provider(base_script + [text("again", inp=10, out=5)] * 3, model="base", spins=spins, stream=stream)

    async def side(i: int) -> str:
        res = await rer.generate_structured_output([UserMsg("user", f"rank {i}")], structured_model=Ids)
        return str(res.content)

    async def sides() -> str:
        if shape == "one":
            return await side(0)
        if shape == "seq2":
            return await side(0) + await side(1)
        if shape == "gather2":
            return "".join(await asyncio.gather(side(0), side(1)))
        if shape == "gather2+1":
            a = await asyncio.gather(side(0), side(1))
            return "".join(a) + await side(2)
        if shape == "timeout":
            try:
                async with asyncio.timeout(0.0005):
                    return await side(0)
            except TimeoutError:
                return "timeout"
        raise ValueError(shape)

    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        try:
            return await sides()
        except Exception as exc:  # ModelCallRefused
            return f"not reranked: {type(exc).__name__}"

    class SideMW(MiddlewareBase):
        async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            try:
                await sides()
            except Exception:
                pass
            async for e in next_handler(**input_kwargs):
                yield e

    rl = [RateLimit(scope="principal", calls_per_min=600, tokens_per_min=10_000_000)] if rates else []
    if rate_wait:
        rl = [RateLimit(scope="principal", calls_per_min=6000, wait_s=5)]
    cost = CostPolicy(cap_usd=cap, daily_quota_usd=(100.0 if quota else None),
                      prices={"base": PRICE, "rer": PRICE})
    h = Harness(HarnessConfig(store=store, cost=cost, rate_limits=rl, deadline_s=deadline), load_entry_points=False, environ={})
    mws = [SideMW(), *h.middlewares()] if where == "mw" else h.middlewares()
    from agentscope.tool import FunctionTool, Toolkit
    from scripted import ALLOW
    tk = Toolkit(tools=[FunctionTool(lookup, permission=ALLOW, is_concurrency_safe=parallel)] if where == "tool" else [])
    agent = make_agent(base, h.instrument(tk), mws)
    return dict(store=store, h=h, agent=agent, base=base, rer=rer)


async def reply(env: dict[str, Any], prompt: str = "look it up") -> None:
    with env["h"].acting_for(ALICE):
        await run(env["agent"], prompt)
