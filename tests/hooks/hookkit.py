"""Shared pieces of the per-hook tests: real async tools that record what ran,
a harnessed real Agent, and readers for what the model was told."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from scripted import ALLOW, ScriptedModel, make_agent, run, tool_messages

from agentscope_harness import DependencyDown, Harness, HarnessConfig


class Ran(list):
    """What actually ran: ``(tool, args)`` in execution order."""

    def of(self, name: str) -> list[dict[str, Any]]:
        return [args for tool, args in self if tool == name]


def searcher(ran: Ran, name: str = "search") -> Any:
    """A ``search`` tool (or ``name``) whose every result reads as news."""

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append((name, {"q": q}))
        return f"found {q}: {len(ran)} new facts about item {q}"

    search.__name__ = name
    return search


def refund_fn(ran: Ran, answer: str = "refunded {order_id}") -> Any:
    """The ``refund`` function, for a tool a test wraps its own way."""

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return answer.format(order_id=order_id)

    return refund


def refunding(ran: Ran, answer: str = "refunded {order_id}") -> Any:
    """A ``refund`` tool with no permission of its own (AgentScope asks)."""
    from agentscope.tool import FunctionTool

    return FunctionTool(refund_fn(ran, answer))


def crawling(ran: Ran, seconds: float) -> Any:
    """A ``crawl`` tool that takes ``seconds`` (records its start and end)."""
    import asyncio

    async def crawl(url: str) -> str:
        """Crawl a site.

        Args:
            url (str): The site.
        """
        ran.append(("crawl:start", {"url": url}))
        await asyncio.sleep(seconds)
        ran.append(("crawl:end", {"url": url}))
        return "crawled"

    return crawl


def streamed(events: list[Any]) -> str:
    """The text a streaming UI showed: every text delta, in order."""
    from agentscope.event import TextBlockDeltaEvent

    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def every_event(events: list[Any]) -> str:
    """Every streamed event as JSON (``repr`` where it has none), one a line:
    what a secret or a made-up value must not appear in."""
    out = []
    for e in events:
        try:
            out.append(json.dumps(e.model_dump(mode="json")))
        except Exception:
            out.append(repr(e))
    return "\n".join(out)


def client_tool(concurrent: bool = False) -> Any:
    """``client_lookup``, a tool the client runs (AgentScope hands the call
    to the application and the reply parks until its result)."""
    from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
    from agentscope.tool import ToolBase

    class ClientLookup(ToolBase):
        name = "client_lookup"
        description = "Look up an order on the user's device."
        input_schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
        is_concurrency_safe = concurrent
        is_read_only = True
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: PermissionContext) -> PermissionDecision:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    return ClientLookup()


async def inventory_down(sku: str) -> str:
    """Stock level of a product.

    Args:
        sku (str): The product.
    """
    raise DependencyDown("inventory API", "HTTP 503")


async def catalogue_search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): What to look for.
    """
    return f"results for {q}"


def down_shop(h: Harness, *more: Any) -> Any:
    """An instrumented toolkit whose ``inventory`` is down (``DependencyDown``)
    and whose ``search`` works, with ``more`` tools."""
    from agentscope.tool import FunctionTool, Toolkit

    tools = [FunctionTool(inventory_down, name="inventory", permission=ALLOW),
             FunctionTool(catalogue_search, name="search", permission=ALLOW), *more]
    return h.instrument(Toolkit(tools=tools))


async def structured_reply(agent: Any, schema: Any, prompt: str = "stock of a?") -> tuple[list[Any], Any]:
    """One streamed reply owing ``schema``: its events, and the final Msg."""
    from agentscope.message import Msg, UserMsg

    events: list[Any] = []
    final = None
    async for item in agent.reply_stream(UserMsg("user", prompt), structured_schema=schema, yield_final_msg=True):
        if isinstance(item, Msg):
            final = item
        else:
            events.append(item)
    assert final is not None
    return events, final


def structured_delegate(child: Any, name: str, schema: Any) -> Any:
    """A tool ``name`` that asks the sub-agent ``child`` for a structured
    reply of ``schema``: its output as JSON, else its text."""

    async def delegate(task: str) -> str:
        """Ask a sub-agent for a structured summary.

        Args:
            task (str): What.
        """
        from agentscope.message import UserMsg

        msg = await child.reply(UserMsg("lead", task), structured_schema=schema)
        return json.dumps(msg.structured_output) if msg.structured_output else (msg.get_text_content() or "")

    delegate.__name__ = name
    return delegate


