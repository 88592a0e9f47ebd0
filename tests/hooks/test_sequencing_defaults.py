"""sequencing.py: ``same_args`` compare the values the tools run with, the
model's arguments completed by each tool's declared defaults (the red team's
``lookup_order(order_id, region="eu")`` finding)."""

from __future__ import annotations

from typing import Any

import pytest
from hookkit import Ran, drive, harnessed, results
from scripted import calls, text, tool

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError, Prerequisite, ToolPolicy
from agentscope_harness.facts import declared_in, thawed

SAME = ["order_id", "region"]


def config() -> HarnessConfig:
    return HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup"),
            "cancel_order": ToolPolicy(
                role="mutation", requires=[Prerequisite(tool="lookup_order", same_args=SAME)],
            ),
        },
        require_finish_tool=False,
        max_enforce_retries=0,
    )


def order_tools(ran: Ran, lookup_region: Any = "eu", cancel_region: Any = "eu") -> list[Any]:
    """``lookup_order`` and ``cancel_order``, each with ``region`` defaulted
    to the value given (``REQUIRED``: no default)."""

    async def lookup_order(order_id: str, region: str = lookup_region) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            region (str): The region the order was placed in.
        """
        ran.append(("lookup_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}): 1 mug, status paid"

    async def cancel_order(order_id: str, region: str = cancel_region) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (str): The region the order was placed in.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}) cancelled"

    if lookup_region is REQUIRED:
        lookup_order.__defaults__ = None
    if cancel_region is REQUIRED:
        cancel_order.__defaults__ = None
    return [lookup_order, cancel_order]


REQUIRED = object()


def lookup(**args: Any):
    return calls(("lookup_order", args))


def cancel(**args: Any):
    return calls(("cancel_order", args))


async def test_a_region_left_to_the_lookups_default_satisfies_a_cancel_naming_it():
    ran = Ran()
    h, model, agent = harnessed(
        config(), [lookup(order_id="A-1"), cancel(order_id="A-1", region="eu"), text("cancelled")],
        order_tools(ran),
    )
    _, _, report = await drive(h, agent)
    assert ran == [("lookup_order", {"order_id": "A-1", "region": "eu"}),
                   ("cancel_order", {"order_id": "A-1", "region": "eu"})]
    assert "order A-1 (eu) cancelled" in results(model)[1]
    assert report.refusals == {}


async def test_a_cancel_leaving_the_region_to_its_default_matches_a_lookup_naming_it():
    ran = Ran()
    h, model, agent = harnessed(
        config(), [lookup(order_id="A-1", region="eu"), cancel(order_id="A-1"), text("cancelled")],
        order_tools(ran),
    )
    _, _, report = await drive(h, agent)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert report.refusals == {}


async def test_both_defaulted_compare_the_defaults_each_tool_runs_with():
    # same default on both sides: the very order and region
    ran = Ran()
    h, _, agent = harnessed(
        config(), [lookup(order_id="A-1"), cancel(order_id="A-1"), text("cancelled")], order_tools(ran),
    )
    _, _, report = await drive(h, agent)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert report.refusals == {}

    # different defaults: the lookup ran for "eu", the cancel would run for "us"
    ran = Ran()
    h, model, agent = harnessed(
        config(), [lookup(order_id="A-1"), cancel(order_id="A-1"), text("not cancelled")],
        order_tools(ran, lookup_region="eu", cancel_region="us"),
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]")
    assert 'region="us"' in msgs[1]
    assert ran.of("cancel_order") == []
    assert report.refusals == {"prerequisite_missing": 1}


async def test_a_different_explicit_region_is_still_refused():
    ran = Ran()
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1"),                       # ran for region "eu"
         cancel(order_id="A-1", region="us"),          # another order: refused
         cancel(order_id="A-1", region="eu"),          # the one looked up: runs
         text("cancelled")],
        order_tools(ran),
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]") and 'region="us"' in msgs[1]
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert report.refusals == {"prerequisite_missing": 1}

    # and the reverse: looked up explicitly for "us", a cancel defaulting to "eu"
    ran = Ran()
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1", region="us"), cancel(order_id="A-1"), cancel(order_id="A-1", region="us"),
         text("cancelled")],
        order_tools(ran),
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]") and 'region="eu"' in msgs[1]
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "us"}]
    assert report.refusals == {"prerequisite_missing": 1}


async def test_a_required_region_missing_on_the_cancel_side_never_runs():
    # cancel_order requires region; AgentScope refuses the call without it
    ran = Ran()
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1"), cancel(order_id="A-1"), cancel(order_id="A-1", region="eu"),
         text("cancelled")],
        order_tools(ran, cancel_region=REQUIRED),
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:bad_arguments]")
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert "prerequisite_missing" not in report.refusals


async def test_a_required_region_missing_on_the_lookup_side_is_no_prerequisite():
    # lookup_order requires region: the call without it never ran, so it
    # satisfies nothing; the lookup that ran for "eu" satisfies the default
    ran = Ran()
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1"), cancel(order_id="A-1"),
         lookup(order_id="A-1", region="eu"), cancel(order_id="A-1"), text("cancelled")],
        order_tools(ran, lookup_region=REQUIRED),
    )
    _, _, report = await drive(h, agent)
    assert ran == [("lookup_order", {"order_id": "A-1", "region": "eu"}),
                   ("cancel_order", {"order_id": "A-1", "region": "eu"})]
    msgs = results(model)
    assert msgs[0].startswith("[harness:bad_arguments]")
    assert msgs[1].startswith("[harness:prerequisite_missing]") and 'region="eu"' in msgs[1]
    assert report.refusals == {"prerequisite_missing": 1}


_EU = object()
"""A default no JSON schema can carry: the tool's schema declares none."""


