"""Shared pieces: trivial async tools, the two agents (bare and harnessed)
built the same way, and what the model was sent (tokens, prefix breaks)."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import (
    CostPolicy,
    DependencyDown,
    Harness,
    HarnessConfig,
    Ledger,
    Prerequisite,
    Principal,
    ToolPolicy,
)

from ._model import BenchModel

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")
USER = Principal(user_id="u-1", tenant="acme")
CHARS_PER_TOKEN = 4


# ------------------------------------------------------------------ tools


class Tools:
    """Trivial async tools; ``result_chars`` sets the size of a search
    result, ``log`` records every invocation (name, args). ``novel``: each
    result brings new content (a productive run); otherwise a result only
    echoes its query (a model wandering for nothing)."""

    def __init__(self, result_chars: int = 40, novel: bool = True) -> None:
        self.result_chars = result_chars
        self.novel = novel
        self.log: list[tuple[str, dict[str, Any]]] = []

    def functions(self) -> list[Any]:
        log, size, novel = self.log, self.result_chars, self.novel

        async def search(q: str) -> str:
            """Search the catalogue.

            Args:
                q (str): The query.
            """
            log.append(("search", {"q": q}))
            return _document(q, size, novel)

        async def fetch(url: str) -> str:
            """Fetch a page found by search.

            Args:
                url (str): The page address.
            """
            log.append(("fetch", {"url": url}))
            return _document(url, size, novel)

        async def lookup_order(order_id: str, user_id: str) -> str:
            """Look up an order of the signed-in user.

            Args:
                order_id (str): The order.
                user_id (str): The user the order belongs to.
            """
            log.append(("lookup_order", {"order_id": order_id, "user_id": user_id}))
            return f"order {order_id}: 2 items, shipped"

        async def cancel_order(order_id: str, user_id: str) -> str:
            """Cancel an order of the signed-in user.

            Args:
                order_id (str): The order.
                user_id (str): The user the order belongs to.
            """
            log.append(("cancel_order", {"order_id": order_id, "user_id": user_id}))
            return f"order {order_id} cancelled"

        async def inventory(sku: str) -> str:
            """Stock level of a product (its database is down in the benchmark).

            Args:
                sku (str): The product.
            """
            log.append(("inventory", {"sku": sku}))
            raise DependencyDown("inventory-db", "connection refused")

        async def submit_answer(answer: str) -> str:
            """Deliver the final answer.

            Args:
                answer (str): The answer.
            """
            log.append(("submit_answer", {"answer": answer}))
            return "submitted"

        return [search, fetch, lookup_order, cancel_order, inventory, submit_answer]

    def toolkit(self) -> Toolkit:
        return Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in self.functions()])

    def invocations(self, name: str) -> int:
        return sum(1 for n, _ in self.log if n == name)


_LETTERS = str.maketrans("0123456789abcdef", "ghijklmnopqrstuv")


def _document(key: str, size: int, novel: bool = True) -> str:
    """A deterministic result of about ``size`` characters; ``novel``: with
    content new for each key, else the same sheet with only the key echoed."""
    # new words, not hex: a word of 8 hex digits is an id, which says nothing new
    facts = (
        " ".join(hashlib.sha1(f"{key}/{i}".encode()).hexdigest()[:8].translate(_LETTERS) for i in range(12))
        if novel else "price, stock, reviews and specifications"
    )
    # the new content first: a short result (the overhead's 40 characters)
    # is cut after it, so it stays new however long the key grows
    line = f"Product sheet {facts} for {key}. "
    return (line * (size // len(line) + 1))[:size]


# ------------------------------------------------------------------ policy


def full_policy(**overrides: Any) -> HarnessConfig:
    """Everything on, nothing refused in a normal run: roles, ledgers (with
    soft caps far away), identity-bound and prerequisite tools, prices and
    a USD cap, a deadline, call caps, a candidate threshold, pruning."""
    base: dict[str, Any] = {
        "tools": {
            "search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
            "fetch": ToolPolicy(
                role="retrieval", ledgers=["retrieval", "web"],
                requires=[Prerequisite(tool="search")],
            ),
            "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
            "cancel_order": ToolPolicy(
                role="mutation", identity_args={"user_id": "user_id"},
                requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])],
            ),
            "inventory": ToolPolicy(role="lookup"),
            "submit_answer": ToolPolicy(
                role="finish", requires_facts=["retrieved"],
                claims=[r"\border \w+ (?:was |is )?cancelled\b"],
            ),
        },
        "ledgers": {"retrieval": Ledger(cap=10_000, soft_at=9_000), "web": Ledger(cap=10_000)},
        "cost": CostPolicy(cap_usd=1_000.0, prices={"bench-model": (3.0, 15.0)}),
        "deadline_s": 3_600,
        "max_tool_calls": 100_000,
        "max_model_calls": 100_000,
        "enough_candidates": 100_000,
        "prune_over_tokens": 10_000_000,
    }
    base.update(overrides)
    return HarnessConfig(**base)


def harness(config: HarnessConfig | None = None, hooks: list[Any] = ()) -> Harness:
    return Harness(config or full_policy(), hooks=list(hooks), environ={}, load_entry_points=False)


# ------------------------------------------------------------------ agents


def make_agent(
    model: BenchModel,
    tools: Tools,
    h: Harness | None,
    *,
    max_iters: int | None = 100,
    runtime_state: bool = False,
    extra: tuple[Any, ...] = (),
) -> Agent:
    """The same Agent, with (``h``) or without the harness, and ``extra``
    middlewares. Runtime-state injection is off by default (its clock hints
    differ between runs)."""
    toolkit = tools.toolkit()
    middlewares: list[Any] = list(extra)
    if h is not None:
        h.instrument(toolkit)
        middlewares = h.middlewares()
    kw: dict[str, Any] = {}
    if max_iters is not None:
        kw["react_config"] = ReActConfig(max_iters=max_iters)
    if not runtime_state:
        kw["injection_config"] = InjectionConfig(inject_runtime_state=False)
    return Agent(
        name="shop",
        system_prompt="You are a helpful shop assistant. Use the tools to answer.",
        model=model,
        toolkit=toolkit,
        middlewares=middlewares,
        **kw,
    )


async def reply(agent: Agent, h: Harness | None, prompt: str = "Find me a good kettle.") -> Msg:
    if h is None:
        return await agent.reply(UserMsg("user", prompt))
    with h.acting_for(USER):
        return await agent.reply(UserMsg("user", prompt))


# ------------------------------------------------------------------ payloads


def message_strings(payload: list[dict[str, Any]]) -> list[str]:
    """Each API message as canonical bytes (what a provider hashes)."""
    return [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in payload]


def tokens_of(text_len: int) -> int:
    return text_len // CHARS_PER_TOKEN


@dataclass
class PayloadStats:
    """What the model was sent over a run, and how a provider prefix cache
    would see it (cached = the longest common prefix with the previous
    payload, tools first as providers send them)."""

    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    breaks: int = 0
    break_calls: list[int] = field(default_factory=list)
    tool_choice_changes: int = 0
    tools_changed: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cached_tokens

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


def payload_stats(model: BenchModel) -> PayloadStats:
    """Tokens (len(json)/4), prefix breaks and cache estimate of a model's
    recorded payloads. A break: the previous call's messages are not an
    exact, byte-identical prefix of this call's messages."""
    stats = PayloadStats(calls=len(model.payloads))
    prev_msgs: list[str] | None = None
    prev_flat = ""
    prev_tools = prev_choice = None
    for i, (payload, tools, choice) in enumerate(
        zip(model.payloads, model.tools_sent, model.tool_choices, strict=False),
    ):
        msgs = message_strings(payload)
        flat = tools + "".join(msgs)
        stats.input_tokens += tokens_of(len(flat))
        if prev_msgs is not None:
            if msgs[: len(prev_msgs)] != prev_msgs:
                stats.breaks += 1
                stats.break_calls.append(i + 1)
            stats.cached_tokens += tokens_of(_common_prefix(prev_flat, flat))
            if tools != prev_tools:
                stats.tools_changed += 1
            if repr(choice) != repr(prev_choice):
                stats.tool_choice_changes += 1
        prev_msgs, prev_flat, prev_tools, prev_choice = msgs, flat, tools, choice
    return stats


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


async def timed_on_loop(work: Awaitable[Any]) -> tuple[float, float, Any]:
    """Await ``work`` beside a ticker task that records the largest gap
    between its wake-ups: (total ms, longest event-loop block ms, result).

    The process's heap is collected and frozen first: a full collection
    of what came before (a test suite's millions of objects, 300-450 ms)
    is not the work's block, while the collections its own garbage causes
    still count."""
    with heap_frozen():
        return await _timed(work)


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Collect and freeze the heap so far for the block: timing gauges
    charge only the collections the measured work's own garbage causes."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _timed(work: Awaitable[Any]) -> tuple[float, float, Any]:
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    out = await work
    total = time.perf_counter() - started
    done = True
    await task
    return total * 1000, longest * 1000, out
