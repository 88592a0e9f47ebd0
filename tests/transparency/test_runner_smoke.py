"""The transparency runner's injection really puts the harness into every
``Agent`` of a foreign test-suite, in the documented order, and its
comparison reports exactly the tests whose outcome changed.

A tiny synthetic suite (written to ``tmp_path``, run in child pytest
processes exactly as ``run_agentscope_suite.py`` runs AgentScope's tests)
stands in for AgentScope's: one test any agent passes, two that only a bare
agent passes (they pin the system prompt and the tool message the model
gets), one that records the middleware order. No network, no AgentScope
checkout needed. The first synthetic test also pins that the harness leaves
a tool result's metadata as the tool wrote it (it used to stamp
``{"harness": {"run_id": ...}}`` on every result).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import run_agentscope_suite as suite

from agentscope_harness import HarnessConfig

TESTS_DIR = Path(__file__).resolve().parents[1]  # tests/, for scripted.py

SYNTHETIC = '''
import json, os

from agentscope.middleware import MiddlewareBase

from scripted import ScriptedModel, calls, make_agent, run, text


class Own(MiddlewareBase):
    """The application's own middleware (implements on_reply only)."""

    async def on_reply(self, agent, input_kwargs, next_handler):
        async for item in next_handler(**input_kwargs):
            yield item