async def test_an_argument_absent_with_no_declared_default_is_missing_not_null():
    # the lookup ran with a default its schema cannot state: "missing" is
    # distinct from every value, an explicit null included
    ran = Ran()

    async def lookup_order(order_id: str, region: Any = _EU) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            region (Any): The region.
        """
        ran.append(("lookup_order", {"order_id": order_id, "region": region}))
        return f"order {order_id}: 1 mug, status paid"

    async def cancel_order(order_id: str, region: Any = None) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (Any): The region.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} cancelled"

    schema = {"type": "object", "properties": {"order_id": {"type": "string"}, "region": {}},
              "required": ["order_id"]}
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1"), cancel(order_id="A-1", region=None), cancel(order_id="A-1"),
         text("not cancelled")],
        [tool(lookup_order, input_schema=schema), cancel_order],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert [m.startswith("[harness:prerequisite_missing]") for m in msgs[1:]] == [True, True]
    assert ran.of("cancel_order") == []


async def test_a_default_that_is_not_json_keeps_the_argument_missing():
    # a schema written by hand may carry a default that is no JSON value
    # (NaN): it is not filled in; absent on both sides compares as missing
    ran = Ran()

    async def lookup_order(order_id: str, region: str = "eu") -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        ran.append(("lookup_order", {"order_id": order_id, "region": region}))
        return f"order {order_id}: 1 mug, status paid"

    async def cancel_order(order_id: str, region: str = "eu") -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} cancelled"

    schema = {"type": "object", "required": ["order_id"],
              "properties": {"order_id": {"type": "string"}, "region": {"type": "string", "default": NAN}}}
    h, model, agent = harnessed(
        config(),
        [lookup(order_id="A-1"), cancel(order_id="A-1", region="eu"), cancel(order_id="A-1"),
         text("cancelled")],
        [tool(lookup_order, input_schema=schema), tool(cancel_order, input_schema=schema)],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]")
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert report.refusals == {"prerequisite_missing": 1}


NAN = float("nan")


def test_only_json_defaults_are_read_from_a_schema():
    schema = {"properties": {
        "a": {"default": "eu"}, "b": {"default": None}, "c": {"default": [1, {"k": 2.5}]},
        "d": {"default": NAN}, "e": {"default": {1, 2}}, "f": {"default": object()}, "g": {},
        "h": {"default": {1: "x"}},
    }}
    declared = declared_in(schema)
    assert declared is not None and declared.names == set("abcdefgh")
    assert thawed(declared.defaults) == {"a": "eu", "b": None, "c": [1, {"k": 2.5}]}
    assert declared_in(None) is None and declared_in({"properties": []}) is None


def typo_config() -> HarnessConfig:
    return config().model_copy(update={"tools": {
        "lookup_order": ToolPolicy(role="lookup"),
        "cancel_order": ToolPolicy(role="mutation", requires=[Prerequisite("lookup_order", ["orderid"])]),
    }})


async def test_same_args_a_tool_does_not_declare_fail_closed_at_the_call():
    """Red team: a typo (``orderid``) compared "missing" with "missing", so
    any lookup let a cancel of any order run. Without ``instrument`` the
    gate cannot check at construction: the call is refused as the gate's
    failure (``policy_error``), and the decision names the field."""
    ran = Ran()
    h, _, agent = harnessed(typo_config(), [lookup(order_id="A-1"), cancel(order_id="B-2"), text("done")],
                            order_tools(ran))
    _, _, report = await drive(h, agent)
    assert [name for name, _ in ran] == ["lookup_order"]
    assert report.refusals == {"policy_error": 1}
    assert any("same_args ['orderid']" in d.detail for d in report.decisions)


def test_same_args_a_tool_does_not_declare_fail_at_instrument():
    from agentscope.tool import Toolkit

    h = Harness(typo_config(), load_entry_points=False)
    toolkit = Toolkit(tools=[tool(f) for f in order_tools(Ran())])
    with pytest.raises(HarnessConfigError, match=r"tools\.cancel_order\.requires\[0\]\.same_args"):
        h.instrument(toolkit)
