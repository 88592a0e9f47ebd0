"""AgentScope's middleware chains leave no garbage cycles behind a harnessed
reply (issue 16 item 3). Each chain call is a closure referring to itself,
holding the call's arguments until a full collection; when a harness layer
has finished with a chain it puts a rebuilt, acyclic equivalent in the
closure's own cell (``chains.release``), so reference counting frees the
closure. The chain must stay callable and unchanged: an inner middleware may
call it after the harness's layer returned (a lazy or retried stream, a tool
run by a background task, an adapter subclass retrying through ``super()``)
or leave an argument to its default (the red team's cases, each below).
With the collector off, a reply's cyclic garbage is counted exactly:
``gc.collect`` under ``DEBUG_SAVEALL`` keeps every object it would have freed."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator
from typing import Any

import pytest
from agentscope.message import TextBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit, ToolResponse
from scripted import ALLOW, RAN, ScriptedModel, calls, make_agent, search, text

from agentscope_harness import DependencyDown, Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.adapters import HarnessAgentAdapter
from agentscope_harness.chains import release

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
    """The objects only the collector could free, made inside the block
    (collected until nothing is left first: a finalizer run by one
    collection, an earlier test's, may free what only the next one frees)."""
    for _ in range(5):
        if not gc.collect():
            break
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
    assert garbage == [], sorted(type(o).__name__ for o in garbage)


async def test_the_same_reply_through_a_plain_middleware_leaves_its_chains_behind():
    """The measurement can fail: a middleware that does not free its
    chains leaves one ``execute_chain`` per chain call."""
    agent = make_agent(ScriptedModel(script()), toolkit(), middlewares=[PassThrough()])
    await reply(agent, None)
    agent = make_agent(ScriptedModel(script()), toolkit(), middlewares=[PassThrough()])
    with cyclic_garbage() as garbage:
        await reply(agent, None)
    assert len(chain_functions(garbage)) == 2 * 5  # reasoning and model call, five rounds


@pytest.mark.parametrize("outside", [True, False])
async def test_a_middleware_may_call_the_chain_again(outside: bool):
    """A retrying application middleware, outside the harness or inside it,
    calls the rest of the chain twice: both calls are served."""
    h = harness()
    other = PassThrough(calls=2)
    model = ScriptedModel([text("first"), text("second")])
    layers = [other, *h.middlewares()] if outside else [*h.middlewares(), other]
    agent = make_agent(model, toolkit(), middlewares=layers)
    with cyclic_garbage() as garbage:  # a released chain called again: rebuilt, no cycle
        final = await reply(agent, h)
    assert chain_functions(garbage) == []
    assert not [o for o in garbage if type(o).__name__ == "_Rebuilt"]
    assert other.model_calls == 2 and len(model.calls) == 2
    assert final.get_text_content() == "second"
    assert h.last_report(agent).terminal_state.value == "completed"


class LazyStream(MiddlewareBase):
    """Serves every model call as a stream that calls the rest of the chain
    only when it is first read: after the harness's layer has returned."""

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async def stream() -> Any:
            response = await next_handler(**input_kwargs)
            yield response

        return stream()


class Background(MiddlewareBase):
    """Runs the tool in a task and answers at once; the task reaches the
    tool later (a rate limiter's wait), after the harness's layer returned."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task] = []

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async def later() -> list[Any]:
            await asyncio.sleep(0.05)
            return [item async for item in next_handler(**input_kwargs)]

        self.tasks.append(asyncio.create_task(later()))
        call = input_kwargs["tool_call"]
        yield ToolResponse(id=call.id, content=[TextBlock(text="running in the background")])


class RetryingAdapter(HarnessAgentAdapter):
    """An application's adapter subclass retrying a failed model call
    through ``super()``, with the same ``next_handler``."""

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        try:
            return await super().on_model_call(agent, input_kwargs, next_handler)
        except ConnectionError:
            return await super().on_model_call(agent, input_kwargs, next_handler)


async def test_a_stream_read_after_the_harness_returned_is_served():
    h = harness()
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("The K2.")])
    agent = make_agent(model, toolkit(), middlewares=[*h.middlewares(), LazyStream()])
    final = await reply(agent, h)
    assert final.get_text_content() == "The K2." and len(model.calls) == 2
    assert h.last_report(agent).tool_calls == {"search": 1}


async def test_a_tool_run_by_a_background_task_still_runs():
    h = harness()
    background = Background()
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("Started.")])
    agent = make_agent(model, toolkit(), middlewares=[*h.middlewares(), background])
    await reply(agent, h)
    [task] = background.tasks
    items = await task
    assert RAN == ["kettle"]
    assert items[-1].content[0].text.endswith("found kettle")


async def test_an_adapter_subclass_may_retry_through_super():
    h = harness()
    _, tool_side = h.middlewares()
    model = ScriptedModel([ConnectionError("reset"), text("answer")])
    agent = make_agent(model, toolkit(), middlewares=[RetryingAdapter(h), tool_side])
    final = await reply(agent, h)
    assert final.get_text_content() == "answer" and len(model.calls) == 2


def test_a_handler_of_another_shape_is_left_alone():
    async def handler(**kwargs: Any) -> None:
        return None

    def outer() -> Any:
        execute_chain = len

        async def next_handler(**kwargs: Any) -> Any:
            return execute_chain  # a cell of that name, not a chain referring to itself

        return next_handler

    shaped = outer()
    for candidate in (handler, shaped, len, None, lambda: None):
        release(candidate)  # no error, nothing changed
    assert shaped.__closure__[0].cell_contents is len


async def test_a_released_chain_runs_the_same_code_with_the_same_arguments():
    """Called after its release (twice: the rebuilt function is made once),
    a chain recurses through itself and keeps its defaults."""
    seen: list[tuple[int, str]] = []
    handlers: list[Any] = []

    def chain_of(word: str) -> Any:  # AgentScope's shape
        async def execute_chain(index: int = 0, word: str = word) -> int:
            seen.append((index, word))
            if index >= 2:
                return index

            async def next_handler(**kwargs: Any) -> int:
                return await execute_chain(index + 1, **kwargs)

            handlers.append(next_handler)
            return await next_handler()

        return execute_chain

    assert await chain_of("w")() == 2
    handler = handlers[0]
    release(handler)
    assert type(handler.__closure__[0].cell_contents).__name__ == "_Rebuilt"
    assert await handler() == 2 and await handler(word="x") == 2
    assert seen == [(0, "w"), (1, "w"), (2, "w"), (1, "w"), (2, "w"), (1, "x"), (2, "w")]  # defaults kept


class DropsAKey(MiddlewareBase):
    """Leaves an argument out of the rest of the chain (AgentScope then
    passes the call's own value: the chain's default)."""

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        input_kwargs.pop("tool_choice", None)
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        input_kwargs.pop("current_model", None)
        return await next_handler(**input_kwargs)

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        input_kwargs.pop("tool_input", None)
        return await next_handler(**input_kwargs)


@pytest.mark.parametrize("outside", [True, False])
async def test_a_middleware_may_leave_arguments_to_the_chains_defaults(outside: bool):
    """A released chain keeps its defaults (red team: dropping them broke a
    middleware that leaves a key out)."""
    h = harness()
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("The K2.")])
    layers = [DropsAKey(), *h.middlewares()] if outside else [*h.middlewares(), DropsAKey()]
    agent = make_agent(model, toolkit(), middlewares=layers)
    final = await reply(agent, h)
    assert final.get_text_content() == "The K2." and RAN == ["kettle"]
    assert h.last_report(agent).terminal_state.value == "completed"


@pytest.mark.parametrize("behavior", [PermissionBehavior.ASK, PermissionBehavior.DENY])
async def test_a_call_agentscope_does_not_allow_leaves_no_cyclic_garbage(behavior: PermissionBehavior):
    """Every gate passed, then AgentScope's own permission engine asks a
    human (or denies): the charges the gates asked for are never made, and
    nothing of the judged call (its context, the gates' admission closures
    that refer to it) waits for the collector."""
    h = harness()
    decision = PermissionDecision(behavior=behavior, message="the application's own rule")
    tools = Toolkit(tools=[FunctionTool(search, permission=decision)])
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("I could not search.")])
    agent = make_agent(ScriptedModel([text("warm")]), tools, middlewares=h.middlewares())
    await reply(agent, h)
    agent = make_agent(model, tools, middlewares=h.middlewares())
    with cyclic_garbage() as garbage:
        await reply(agent, h)
    assert RAN == []  # neither asked nor denied calls run
    report = h.last_report(agent)
    assert report.tool_calls.get("search", 0) == 0
    expected = "waiting_input" if behavior == PermissionBehavior.ASK else "completed"
    assert report.terminal_state.value == expected
    assert garbage == [], sorted(type(o).__name__ for o in garbage)


@pytest.mark.parametrize("where", ["harness gate", "agentscope permission"])
async def test_a_call_cancelled_while_it_is_judged_leaves_no_cyclic_garbage(where: str):
    """The consumer cancels the reply while a call is judged: in the
    harness's own gates (an async ``ask_when`` that waits) or in
    AgentScope's permission engine. The charges the gates asked for are
    dropped and the call's slots given back: nothing waits for the collector."""
    reached = asyncio.Event()

    async def waits(args: dict[str, Any]) -> None:
        reached.set()
        await asyncio.sleep(30)

    class SlowPermission(FunctionTool):
        async def check_permissions(self, tool_input: Any, context: Any) -> Any:
            reached.set()
            await asyncio.sleep(30)
            return ALLOW

    policy = ToolPolicy(role="retrieval", ask_when=waits) if where == "harness gate" else ToolPolicy(role="retrieval")
    h = Harness(HarnessConfig(tools={"search": policy}), load_entry_points=False)
    tools = [FunctionTool(search, permission=ALLOW)] if where == "harness gate" else [SlowPermission(search)]
    warm = make_agent(ScriptedModel([text("warm")]), tools, middlewares=h.middlewares())
    await reply(warm, h)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), tools, middlewares=h.middlewares())

    async def consume() -> None:
        with h.acting_for(USER):
            async for _ in agent.reply_stream(UserMsg("user", "hi")):
                pass

    with cyclic_garbage() as garbage:
        task = asyncio.create_task(consume())
        await reached.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del task
    assert RAN == []
    assert garbage == [], sorted(type(o).__name__ for o in garbage)
