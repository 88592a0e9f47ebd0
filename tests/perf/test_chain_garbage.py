"""AgentScope's middleware chains leave no garbage cycles behind a harnessed
reply (issue 16 item 3). Each chain call is a closure referring to itself,
holding the call's arguments until a full collection; the harness, as the
outermost layer, breaks that cycle once the chain is done
(``adapters.chain.release_chain``). With the collector off, a reply's
cyclic garbage is counted exactly: ``gc.collect`` under ``DEBUG_SAVEALL``
keeps every object it would have freed."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import FunctionTool, Toolkit
from scripted import ALLOW, ScriptedModel, calls, make_agent, search, text

from agentscope_harness import DependencyDown, Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.adapters.chain import release_chain

USER = Principal(user_id="u-1", tenant="acme")


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Whose order.
    """
    return f"order {order_id} of {user_id}: shipped"


async def inventory(sku: str) -> str:
    """Stock of a product (its database is down).

    Args:
        sku (str): The product.
    """
    raise DependencyDown("inventory-db", "connection refused")


class PassThrough(MiddlewareBase):
    """An application middleware on the hooks the harness uses; on
    ``on_model_call`` it calls the rest of the chain ``calls`` times (a
    retrying middleware), returning the last answer."""

    def __init__(self, calls: int = 1) -> None:
        self.calls = calls
        self.model_calls = 0

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        for _ in range(self.calls):
            self.model_calls += 1
            result = await next_handler(**input_kwargs)
        return result


def script() -> list[Any]:
    return [
        calls(("search", {"q": "kettle"})),
        calls(("lookup_order", {"order_id": "o-1", "user_id": "u-2"})),  # another user's: refused
        calls(("lookup_order", {"order_id": "o-1", "user_id": "u-1"})),
        calls(("inventory", {"sku": "k2"})),  # raises: classified by the tool-level middleware
        text("The Acme K2 kettle, order o-1 shipped."),
    ]


def harness() -> Harness:
    config = HarnessConfig(tools={
        "search": ToolPolicy(role="retrieval"),
        "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
        "inventory": ToolPolicy(role="lookup"),
    })
    return Harness(config, load_entry_points=False)


def toolkit() -> Toolkit:
    return Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in (search, lookup_order, inventory)])


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[Any]]:
    """The objects only the collector could free, made inside the block."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[Any] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def chain_functions(garbage: list[Any]) -> list[str]:
    return [o.__qualname__ for o in garbage if type(o).__name__ == "function" and "execute_chain" in o.__qualname__]


async def reply(agent: Any, h: Harness | None) -> Any:
    with h.acting_for(USER) if h is not None else contextlib.nullcontext():
        return await agent.reply(UserMsg("user", "Find me a kettle and my order o-1."))


async def test_a_harnessed_reply_leaves_no_cyclic_garbage():
    h = harness()
    tools = toolkit()
    h.instrument(tools)
    agent = make_agent(ScriptedModel(script()), tools, middlewares=h.middlewares())
    await reply(agent, h)  # warm: first-use caches are not the reply's garbage
    agent = make_agent(ScriptedModel(script()), tools, middlewares=h.middlewares())
    with cyclic_garbage() as garbage:
        final = await reply(agent, h)
    report = h.last_report(agent)
    # the inventory was down: the run says so, after one refusal of another user's order
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert report.refusals == {"permission_denied": 1}
    assert report.tool_calls == {"search": 1, "lookup_order": 1, "inventory": 1}
    assert "kettle" in final.get_text_content()
    assert garbage == [], sorted({type(o).__name__ for o in garbage})


async def test_the_same_reply_through_a_plain_middleware_leaves_its_chains_behind():
    """The measurement can fail: a middleware that does not release its
    chains leaves one ``execute_chain`` per chain call."""
    agent = make_agent(ScriptedModel(script()), toolkit(), middlewares=[PassThrough()])
    await reply(agent, None)
    agent = make_agent(ScriptedModel(script()), toolkit(), middlewares=[PassThrough()])
    with cyclic_garbage() as garbage:
        await reply(agent, None)
    assert len(chain_functions(garbage)) == 2 * 5  # reasoning and model call, five rounds


async def test_a_middleware_outside_the_harness_may_call_the_chain_again():
    """Only the outermost layer releases: a retrying application middleware
    around the harness calls the rest of the chain twice and both calls are
    served (the harness is not outermost, so it leaves the chain alone)."""
    h = harness()
    outer = PassThrough(calls=2)
    model = ScriptedModel([text("first"), text("second")])
    agent = make_agent(model, toolkit(), middlewares=[outer, *h.middlewares()])
    final = await reply(agent, h)
    assert outer.model_calls == 2 and len(model.calls) == 2
    assert final.get_text_content() == "second"


async def test_a_middleware_inside_the_harness_may_call_the_chain_again():
    h = harness()
    inner = PassThrough(calls=2)
    model = ScriptedModel([text("first"), text("second")])
    agent = make_agent(model, toolkit(), middlewares=[*h.middlewares(), inner])
    final = await reply(agent, h)
    assert inner.model_calls == 2 and len(model.calls) == 2
    assert final.get_text_content() == "second"
    assert h.last_report(agent).terminal_state.value == "completed"


def test_a_handler_of_another_shape_is_left_alone():
    async def handler(**kwargs: Any) -> None:
        return None

    def outer() -> Any:
        index = 0

        async def next_handler(**kwargs: Any) -> Any:
            return index  # a closure, but no chain of AgentScope's

        return next_handler

    for candidate in (handler, outer(), len, None, lambda: None):
        release_chain(candidate)  # no error, nothing changed
    assert outer().__closure__[0].cell_contents == 0
