"""Round 166 b (scenarios on README "Security: the guarantees and their limits" with the real
``OpenAIChatModel``; about 40 held): a client-run call whose argument key differs from the
schema's field only in case (or by Go's ``ſ``/Kelvin folding), written once, was handed to
the client. Go's ``encoding/json`` fills the field with it, while the harness judged the
field left out: ``same_args`` filled in the schema's default (a prerequisite met for
another account) and ``ask_when`` asked nobody before a recursive wipe. README "Every call
is gated": a call "a JSON reader could read other than as it was judged ... is refused
(``bad_arguments``, decision ``client_arguments_check``) and never handed to the client".
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import RequireExternalExecutionEvent, RequireUserConfirmEvent
from agentscope.tool import ToolBase, Toolkit
from scripted import ALLOW, make_agent, run, tool
from server import FakeOpenAI, Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, Prerequisite, Principal, ToolPolicy

ALICE = Principal(user_id="u-42", tenant="bank")
ASK_RECURSIVE = ToolPolicy(role="mutation", ask_when=lambda a: a.get("recursive") is True and "a recursive wipe")


async def lookup_account(account: str) -> str:
    """Look an account up.

    Args:
        account (str): The account.
    """
    return f"account {account}: open, balance 10"


class _ClientTool(ToolBase):
    is_concurrency_safe = False
    is_read_only = False
    is_external_tool = True

    async def check_permissions(self, tool_input: Any, context: Any) -> Any:
        return ALLOW


class CloseAccount(_ClientTool):
    """Run by the bank's app (Go: ``encoding/json`` into a struct field tagged ``account``)."""

    name = "close_account"
    description = "Close one of the user's accounts (the primary one by default)."
    input_schema = {"type": "object", "required": ["reason"], "properties": {
        "account": {"type": "string", "default": "primary"}, "reason": {"type": "string"}}}


JOB = {"type": "object", "required": ["path"], "properties": {
    "path": {"type": "string"}, "recursive": {"type": "boolean", "default": False}}}
JOB_SCHEMAS = {  # round 167 a: pydantic's and MCP servers' forms of a nested object
    "inline": {"type": "object", "required": ["job"], "properties": {"job": JOB}},
    "ref": {"type": "object", "properties": {"job": {"$ref": "#/$defs/Job"}}, "$defs": {"Job": JOB}},
    "anyOf": {"type": "object", "properties": {"job": {"anyOf": [JOB, {"type": "null"}]}}},
    "allOf": {"type": "object", "properties": {"job": {"allOf": [JOB]}}},
}


def _wipe_job(schema: dict[str, Any]) -> ToolBase:
    class WipeJob(_ClientTool):
        name = "wipe_job"
        description = "Run a wipe job on the user's device."
        input_schema = schema

    return WipeJob()


class WipeFolder(_ClientTool):
    name = "wipe_folder"
    description = "Wipe a folder on the user's device."
    input_schema = {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string"}, "recursive": {"type": "boolean", "default": False}}}


async def _events(policies: dict[str, ToolPolicy], tools: list[Any], *replies: Reply) -> tuple[list[Any], Any]:
    async with FakeOpenAI.running() as server:
        server.plan(*replies, Reply(text="ok"))
        harness = Harness(HarnessConfig(tools=policies), load_entry_points=False, environ={})
        toolkit = harness.instrument(Toolkit(tools=[t if isinstance(t, ToolBase) else tool(t) for t in tools]))
        agent = make_agent(model(server, "gpt-test"), toolkit, harness.middlewares(), name="bank")
        with harness.acting_for(ALICE):
            events, _ = await run(agent)
        return events, harness.last_report(agent)


def _handed(events: list[Any]) -> list[str]:
    return [c.input for e in events if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]


@pytest.mark.parametrize("key", ["ACCOUNT", "Account", "acCount"])
async def test_a_field_in_another_case_is_not_handed_to_the_client(key: str) -> None:
    events, report = await _events(
        {"lookup_account": ToolPolicy(role="lookup"), "close_account": ToolPolicy(
            role="mutation", requires=[Prerequisite(tool="lookup_account", same_args=["account"])])},
        [lookup_account, CloseAccount()],
        Reply(tool_calls=[("lookup_account", {"account": "primary"})]),
        Reply(tool_calls=[("close_account", json.dumps({"reason": "user asked", key: "savings-9"}))]),
    )
    assert _handed(events) == []
    assert [(d.hook, d.code) for d in report.decisions if d.hook == "client_arguments_check"] == [
        ("client_arguments_check", "bad_arguments")]


@pytest.mark.parametrize("key", ["RECURSIVE", "recur\u017five"])
async def test_a_flag_in_another_case_is_not_handed_to_the_client_unasked(key: str) -> None:
    events, _ = await _events({"wipe_folder": ASK_RECURSIVE}, [WipeFolder()],
                              Reply(tool_calls=[("wipe_folder", json.dumps({"path": "/sdcard", key: True}, ensure_ascii=False))]))
    assert _handed(events) == []


async def test_the_flag_as_the_schema_spells_it_asks_a_human() -> None:
    events, _ = await _events({"wipe_folder": ASK_RECURSIVE}, [WipeFolder()],
                              Reply(tool_calls=[("wipe_folder", '{"path": "/sdcard", "recursive": true}')]))
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert _handed(events) == []


def test_a_nested_field_in_another_case_reads_otherwise() -> None:
    """The schema is followed into objects and arrays (Go fills nested struct fields alike)."""
    from agentscope_harness.client_arguments import read_one_way

    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"sku": {"type": "string"}}}}}}
    assert read_one_way('{"items": [{"sku": "a"}]}', {"items": [{"sku": "a"}]}, schema)
    assert not read_one_way('{"items": [{"SKU": "a"}]}', {"items": [{"SKU": "a"}]}, schema)
    assert not read_one_way('{"items": [{"\u017fku": "a"}]}', {"items": [{"\u017fku": "a"}]}, schema)


