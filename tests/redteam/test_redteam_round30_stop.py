"""Red team, round 30: stopping power and honest endings on the path users
run (AgentScope's real ``OpenAIChatModel`` against the scripted
OpenAI-compatible server: real HTTP, SSE, split tool-call deltas).

1. the deadline around a call's judging: an async ``ask_when`` (a risk
   service asked whether a refund needs a human) that is slow;
2. the reason a run ends with when the model ignores a constraint that did
   not come from a lack of progress (the wrap-up window near the deadline,
   the finishing tool required), and what the user is then told;
3. AgentScope's own iteration cap (``ReActConfig.max_iters``) reached by a
   model that ignores its forced finalisation: what the user receives;
4. a sub-agent (an agent used as a tool of a harnessed agent) that is
   stopped: is its terminal state visible in the lead's tool result;
5. regression guards: the ladders (same call, two tools alternated, an
   ignored ``permission_denied``) through the real client, a reply after
   one cut at the deadline, two concurrent replies on one Harness, what the
   model is told of truncated and pruned results.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.model import OpenAIChatModel
from hookkit import drive
from pydantic import SecretStr
from scripted import make_agent
from server import FakeOpenAI, Reply

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy

U42 = Principal(user_id="u-42", tenant="acme")
FALLBACK_START = "I could not complete this request"


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    """AgentScope's real ``OpenAIChatModel`` pointed at the scripted server
    (both retry loops off unless asked); clients closed on the test's loop."""
    made: list[OpenAIChatModel] = []

    def make(srv: FakeOpenAI, stream: bool = True, max_retries: int = 0, model: str = "gpt-test",
             **kw: Any) -> OpenAIChatModel:
        kw.setdefault("retry_delay", 0.01)
        m = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=srv.base_url),
            model=model, stream=stream, max_retries=max_retries,
            client_kwargs={"max_retries": 0, "timeout": 30.0}, **kw,
        )
        made.append(m)
        return m

    yield make
    for m in made:
        await m.client.close()


def tool_texts(body: dict[str, Any]) -> list[str]:
    """The tool results one request sent to the provider, in order."""
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in body["messages"] if m["role"] == "tool"]


def harness(**kw: Any) -> Harness:
    return Harness(HarnessConfig(**kw), load_entry_points=False)


# ------------------------------------------------------------------ real tools


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"3 products for {q}: red mug, blue mug, green mug"


async def stock(sku: str) -> str:
    """Stock level of a product.

    Args:
        sku (str): The product.
    """
    return f"sku {sku}: 4 in stock"


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order of a user.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    return f"order {order_id} of {user_id}: 1 mug, paid"


async def submit(answer: str) -> str:
    """Deliver the final answer to the user.

    Args:
        answer (str): The answer.
    """
    return "delivered"


