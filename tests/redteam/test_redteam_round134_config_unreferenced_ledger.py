"""Round 134 (a): a ``Ledger`` no tool policy names constructs fine and never binds.

README, Configuration: "invalid values fail at construction with the field named
... A config that would silently disable a limit is invalid too" (its examples:
``units=0`` on a tool that names ledgers, "it would never charge the ledgers";
``require_finish_tool=True`` without a finish tool). README table: ``ledgers``:
"per-run unit counters" with a hard cap.

Attack: ``ledgers={"web": Ledger(cap=1)}`` with the search tool's policy naming no
ledger (the author forgot ``ledgers=["web"]`` on it, or listed it under another
tool only in a later edit). Ledgers are charged only through
``ToolPolicy.ledgers``: nothing can ever charge ``web``, so its cap can never bind.
The config constructs, ``Harness(...)`` builds, ``check-config`` prints it as valid,
and a real run calls search three times past a cap of 1.

Real ``Agent``, real tool in a real instrumented ``Toolkit``, scripted model."""

from __future__ import annotations

import subprocess
import sys

from agentscope.tool import Toolkit
from pydantic import ValidationError

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

SEARCHED: list[str] = []


async def search(q: str) -> str:
    """Search the web.

    Args:
        q (str): The query.
    """
    SEARCHED.append(q)
    return f"page about {q}"


def _config() -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval")},  # names no ledger
        ledgers={"web": Ledger(cap=1)},
    )


async def test_a_ledger_no_tool_charges_is_refused_or_binds() -> None:
    SEARCHED.clear()
    try:
        config = _config()
        h = Harness(config, load_entry_points=False, environ={})
    except (ValidationError, HarnessConfigError) as exc:  # what the standard asks for
        assert "web" in str(exc)
        return
    model = ScriptedModel([*(calls(("search", {"q": q})) for q in ("a", "b", "c")), text("Done.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    await run(agent, "research it")
    report = h.last_report(agent)
    # the "web" ledger's cap is 1; a limit that binds lets one search through
    assert len(SEARCHED) <= 1, (
        f"config with ledger 'web' (cap 1) built fine; search ran {len(SEARCHED)} times "
        f"({SEARCHED}), ledger_used={report.model_dump().get('ledger_used')}, "
        f"refusals={[d.code for d in report.decisions if d.action == 'refuse']}"
    )


def test_check_config_reports_the_unreferenced_ledger(tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("tools:\n  search:\n    role: retrieval\nledgers:\n  web:\n    cap: 1\n")
    done = subprocess.run([sys.executable, "-m", "agentscope_harness", "check-config", str(policy)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "web" in (done.stdout + done.stderr), (
        f"check-config exit {done.returncode}: {done.stdout[-400:]} {done.stderr[-400:]}"
    )