@pytest.mark.parametrize("form", sorted(JOB_SCHEMAS))
@pytest.mark.parametrize("key", ["recursive", "RECURSIVE"])
async def test_a_nested_field_in_another_case_is_refused_however_the_schema_describes_it(form: str, key: str) -> None:
    """Round 167 a: a field described through ``$ref``, ``anyOf`` or ``allOf`` was not
    followed: ``{"job": {"RECURSIVE": true}}`` went to the client unasked."""
    ask = ToolPolicy(role="mutation", ask_when=lambda a: (a.get("job") or {}).get("recursive") is True and "recursive")
    events, report = await _events({"wipe_job": ask}, [_wipe_job(JOB_SCHEMAS[form])],
                                   Reply(tool_calls=[("wipe_job", json.dumps({"job": {"path": "/sdcard", key: True}}))]))
    assert _handed(events) == []
    asked = any(isinstance(e, RequireUserConfirmEvent) for e in events)
    refused = [d.code for d in report.decisions if d.hook == "client_arguments_check"]
    assert (asked, refused) == ((True, []) if key == "recursive" else (False, ["bad_arguments"]))


def test_a_recursive_schema_is_followed_once_per_object() -> None:
    """A schema referring to itself (a tree) ends; its nested fields are still judged."""
    from agentscope_harness.client_arguments import read_one_way

    tree = {"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}}
    nested = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
    assert read_one_way(json.dumps(nested), nested, tree)
    bad = {"name": "a", "children": [{"name": "b", "children": [{"NAME": "c"}]}]}
    assert not read_one_way(json.dumps(bad), bad, tree)


TREE_FORMS = {  # round 168 a: a tree referring to the root, and a map of jobs by name
    "ref_to_root": ({"type": "object", "properties": {**JOB["properties"], "then": {"type": "array", "items": {
        "$ref": "#"}}}}, lambda key: {"path": "/tmp", "then": [{"path": "/sdcard", key: True}]}),
    "map_of_jobs": ({"type": "object", "properties": {**JOB["properties"], "then": {
        "type": "object", "additionalProperties": JOB}}}, lambda key: {"path": "/tmp", "then": {
            "photos": {"path": "/sdcard", key: True}}}),
    "prefix_items": ({"type": "object", "properties": {"then": {"type": "array", "prefixItems": [JOB]}}},
                     lambda key: {"then": [{"path": "/sdcard", key: True}]}),
}


@pytest.mark.parametrize("form", sorted(TREE_FORMS))
def test_a_field_in_another_case_is_found_through_the_root_maps_and_tuples(form: str) -> None:
    from agentscope_harness.client_arguments import read_one_way

    schema, args = TREE_FORMS[form]
    assert read_one_way(json.dumps(args("recursive")), args("recursive"), schema)
    assert not read_one_way(json.dumps(args("RECURSIVE")), args("RECURSIVE"), schema)


MORE_FORMS = {  # round 169 a: keywords the schema walk did not follow, and depth
    "pattern_map": ({"type": "object", "properties": {"jobs": {"type": "object", "patternProperties": {
        "^dev-": JOB}}}}, lambda key: {"jobs": {"dev-1": {"path": "/sdcard", key: True}}}),
    "draft7_tuple": ({"type": "object", "properties": {"then": {"type": "array", "items": [JOB]}}},
                     lambda key: {"then": [{"path": "/sdcard", key: True}]}),
    "if_then": ({"type": "object", "properties": {"path": {"type": "string"}}, "if": {"required": ["path"]},
                 "then": {"properties": {"recursive": {"type": "boolean"}}}},
                lambda key: {"path": "/sdcard", key: True}),
    "deep_tree": (TREE_FORMS["ref_to_root"][0], lambda key: _chain(25, key)),
}


def _chain(depth: int, key: str) -> dict[str, Any]:
    job: dict[str, Any] = {"path": "/sdcard", key: True}
    for i in range(depth):
        job = {"path": f"/tmp/{i}", "then": [job]}
    return job


@pytest.mark.parametrize("form", sorted(MORE_FORMS))
def test_a_field_in_another_case_is_found_wherever_the_schema_names_it(form: str) -> None:
    from agentscope_harness.client_arguments import read_one_way

    schema, args = MORE_FORMS[form]
    assert read_one_way(json.dumps(args("recursive")), args("recursive"), schema)
    assert not read_one_way(json.dumps(args("RECURSIVE")), args("RECURSIVE"), schema)


@pytest.mark.parametrize(("written", "refused"), [
    ({"stra\u00dfe": "Hauptstr. 1"}, False),  # Go folds no ß to ss: no field of the schema
    ({"STRASSE": "Hauptstr. 1"}, True),
    ({"stra\u017fse": "Hauptstr. 1"}, True),  # ſ is s to Go
    ({"strasse": "a", "stra\u00dfe": "b"}, False),  # two keys to Go, not a repeated one
])
def test_keys_fold_as_go_folds_them(written: dict[str, str], refused: bool) -> None:
    """Round 169 a: Python's full case folding made ``straße`` a ``strasse`` and refused a call
    Go reads as one field left out and one extra key."""
    from agentscope_harness.client_arguments import read_one_way

    schema = {"type": "object", "properties": {"strasse": {"type": "string"}, "ort": {"type": "string"}}}
    assert read_one_way(json.dumps(written, ensure_ascii=False), written, schema) is not refused