def _agent(script, ran):
    async def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id (str): The order.
        """
        ran.append(order_id)
        return f"order {order_id}: shipped"

    model = ScriptedModel(script)
    return make_agent(model, [lookup], middlewares=[Own()]), model


async def test_same_tools_text_and_model_calls():
    ran = []
    agent, model = _agent([calls(("lookup", {"order_id": "A1"})), text("It shipped.")], ran)
    events, final = await run(agent, "where is A1?")
    assert ran == ["A1"]
    assert final.get_text_content() == "It shipped."
    assert len(model.calls) == 2
    results = [b for m in agent.state.context if not isinstance(m.content, str)
               for b in m.content if b.type == "tool_result"]
    assert [(r.state, r.metadata) for r in results] == [("success", {})]


async def test_tool_result_reaches_the_model_as_written():
    agent, model = _agent([calls(("lookup", {"order_id": "B2"})), text("ok")], [])
    await run(agent)
    told = [m["content"] for m in model.calls[1]["formatted"] if m["role"] == "tool"]
    assert told == ["order B2: shipped"], "tool message " + repr(told)[:80]


async def test_system_prompt_is_untouched():
    agent, model = _agent([text("hello")], [])
    await run(agent)
    content = model.calls[0]["formatted"][0]["content"]
    prompt = content if isinstance(content, str) else "".join(b["text"] for b in content)
    base = "You are a helpful shop assistant."
    assert prompt == base, "prompt gained " + repr(prompt[len(base):])[:60]


async def test_record_middleware_order():
    agent, _ = _agent([text("hello")], [])
    with open(os.environ["SMOKE_ORDER_FILE"], "w") as fh:
        json.dump([type(m).__name__ for m in agent._reply_middlewares], fh)
'''

SAME = "synthetic_test.py::test_same_tools_text_and_model_calls"
PROMPT = "synthetic_test.py::test_system_prompt_is_untouched"
FENCED = "synthetic_test.py::test_tool_result_reaches_the_model_as_written"
ORDER = "synthetic_test.py::test_record_middleware_order"


@pytest.fixture()
def synthetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "synthetic_test.py").write_text(SYNTHETIC)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
    )
    return tmp_path


def _run(folder: Path, inject: str | None, order_file: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SMOKE_ORDER_FILE", str(order_file))
    return suite.run_pytest(
        folder, ["synthetic_test.py", "-o", "asyncio_mode=auto"],
        folder / f"{inject or 'bare'}.json", inject, timeout=120,
    )


def test_injection_order_and_comparison(synthetic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order_bare, order_app = synthetic / "order-bare.json", synthetic / "order-app.json"
    bare = _run(synthetic, None, order_bare, monkeypatch)
    app_first = _run(synthetic, "app-first", order_app, monkeypatch)

    # bare: every synthetic test passes, every agent counted, none harnessed
    assert {t: bare[t]["outcome"] for t in (SAME, PROMPT, FENCED, ORDER)} == dict.fromkeys(
        (SAME, PROMPT, FENCED, ORDER), "passed",
    )
    assert bare[SAME]["agents"] == 1 and bare[SAME]["harnessed"] == 0

    # harnessed: same tools, same text, same model calls; the prompt gained the rules
    assert app_first[SAME]["outcome"] == "passed"
    assert app_first[SAME]["harnessed"] == 1
    assert app_first[SAME]["terminal"] == ["completed:answered"]
    assert app_first[PROMPT]["outcome"] == "failed"
    assert "Harness rules" in app_first[PROMPT]["message"]
    assert app_first[FENCED]["outcome"] == "failed"
    assert "<tool-output nonce=" in app_first[FENCED]["message"]

    # the order: the agent's own middleware stays outermost in app-first
    assert json.loads(order_bare.read_text()) == ["Own"]
    assert json.loads(order_app.read_text()) == ["Own", "HarnessAgentAdapter"]

    result = suite.compare(bare, app_first)
    assert [r["test"] for r in result["differences"]] == [PROMPT, FENCED]
    assert result["pass_bare"] == 4 and result["pass_harnessed"] == 2
    assert result["fails_differently"] == []


def test_explain_knobs_neutralise_what_they_name(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--explain``'s knobs build configs the harness accepts, and the
    prompt-rules and fence knobs really give back the bare prompt and the
    tool's own text in a child run (harness-first here: the adapters go
    outermost)."""
    env = suite.variant(suite.KNOBS)
    built = HarnessConfig(**json.loads(env["HARNESS_SUITE_CONFIG"]))
    assert built.fence is False and "system_prompt_append" in built.disabled_hooks
    assert env["HARNESS_SUITE_HIDE_EVENTS"] == env["HARNESS_SUITE_RAW_STREAM"] == "1"
    assert suite.variant(("events",)) == {"HARNESS_SUITE_HIDE_EVENTS": "1"}

    order = synthetic / "order-harness.json"
    monkeypatch.setenv("SMOKE_ORDER_FILE", str(order))
    out = suite.run_pytest(
        synthetic, ["synthetic_test.py", "-o", "asyncio_mode=auto"],
        synthetic / "knob.json", "harness-first", timeout=120,
        knob_env=suite.variant(("prompt-rules", "fence")),
    )
    assert out[PROMPT]["outcome"] == "passed" and out[PROMPT]["harnessed"] == 1
    assert out[FENCED]["outcome"] == "passed" and out[FENCED]["harnessed"] == 1
    assert out[SAME]["outcome"] == "passed" and out[SAME]["harnessed"] == 1
    assert json.loads(order.read_text()) == ["HarnessAgentAdapter", "Own"]


def test_prepare_copy_leaves_the_source_alone(tmp_path: Path) -> None:
    """The tests folder is copied; ``utils.py`` loses only its apscheduler
    import (when that optional dependency is missing)."""
    src = tmp_path / "src"
    src.mkdir()
    original = (
        "from agentscope.app.workspace_manager import WorkspaceManagerBase\n"
        "from agentscope.message import Msg\n\n"
        "def helper():\n    return 1\n\n\n"
        "class FakeWorkspaceManager(WorkspaceManagerBase):\n    pass\n"
    )
    (src / "utils.py").write_text(original)
    work = tmp_path / "work"
    work.mkdir()
    copy = suite.prepare_copy(src, work)
    assert (src / "utils.py").read_text() == original
    copied = (copy / "utils.py").read_text()
    if importlib.util.find_spec("apscheduler") is None:
        assert "workspace_manager" not in copied and "FakeWorkspaceManager" not in copied
        assert "def helper():" in copied and "from agentscope.message import Msg" in copied
    else:
        assert copied == original
