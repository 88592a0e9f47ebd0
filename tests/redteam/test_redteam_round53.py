"""Red team, round 53: configuration a user writes, from the outside.

1. a key given twice in a YAML or JSON policy file (the last silently won:
   a tool's ``identity_args`` and ``max_tool_calls`` were gone, and the tool
   ran for another user);
2. a policy or limit naming a tool the toolkit lacks, by a typo: it never
   applied (``instrument`` logs it, naming the tool it likely meant);
3. store settings that switch a limit off or fail every call (a Redis TTL
   of 0 expired the day's spend as it was written);
4. a blank secret value (a traceback at ``Harness()``; a blank ``secret_env``
   variable crashed naming ``secret_values``); a ``.py`` policy calling
   ``exit()``.

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, Ledger, Principal, RateLimit, ToolPolicy
from agentscope_harness.cli import CliError, load_config, main
from agentscope_harness.stores import SQLiteStore

U42 = Principal(user_id="u-42")
RAN: list[str] = []


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(user_id)
    return f"order {order_id}"


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"results for {q}"


YAML = """\
tools:
  lookup_order:
    role: lookup
    identity_args: {user_id: user_id}
  lookup_order:
    role: lookup
max_tool_calls: 2
"""


@pytest.mark.parametrize(("name", "content"), [
    ("dup.yaml", YAML),
    ("dup.json", '{"tools": {"lookup_order": {"identity_args": {"user_id": "user_id"}}, '
                 '"lookup_order": {"role": "lookup"}}}'),
    ("cap.json", '{"max_tool_calls": 2, "max_tool_calls": null}'),
])
def test_a_key_given_twice_in_a_policy_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str,
) -> None:
    """README 'check-config': "invalid values fail ... with the field named".
    The second ``lookup_order`` replaced the first: ``check-config`` said OK,
    and the loaded policy bound no identity."""
    policy = tmp_path / name
    policy.write_text(content)
    with pytest.raises(CliError, match="appears twice"):
        load_config(policy)
    assert main(["check-config", str(policy)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "appears twice" in err and ("lookup_order" in err or "max_tool_calls" in err)
    assert "Traceback" not in err


async def test_the_file_as_written_once_binds_the_identity(tmp_path: Path) -> None:
    """The same policy without the repeat binds ``user_id``: the tool does
    not run for another user (the guarantee the repeat had dropped)."""
    RAN.clear()
    policy = tmp_path / "once.yaml"
    policy.write_text(YAML.replace("  lookup_order:\n    role: lookup\nmax", "max"))
    h = Harness(load_config(policy), load_entry_points=False)
    model = ScriptedModel([calls(("lookup_order", {"order_id": "B-1", "user_id": "u-77"})), text("done")])
    agent = make_agent(model, [lookup_order], h.middlewares())
    with h.acting_for(U42):
        await run(agent, "order B-1")
    assert RAN == [] and h.last_report(agent).refusals.get("permission_denied") == 1


@pytest.mark.parametrize(("config", "field", "near"), [
    (HarnessConfig(tools={"serach": ToolPolicy(role="retrieval", ledgers=["web"])}, ledgers={"web": Ledger(cap=1)}),
     "tools.serach", "search"),
    (HarnessConfig(tools={"lookup-order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})}),
     "tools.lookup-order", "lookup_order"),
    (HarnessConfig(tools={"search": ToolPolicy(role="retrieval")},
                   rate_limits=[RateLimit(scope="tool", tool="serach", calls_per_min=1)]),
     "rate_limits[0].tool", "search"),
])
def test_a_policy_for_a_misspelt_tool_is_named_at_instrument(
    config: HarnessConfig, field: str, near: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """A policy keyed ``serach`` never applied to ``search``: it ran four
    times past a ledger cap of 1; ``lookup-order``'s identity binding never
    applied to ``lookup_order``. ``instrument`` names each, and the tool it
    likely meant (round 54: a warning, not an error: one Harness may serve
    agents whose toolkits differ, ``get_order`` beside ``get_orders``)."""
    h = Harness(config, load_entry_points=False)
    agent = make_agent(ScriptedModel([text("hi")]), [search, lookup_order], h.middlewares())
    with caplog.at_level(logging.WARNING, logger="agentscope_harness"):
        h.instrument(agent.toolkit)
    assert field in caplog.text and f"did you mean {near!r}" in caplog.text


def test_one_harness_for_two_agents_whose_tools_differ_instruments_both(caplog: pytest.LogCaptureFixture) -> None:
    """Round 54: the customer agent's ``get_order`` beside the staff agent's
    ``get_orders``, one Harness: instrumenting the staff toolkit raised."""
    async def get_orders(status: str) -> str:
        """List orders.

        Args:
            status (str): Their status.
        """
        return "none"

    h = Harness(HarnessConfig(tools={"get_order": ToolPolicy(role="lookup")}), load_entry_points=False)
    staff = make_agent(ScriptedModel([text("hi")]), [get_orders], h.middlewares())
    with caplog.at_level(logging.WARNING, logger="agentscope_harness"):
        h.instrument(staff.toolkit)
    assert "tools.get_order" in caplog.text


@pytest.mark.parametrize("kw", [{"ttl_days": 0}, {"ttl_days": -1}, {"timeout_s": math.nan},
                                {"timeout_s": 0}, {"state_ttl_s": 0}])
def test_redis_store_settings_that_switch_a_limit_off_are_refused(kw: dict[str, Any]) -> None:
    """``RedisStore(url, ttl_days=0)``: the day's spend expired as it was
    written, ten runs spent $0.05 against a $0.02 quota. A timeout of 0 or
    NaN failed every run ``dependency_down``."""
    pytest.importorskip("redis")
    from agentscope_harness.stores import RedisStore

    with pytest.raises(ValueError, match=next(iter(kw))):
        RedisStore("redis://127.0.0.1:6399/8", **kw)


@pytest.mark.parametrize("kw", [{"timeout_s": math.nan}, {"timeout_s": -1}, {"sweep_every_s": 0}])
def test_sqlite_store_settings_that_fail_every_call_are_refused(tmp_path: Path, kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kw))):
        SQLiteStore(str(tmp_path / "s.db"), **kw)


def test_a_blank_secret_value_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="secret_values") as caught:
        HarnessConfig(secret_values=["        "])
    assert "blank" in str(caught.value)


async def test_a_blank_secret_env_variable_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """README: an unset or empty variable holds no secret in this process
    and is skipped; a blank one crashed ``Harness()`` naming ``secret_values``."""
    monkeypatch.setenv("MY_KEY", " " * 40)
    h = Harness(HarnessConfig(secret_env=["MY_KEY"]), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("a  b   c")]), [], h.middlewares())
    _, final = await run(agent, "hi")
    assert final.get_text_content() == "a  b   c"


def test_a_python_policy_that_exits_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "exits.py"
    policy.write_text("import sys\nsys.exit(3)\n")
    assert main(["check-config", str(policy)]) == 2
    assert "failed to run: SystemExit" in capsys.readouterr().err


def test_a_policy_file_without_repeats_still_loads(tmp_path: Path) -> None:
    policy = tmp_path / "ok.json"
    policy.write_text(json.dumps({"tools": {"a": {"role": "lookup"}, "b": {"role": "lookup"}}, "max_tool_calls": 3}))
    assert load_config(policy).max_tool_calls == 3