def shop_tools(ran: Ran, delay: float = 0.0) -> dict[str, Any]:
    """A small shop: search, select, lookup/cancel an order, submit, ask."""

    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        if delay:
            await asyncio.sleep(delay)
        ran.append(("search", {"q": q}))
        return f"3 products for {q}: red mug, blue mug, green mug"

    async def select(pick: str) -> str:
        """Select products from the candidates.

        Args:
            pick (str): What to pick.
        """
        ran.append(("select", {"pick": pick}))
        return f"selected {pick}"

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order of a user.

        Args:
            order_id (str): The order.
            user_id (str): The user the order belongs to.
        """
        ran.append(("lookup_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} of {user_id}: 1 mug, status paid"

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order of a user.

        Args:
            order_id (str): The order.
            user_id (str): The user the order belongs to.
        """
        ran.append(("cancel_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} cancelled"

    async def submit(answer: str) -> str:
        """Deliver the final answer.

        Args:
            answer (str): The answer.
        """
        ran.append(("submit", {"answer": answer}))
        return "delivered"

    async def ask_user(question: str) -> str:
        """Ask the user a question.

        Args:
            question (str): The question.
        """
        ran.append(("ask_user", {"question": question}))
        return "question sent to the user"

    return {
        "search": search, "select": select, "lookup_order": lookup_order,
        "cancel_order": cancel_order, "submit": submit, "ask_user": ask_user,
    }


def harnessed(
    config: HarnessConfig | None,
    script: list[Any],
    tools: list[Any],
    hooks: tuple = (),
    repeat: bool = False,
    stream: bool = False,
    harness: Harness | None = None,
    **agent_kw: Any,
) -> tuple[Harness, ScriptedModel, Any]:
    """A Harness (new unless given), a scripted model and a real Agent."""
    h = harness or Harness(config, hooks=hooks, load_entry_points=False)
    model = ScriptedModel(script, repeat=repeat, stream=stream)
    agent = make_agent(model, tools, middlewares=h.middlewares(), **agent_kw)
    return h, model, agent


async def drive(h: Harness, agent: Any, principal: Any = None, prompt: str = "hi"):
    """One reply (as ``principal`` when given); events, final Msg, report."""
    if principal is not None:
        with h.acting_for(principal):
            events, final = await run(agent, prompt)
    else:
        events, final = await run(agent, prompt)
    return events, final, h.last_report(agent)


def results(model: ScriptedModel) -> list[str]:
    """Every tool result the model received, in order (from its last call)."""
    return tool_messages(model.calls[-1])


def stored_results(agent: Any) -> list[str]:
    """Every tool result in the agent's context, in order: what the model
    read, plus the results of a round that needed no further model call."""
    from agentscope.message import TextBlock, ToolResultBlock

    out = []
    for msg in agent.state.context:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                output = block.output
                out.append(output if isinstance(output, str) else "".join(
                    b.text for b in output if isinstance(b, TextBlock)))
    return out


def hint_texts(call: dict[str, Any]) -> list[str]:
    """The harness hints (system reminders) in one payload, in order."""
    out = []
    for message in call["formatted"]:
        content = message.get("content")
        parts = [content] if isinstance(content, str) else [
            p.get("text", "") for p in content or [] if isinstance(p, dict)
        ]
        for part in parts:
            if isinstance(part, str) and part.startswith("<system-reminder>"):
                out.append(part)
    return out


def codes(report: Any) -> dict[str, int]:
    """Refusals by code, from a report."""
    return dict(report.refusals)


def actions(report: Any, hook: str | None = None) -> list[tuple[str, str, str | None]]:
    """``(hook, action, code)`` of a report's decisions."""
    return [
        (d.hook, d.action, d.code) for d in report.decisions if hook is None or d.hook == hook
    ]


class ArgStream(ScriptedModel):
    """A streaming model that sends a tool call's JSON arguments (and text)
    ``chunk`` characters at a time, as providers do: every escape, secret
    and value is cut by a delta boundary somewhere."""

    async def _stream(self, res: Any) -> Any:
        from agentscope.message import TextBlock, ToolCallBlock
        from agentscope.model import ChatResponse

        for block in res.content:
            if isinstance(block, ToolCallBlock):
                for i in range(0, len(block.input), self.chunk):
                    piece = block.model_copy(update={"input": block.input[i:i + self.chunk]})
                    yield ChatResponse(content=[piece], is_last=False)
            elif isinstance(block, TextBlock):
                for i in range(0, max(len(block.text), 1), self.chunk):
                    yield ChatResponse(content=[TextBlock(id=block.id, text=block.text[i:i + self.chunk])],
                                       is_last=False)
        yield ChatResponse(content=[], is_last=False, usage=res.usage)


async def submit(answer: str) -> str:
    """Deliver the final answer.

    Args:
        answer (str): The answer.
    """
    return "delivered"


def streamed_args(events: list[Any]) -> str:
    """The tool-call arguments a stream showed, joined."""
    from agentscope.event import ToolCallDeltaEvent

    return "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