REFUNDED: list[str] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): How much.
    """
    REFUNDED.append(order_id)
    return f"refunded {amount} on {order_id}"


def page(url: str, words: int = 1500) -> str:
    """A long page whose every word is new (letters only: never noise)."""
    table = str.maketrans("0123456789", "ghijklmnop")
    body = " ".join("w" + hashlib.sha256(f"{url}{i}".encode()).hexdigest()[:6].translate(table)
                    for i in range(words))
    return f"Document {url}. {body}"


async def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return page(url)


# ============================================ 1. the deadline around judging


async def test_a_slow_async_ask_when_does_not_hold_the_run_past_its_deadline(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """A refund policy that asks a (slow) risk service whether a human must
    approve: the run must still end near its deadline, without the refund."""
    REFUNDED.clear()

    async def risk_service(args: dict[str, Any]) -> str | None:
        await asyncio.sleep(2.0)  # a risk service that hangs
        return None

    h = harness(tools={"refund": ToolPolicy(role="mutation", ask_when=risk_service)}, deadline_s=0.5)
    agent = make_agent(make_model(server), [refund], middlewares=h.middlewares())
    server.plan(Reply(tool_calls=[("refund", {"order_id": "A-1", "amount": 10})]), Reply(text="Refunded A-1."))
    started = time.monotonic()
    _, final, report = await drive(h, agent, U42)
    took = time.monotonic() - started

    assert REFUNDED == []  # a call judged past the deadline is not made
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert (final.get_text_content() or "").startswith(FALLBACK_START)
    assert took < 1.2, f"a 0.5 s deadline ended after {took:.2f} s"


# ================================ 2. the reason a constrained run ends with


@pytest.mark.parametrize("constrained_by", ["wrap_up", "finish_required"])
async def test_a_productive_run_that_ignores_a_constraint_is_not_called_stalled(
    server: FakeOpenAI, make_model: Any, constrained_by: str,
) -> None:
    """Every round brings new products; the model (an OpenAI-compatible
    server that ignores ``tool_choice``, as some self-hosted ones do) calls
    one more search after being narrowed. It is stopped: fine. But not for
    a lack of progress it never had."""
    tools = {"search": ToolPolicy(role="retrieval")}
    if constrained_by == "wrap_up":
        h = harness(tools=tools, deadline_s=3.0, wrap_up_s=2.5)
        agent = make_agent(make_model(server), [search], middlewares=h.middlewares())
        # the first answer is slow: the second call is inside the wrap-up window
        server.plan(Reply(tool_calls=[("search", {"q": "red mug"})], delay_s=0.7),
                    Reply(tool_calls=[("search", {"q": "blue teapot"})]), Reply(text="The red mug."))
    else:
        h = harness(tools={**tools, "submit": ToolPolicy(role="finish")})
        agent = make_agent(make_model(server), [search, submit], middlewares=h.middlewares())
        server.plan(Reply(tool_calls=[("search", {"q": "red mug"})]), Reply(text="The red mug."),
                    Reply(tool_calls=[("search", {"q": "blue teapot"})]), Reply(text="The red mug."))
    _, final, report = await drive(h, agent, U42)
    text = final.get_text_content() or ""

    # the constraint was really given and really ignored (the guard works)
    assert any(b.get("tool_choice") not in (None, "auto") for b in server.requests)
    assert report.terminal_state is TerminalState.INCOMPLETE
    # ... but the run was making progress: that is not why it ended
    assert report.reason not in ("stalled", "cycling"), report.reason
    assert "no progress was being made" not in text, text


# ======================================= 3. AgentScope's own iteration cap


# ======================================================= 4. sub-agents


def researcher_tool(child: Any) -> Any:
    async def ask_researcher(task: str) -> str:
        """Ask the research sub-agent.

        Args:
            task (str): What to research.
        """
        msg = await child.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    return ask_researcher


@pytest.mark.parametrize("shared", [True, False], ids=["same_harness", "own_harness"])
async def test_a_stopped_sub_agents_terminal_state_is_in_the_leads_tool_result_metadata(
    server: FakeOpenAI, make_model: Any, shared: bool,
) -> None:
    # the sub-agent is stopped at max_model_calls: the lead's own (run-wide) or its own Harness's
    lead_h = harness(tools={"search": ToolPolicy(role="retrieval")}, max_model_calls=3 if shared else None)
    child_h = lead_h if shared else harness(tools={"search": ToolPolicy(role="retrieval")}, max_model_calls=1)
    child = make_agent(make_model(server, model="sub"), [search], middlewares=child_h.middlewares(), name="researcher")
    lead = make_agent(make_model(server, model="lead"), [researcher_tool(child)], middlewares=lead_h.middlewares(),
                      name="lead")
    server.plan(Reply(tool_calls=[("ask_researcher", {"task": "mugs"})]),
                Reply(tool_calls=[("search", {"q": "mug"})]),
                Reply(tool_calls=[("search", {"q": "teapot"})]), Reply(text="The red mug."))
    _, _, report = await drive(lead_h, lead, U42)
    assert [c.terminal_state for c in report.children] == [TerminalState.INCOMPLETE]  # holds today
    metas = [b.metadata for m in lead.state.context if not isinstance(m.content, str)
             for b in m.content if isinstance(b, ToolResultBlock) and b.name == "ask_researcher"]
    assert metas, "the lead has no result for its sub-agent call"
    assert "incomplete" in json.dumps(metas[0], default=str), metas[0]


# ================================================== 5. regression guards


@pytest.mark.parametrize("kind", ["same_call", "alternated", "denied"])
async def test_ladders_stop_a_looping_model_through_the_real_client(
    server: FakeOpenAI, make_model: Any, kind: str,
) -> None:
    """README: the same call forever ends in 6 model calls, two tools
    alternated for nothing new in 7, an ignored ``permission_denied`` in 3-4;
    streamed, split argument deltas, a model that ignores ``tool_choice``."""
    h = harness(tools={"search": ToolPolicy(role="retrieval"), "stock": ToolPolicy(role="lookup"),
                       "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    agent = make_agent(make_model(server), [search, stock, lookup_order], middlewares=h.middlewares())
    if kind == "same_call":
        script, most, reason = [[("search", {"q": "mug"})]] * 40, 6, "stalled"
    elif kind == "alternated":
        script = [[("search", {"q": "mug"})] if i % 2 == 0 else [("stock", {"sku": "m1"})] for i in range(40)]
        most, reason = 8, "cycling"
    else:  # someone else's orders, new ids each time
        script = [[("lookup_order", {"order_id": f"A-{i}", "user_id": "u-7"})] for i in range(40)]
        most, reason = 4, "refused:permission_denied"
    server.plan(*[Reply(tool_calls=calls) for calls in script])
    _, final, report = await drive(h, agent, U42)
    assert len(server.requests) <= most and server.runaway == 0
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, reason)
    assert (final.get_text_content() or "").startswith(FALLBACK_START)
    if kind == "denied":
        assert report.tool_calls == {}


async def test_a_reply_after_one_cut_at_the_deadline_gets_its_own_time_and_completes(
    server: FakeOpenAI, make_model: Any,
) -> None:
    async def crawl(url: str) -> str:
        """Crawl a site.

        Args:
            url (str): The site.
        """
        if url == "slow":
            await asyncio.sleep(1.5)
        return f"page {url}: the red mug is 12 EUR"

    h = harness(tools={"crawl": ToolPolicy(role="retrieval")}, deadline_s=0.5)
    agent = make_agent(make_model(server), [crawl], middlewares=h.middlewares())
    server.plan(Reply(tool_calls=[("crawl", {"url": "slow"})]))
    started = time.monotonic()
    _, final, report = await drive(h, agent, U42)
    assert time.monotonic() - started < 1.0
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    server.plan(Reply(tool_calls=[("crawl", {"url": "fast"})]), Reply(text="The red mug is 12 EUR."))
    _, final, report = await drive(h, agent, U42)
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")
    assert final.get_text_content() == "The red mug is 12 EUR."
    assert report.tool_calls == {"crawl": 1}


async def test_two_concurrent_replies_on_one_harness_end_each_their_own_way(
    server: FakeOpenAI, make_model: Any,
) -> None:
    h = harness(tools={"search": ToolPolicy(role="retrieval")}, deadline_s=0.6)
    model = make_model(server)  # one model object shared, as an app does
    slow = make_agent(model, [search], middlewares=h.middlewares(), name="slow")
    fast = make_agent(model, [search], middlewares=h.middlewares(), name="fast")
    server.plan(Reply(text="too late", delay_s=1.5), Reply(tool_calls=[("search", {"q": "mug"})]),
                Reply(text="The red mug."))

    async def one(agent: Any, delay: float) -> Any:
        await asyncio.sleep(delay)
        return await drive(h, agent, U42)

    (_, f_slow, r_slow), (_, f_fast, r_fast) = await asyncio.gather(one(slow, 0), one(fast, 0.05))
    assert (r_slow.terminal_state, r_slow.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "too late" not in (f_slow.get_text_content() or "")
    assert (r_fast.terminal_state, r_fast.reason) == (TerminalState.COMPLETED, "answered")
    assert f_fast.get_text_content() == "The red mug." and r_fast.model_calls == 2 and r_slow.model_calls == 1


async def test_what_the_model_is_told_of_truncated_and_pruned_results(
    server: FakeOpenAI, make_model: Any,
) -> None:
    h = harness(tools={"fetch": ToolPolicy(role="retrieval")}, result_max_tokens=1000, prune_over_tokens=3000)
    agent = make_agent(make_model(server), [fetch], middlewares=h.middlewares())
    server.plan(*[Reply(tool_calls=[("fetch", {"url": f"u{i}"})]) for i in range(5)],
                Reply(tool_calls=[("fetch", {"url": "u0"})]), Reply(text="Done reading."))
    _, final, report = await drive(h, agent, U42)
    assert (report.terminal_state, report.tool_calls) == (TerminalState.COMPLETED, {"fetch": 6})

    first = tool_texts(server.requests[1])[0]
    marker = re.search(r"\[\.\.\. (\d+) characters omitted; the full result is kept as ref (\S+) \.\.\.\]", first)
    assert marker is not None
    full = page("u0")
    assert int(marker.group(1)) == len(full) - 4000  # what it says it left out, it left out
    assert full[:2000] in first and full[-1000:] in first

    last = tool_texts(server.requests[-1])
    assert last[0].startswith("[pruned:") and marker.group(2) in last[0]  # the ref it was told before
    assert all(len(t) < 4600 for t in last)  # nothing read past its cap
    assert "characters omitted" in last[-1]  # the pruned page, fetched again, was run and read
