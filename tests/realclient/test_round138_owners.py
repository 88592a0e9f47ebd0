"""Round 138 c (scenarios): DESIGN §4.1 "one owner per guarantee" / README
"How it works". Each test goes around a guarantee's named owner by a route a
user reaches with public AgentScope and harness names only. Fixed: a tool's own
permission refusal is shaped before the model reads it; arguments a middleware before
the harness changed are refused (the tool receives AgentScope's parse); the toolkit's
own meta tools are not reported uninstrumented. Written down as limits (strict
xfails): a tool that dispatches another through `Toolkit.call_tool`, and an MCP server
whose tool listing hangs."""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.credential import OpenAICredential
from agentscope.mcp import HttpMCPConfig, MCPClient
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.middleware import MiddlewareBase
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk, ToolGroup, Toolkit
from aiohttp import web
from pydantic import SecretStr
from scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text, tool
from server import Reply

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

pytestmark = pytest.mark.asyncio

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(f"cancel {order_id} {user_id}")
    return f"order {order_id} cancelled"


IDENTITY = {"cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})}


# --------------------------------------------------------------------------
# 1. what the model reads of a tool's output: a tool's own permission refusal
# --------------------------------------------------------------------------

class Deploy(ToolBase):
    """A tool whose own permission check refuses, quoting its service key
    (AgentScope's public way for a tool to refuse: ``check_permissions``)."""

    name = "deploy"
    description = "Deploy the service."
    input_schema = {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}
    is_concurrency_safe = True
    is_read_only = False

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        return PermissionDecision(behavior=PermissionBehavior.DENY,
                                  message=f"deploy refused: service key {KEY} has no write scope")

    async def call(self, env: str) -> ToolChunk:
        RAN.append(env)
        return ToolChunk(content=[TextBlock(text="deployed")])


async def test_a_tools_own_permission_refusal_reaches_the_model_unredacted(server: Any) -> None:
    """Promise (DESIGN §4.1, README "How it works" / Security): what the model
    reads of a tool's output is shaped by ``post_tool_call`` "for executed
    tools, and the same shaping for results that enter otherwise (...
    AgentScope's own error results)"; secrets "are redacted from tool results,
    streams, ...".
    Attack: a tool's own ``check_permissions`` (AgentScope's engine) DENYs with
    a message quoting a provider key; AgentScope writes it as the DENIED result.
    Happened: the user's stream shows it redacted, but the provider request (what
    the model reads) and the agent's stored context carry the key verbatim: the
    harness returns the engine's decision untouched (``_judged``: ``return
    decision``) and nothing shapes it before the model call."""
    server.plan(Reply(tool_calls=[("deploy", {"env": "prod"})]), Reply(text="Deploy was refused."))
    model = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
                            model="gpt-4o-mini", stream=True, max_retries=0,
                            client_kwargs={"max_retries": 0, "timeout": 20})
    harness = Harness(HarnessConfig(), load_entry_points=False)
    agent = Agent(name="ops", system_prompt="You deploy.", model=model,
                  toolkit=harness.instrument(Toolkit(tools=[Deploy()])), middlewares=harness.middlewares(),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    events, _ = await run(agent)
    assert KEY not in json.dumps([getattr(e, "delta", "") for e in events])  # the stream: redacted (holds)
    sent = json.dumps(server.requests[-1]["messages"])
    assert "deploy refused" in sent
    assert KEY not in sent, "the model read the tool's secret"
    assert KEY not in agent.state.model_dump_json(), "the stored context keeps the tool's secret"


# --------------------------------------------------------------------------
# 2. a call is judged on exactly what the tool receives: an outer middleware
# --------------------------------------------------------------------------

class CanonicalIds(MiddlewareBase):
    """An application's own permission middleware, placed first as the README
    says. It checks ids case-insensitively and hands the canonical copy on to
    the next permission check; AgentScope documents that the chain works on
    copies: "changes to these copies do not alter the eventual tool invocation".
    ``also_call`` (round 139 a): it keeps the call's copy consistent with it, or
    blanks the raw text it no longer vouches for."""

    def __init__(self, also_call: str = "") -> None:
        super().__init__()
        self.also_call = also_call

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        canonical = {k: v.strip().lower() if isinstance(v, str) else v for k, v in input_kwargs["tool_input"].items()}
        passed = {**input_kwargs, "tool_input": canonical}
        if self.also_call:
            text = json.dumps(canonical) if self.also_call == "consistent" else "[redacted]"
            passed["tool_call"] = input_kwargs["tool_call"].model_copy(update={"input": text})
        return await next_handler(**passed)


@pytest.mark.parametrize("also_call", ["", "consistent", "redacted"],
                         ids=["input_only", "input_and_call", "call_text_unreadable"])
async def test_an_outer_permission_middleware_decides_what_the_harness_judges(also_call: str) -> None:
    """Promise (DESIGN §4.1, README "How it works" and "Security: Identity"):
    "a tool call is judged on exactly what the tool receives ... on AgentScope's
    own parsed and schema-validated input"; "Values compare exactly"; README
    "Combining": with `[*mine, *harness.middlewares()]` "The harness then judges
    exactly what AgentScope is about to execute".
    Attack: the application's permission middleware (first in the list) passes a
    canonicalised copy of ``tool_input`` downstream (and of the call itself); the
    model writes ``user_id="U-42 "`` (another account for a backend with
    case-sensitive ids).
    Happened: the harness judged the copy ("u-42", the signed-in user) and
    admitted it; the tool ran with "U-42 ", which the harness itself calls a
    different user. Round 139 a: comparing with the call's copy, a middleware
    that changed both went past the check."""
    harness = Harness(HarnessConfig(tools=IDENTITY), load_entry_points=False)
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1", "user_id": "U-42 "})), text("Cancelled.")])
    agent = make_agent(model, [cancel_order], [CanonicalIds(also_call), *harness.middlewares()])
    with harness.acting_for(ALICE):
        await run(agent)
    report = harness.last_report(agent)
    assert RAN == [], f"the tool ran for an identity the harness never judged: {RAN}"
    assert [d.code for d in report.decisions if d.hook == "arguments_check"] == ["policy_error"]


# --------------------------------------------------------------------------
# 3. every call is gated: a tool that dispatches through the toolkit
# --------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="README limit: a tool calling Toolkit.call_tool itself runs that call ungated")
async def test_a_call_dispatched_through_the_toolkit_is_never_judged() -> None:
    """Promise (README "Never acts for the wrong caller", "Every call is gated";
    DESIGN §4.1: "chosen so that no code path can go around it").
    Attack: the application has a plan-step tool that runs another tool of the
    agent's toolkit through AgentScope's public ``Toolkit.call_tool`` (a common
    dispatcher shape); the model asks it to cancel another user's order.
    Happened: ``cancel_order`` ran for u-77 while u-42 is signed in, and the
    report shows no such call and no refusal. The instrumented tool's own
    middleware (``ErrorClassMiddleware``) saw the call and let it through. README
    documents the model-side twin as a Limit ("a model's ``__call__`` made outside
    the reasoning loop ... is not guarded"), but nothing for tools."""
    harness = Harness(HarnessConfig(tools=IDENTITY), load_entry_points=False)
    holder: dict[str, Agent] = {}

    async def run_step(tool_name: str, args_json: str) -> str:
        """Run one step of the plan with one of the agent's tools.

        Args:
            tool_name (str): The tool.
            args_json (str): Its arguments, as JSON.
        """
        agent = holder["agent"]
        last = None
        async for chunk in agent.toolkit.call_tool(ToolCallBlock(id="step-1", name=tool_name, input=args_json),
                                                   agent.state):
            last = chunk
        return str(getattr(last, "content", ""))

    model = ScriptedModel([calls(("run_step", {"tool_name": "cancel_order",
                                               "args_json": json.dumps({"order_id": "A-9", "user_id": "u-77"})})),
                           text("Done.")])
    toolkit = harness.instrument(Toolkit(tools=[tool(cancel_order), tool(run_step)]))
    agent = holder["agent"] = make_agent(model, toolkit, harness.middlewares())
    with harness.acting_for(ALICE):
        await run(agent)
    report = harness.last_report(agent)
    assert RAN == [], f"{RAN}; report tool_calls={report.tool_calls} refusals={report.refusals}"


# --------------------------------------------------------------------------
# 4. the deadline: AgentScope's listing of an MCP server's tools
# --------------------------------------------------------------------------

async def _hung_mcp() -> tuple[web.AppRunner, str, asyncio.Event]:
    """An MCP endpoint that accepts the connection and never answers."""
    stop = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        await stop.wait()
        return web.Response(text="")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/mcp", stop


async def test_a_hung_mcp_server_is_cut_with_the_reply_at_its_deadline() -> None:
    """Promise (README intro: "deadlines that bound every model call and tool
    call"; Security: "The deadline bounds each `reply` call"; DESIGN §4.1 "a
    tool call's time" owned by ``HarnessToolAdapter.on_acting``).
    Attack: the toolkit holds a real AgentScope ``MCPClient`` whose server stops
    answering (its own HTTP timeout 5 s; AgentScope's default is 30 s);
    ``deadline_s=1``.
    Happened: the reply took ~5 s (5x its deadline) before the harness's fallback:
    AgentScope lists the server's tools before every model call and again before
    every tool call's permission check, outside every harness bound (the harness
    cut only the model call and ``on_acting``). Since session 42 the reply layer
    cuts a step held 0.2 s past the deadline outside the harness's layers."""
    runner, url, stop = await _hung_mcp()
    try:
        harness = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
        docs = MCPClient(name="docs", is_stateful=False, mcp_config=HttpMCPConfig(url=url, timeout=5.0))
        toolkit = harness.instrument(Toolkit(tools=[tool(search)], mcps=[docs]))
        model = ScriptedModel([calls(("search", {"q": "mugs"})), text("Found mugs.")])
        agent = make_agent(model, toolkit, harness.middlewares())
        started = time.monotonic()
        await run(agent)
        wall = time.monotonic() - started
        report = harness.last_report(agent)
        assert report.reason == "deadline"
        assert wall < 1.0 + 0.6, f"a 1 s deadline held the user {wall:.1f} s"
    finally:
        stop.set()
        await runner.cleanup()


# --------------------------------------------------------------------------
# 5. "the harness logs each tool it meets uninstrumented": AgentScope's meta tool
# --------------------------------------------------------------------------

async def test_instrumented_toolkit_still_warns_its_meta_tool_is_not_instrumented(caplog: Any) -> None:
    """Promise (README "Use it"): "A tool added to the toolkit later needs
    `instrument(toolkit)` again; the harness logs each tool it meets
    uninstrumented" - a warning the user can act on.
    Attack: a toolkit with a tool group, instrumented; the model activates the
    group with AgentScope's own meta tool ``reset_tools``.
    Happened: WARNING "tool 'reset_tools' was not instrumented: call
    harness.instrument(toolkit) after adding it" - but instrument cannot reach
    the toolkit's built-in meta tool (nor the skill viewer ``Skill``): the warning
    is false and cannot be silenced. It should skip AgentScope's own built-ins as
    it skips ``GenerateStructuredOutput``/``CompressContext``."""
    caplog.set_level(logging.WARNING, logger="agentscope_harness")
    harness = Harness(HarnessConfig(), load_entry_points=False)
    extra = ToolGroup(name="extra", description="More tools.", instructions=None, tools=[],
                      skills_or_loaders=[], mcps=[])
    toolkit = harness.instrument(Toolkit(tools=[tool(search)], tool_groups=[extra]))
    harness.instrument(toolkit)  # again, as the warning says
    model = ScriptedModel([calls(("reset_tools", {"extra": True})), text("Ready.")])
    await run(make_agent(model, toolkit, harness.middlewares()))
    said = [r.getMessage() for r in caplog.records if "reset_tools" in r.getMessage()]
    assert said == []
