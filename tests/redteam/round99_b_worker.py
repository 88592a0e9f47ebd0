"""Round 99 (b): one worker process of a fleet sharing one store.

Run as ``python round99_b_worker.py '<json spec>'``; prints one JSON line
(what the worker saw: reports, tools run, model calls) on stdout. Each
worker builds its own Harness, Agent(s), real tools in a real Toolkit and a
``ScriptedModel``, over one SQLite file or one Redis (db 6, a key prefix
per test)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.event import (
    ConfirmResult,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    ModelPrice,
    Principal,
    RateLimit,
    ToolPolicy,
)
from agentscope_harness.stores import RedisStore, SQLiteStore
from agentscope_harness.testing import ScriptedModel, calls, text

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in tests")
ALICE = Principal(user_id="u-42", tenant="acme")
ACTED: list[Any] = []
SPEC: dict[str, Any] = {}


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    ACTED.append(["pay_out", amount])
    _log("pay_out", amount)
    await asyncio.sleep(float(SPEC.get("pay_s", 0.0)))
    _log("pay_out_done", amount)
    return f"paid {amount}"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    ACTED.append(["lookup", q])
    _log("lookup", q)
    await asyncio.sleep(float(SPEC.get("lookup_s", 0.0)))
    return f"found {q}"


def _log(*item: Any) -> None:
    """Tools run, appended to a shared file as they run (a killed worker prints nothing)."""
    path = SPEC.get("acted_file")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps([SPEC.get("name"), *item]) + "\n")


def store() -> Any:
    s = SPEC["store"]
    if s["kind"] == "sqlite":
        return SQLiteStore(s["path"])
    return RedisStore(s["url"], prefix=s["prefix"])


def config() -> HarnessConfig:
    c = SPEC.get("config", {})
    kw: dict[str, Any] = {"store": store()}
    tools: dict[str, ToolPolicy] = {}
    if c.get("ask_over") is not None:
        over = int(c["ask_over"])
        tools["pay_out"] = ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                      ask_when=lambda a: f"over {over}" if a["amount"] > over else None)
    if tools:
        kw["tools"] = tools
    if c.get("run_limit"):
        kw["concurrency_limits"] = [ConcurrencyLimit(scope="principal", max_in_flight=c["run_limit"],
                                                     lease_s=c.get("lease_s", 300))]
    if c.get("tool_limit"):
        kw.setdefault("concurrency_limits", []).append(
            ConcurrencyLimit(scope="tool", tool=c.get("limit_tool", "lookup"), max_in_flight=c["tool_limit"],
                             lease_s=c.get("lease_s", 300)))
    if c.get("tool_rate"):
        kw["rate_limits"] = [RateLimit(scope="principal", tool=c.get("rate_tool", "lookup"),
                                       calls_per_min=c["tool_rate"])]
    if c.get("tokens_per_min"):
        kw.setdefault("rate_limits", []).append(RateLimit(scope="principal", tokens_per_min=c["tokens_per_min"],
                                                          wait_s=c.get("wait_s", 0)))
    if c.get("cost"):
        kw["cost"] = CostPolicy(**{"prices": {"scripted": ModelPrice(1.0, 1.0)}, **c["cost"]})
    if c.get("deadline_s"):
        kw["deadline_s"] = c["deadline_s"]
    return HarnessConfig(**kw)


def make_agent(harness: Harness, model: ScriptedModel, name: str = "shop",
               state: AgentState | None = None) -> Agent:
    kit = harness.instrument(Toolkit(tools=[FunctionTool(pay_out, permission=ALLOW),
                                            FunctionTool(lookup, permission=ALLOW)]))
    extra: dict[str, Any] = {} if state is None else {"state": state}
    return Agent(name=name, system_prompt="You are a helpful shop assistant.", model=model, toolkit=kit,
                 middlewares=harness.middlewares(), injection_config=InjectionConfig(inject_runtime_state=False),
                 react_config=ReActConfig(max_iters=50), **extra)


def script_of(steps: list[Any]) -> list[Any]:
    out: list[Any] = []
    for step in steps:
        if step[0] == "text":
            out.append(text(step[1], **step[2] if len(step) > 2 else {}))
        else:
            out.append(calls((step[1], step[2]), **step[3] if len(step) > 3 else {}))
    return out


def report_of(harness: Harness, agent: Agent) -> dict[str, Any] | None:
    r = harness.last_report(agent)
    if r is None:
        return None
    return {"state": r.terminal_state.value, "reason": r.reason, "spent": r.spent_usd,
            "extensions": r.extensions, "run_id": r.run_id,
            "decisions": [[d.action, d.code] for d in r.decisions]}


async def wait_for(path: str | None, timeout: float = 20.0) -> None:
    if not path:
        return
    end = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > end:
            raise TimeoutError(path)
        await asyncio.sleep(0.005)


async def drain(agent: Agent, inputs: Any) -> list[Any]:
    return [e async for e in agent.reply_stream(inputs, yield_final_msg=True)]


def save(agent: Agent, asked: RequireUserConfirmEvent | None = None) -> None:
    out = {"state": agent.state.model_dump_json()}
    if asked is not None:
        out["asked"] = asked.model_dump_json()
    Path(SPEC["state_out"]).write_text(json.dumps(out))


def load() -> tuple[AgentState, RequireUserConfirmEvent | None]:
    data = json.loads(Path(SPEC["state_in"]).read_text())
    asked = RequireUserConfirmEvent.model_validate_json(data["asked"]) if data.get("asked") else None
    return AgentState.model_validate_json(data["state"]), asked


async def main() -> dict[str, Any]:
    harness = Harness(config(), load_entry_points=False, environ={})
    mode = SPEC["mode"]
    out: dict[str, Any] = {"name": SPEC.get("name")}
    if mode == "replies":  # n concurrent replies of Alice, each on an agent of its own
        agents = [make_agent(harness, ScriptedModel(script_of(SPEC["script"])), name=f"a{i}")
                  for i in range(SPEC.get("n", 1))]
        await wait_for(SPEC.get("go"))

        async def one(agent: Agent) -> Any:
            with harness.acting_for(ALICE):
                return await drain(agent, UserMsg("user", SPEC.get("say", "research this")))

        await asyncio.gather(*(one(a) for a in agents))
        out["reports"] = [report_of(harness, a) for a in agents]
        out["model_calls"] = sum(len(a.model.calls) for a in agents)  # type: ignore[attr-defined]
    elif mode in ("park", "first"):  # one reply; its state (and question) saved
        await wait_for(SPEC.get("go"))
        state = load()[0] if SPEC.get("state_in") else None
        agent = make_agent(harness, ScriptedModel(script_of(SPEC["script"])), state=state)
        with harness.acting_for(ALICE):
            items = await drain(agent, UserMsg("user", SPEC.get("say", "pay me 80")))
        asked = next((i for i in items if isinstance(i, RequireUserConfirmEvent)), None)
        save(agent, asked)
        out["report"] = report_of(harness, agent)
        out["model_calls"] = len(agent.model.calls)  # type: ignore[attr-defined]
        if SPEC.get("done"):
            Path(SPEC["done"]).write_text("1")
        if SPEC.get("hold_s"):
            await asyncio.sleep(SPEC["hold_s"])
    elif mode == "answer":  # the human's yes to the saved question
        await wait_for(SPEC.get("go"))
        state, asked = load()
        assert asked is not None
        agent = make_agent(harness, ScriptedModel(script_of(SPEC["script"])), state=state)
        with harness.acting_for(ALICE):
            items = await drain(agent, UserConfirmResultEvent(
                reply_id=asked.reply_id,
                confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls]))
        out["report"] = report_of(harness, agent)
        out["final"] = next((i.get_text_content() for i in items if isinstance(i, Msg)), None)
        if SPEC.get("state_out"):
            save(agent)
    elif mode == "extend":
        state, _ = load()
        agent = make_agent(harness, ScriptedModel([]), state=state)
        with harness.acting_for(ALICE):
            harness.extend(agent, usd=SPEC["usd"])
        save(agent)
    elif mode == "hold":  # a run whose tool runs long (to be killed mid-run)
        agent = make_agent(harness, ScriptedModel(script_of(SPEC["script"])))
        with harness.acting_for(ALICE):
            await drain(agent, UserMsg("user", "look it up"))
        out["report"] = report_of(harness, agent)
    out["acted"] = ACTED
    return out


if __name__ == "__main__":
    SPEC.update(json.loads(sys.argv[1]))
    result = asyncio.run(main())
    print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- test side

def kinds() -> list[str]:
    return ["sqlite", "redis"] if os.environ.get("HARNESS_TEST_REDIS_URL") else ["sqlite"]


def store_spec(kind: str, tmp_path: Path) -> dict[str, Any]:
    import uuid

    if kind == "sqlite":
        return {"kind": "sqlite", "path": str(tmp_path / "fleet.db")}
    return {"kind": "redis", "url": os.environ["HARNESS_TEST_REDIS_URL"], "prefix": f"rt99b{uuid.uuid4().hex[:8]}"}


def spawn(spec: dict[str, Any]) -> Any:
    """A worker process (its own interpreter) running ``spec``."""
    import subprocess

    return subprocess.Popen([sys.executable, os.path.abspath(__file__), json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: Any, timeout: float = 30.0) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"worker failed: {err[-3000:]}"
    return dict(json.loads(line[len("RESULT "):]))


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    return result(spawn(spec))
