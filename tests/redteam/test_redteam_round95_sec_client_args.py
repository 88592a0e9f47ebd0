"""Round 95 red team: a client-executed call is judged on AgentScope's
repair of its arguments, and the client is handed the unrepaired text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_kit import handed_to_client
from scripted import ALICE, last_tool_message

from agentscope_harness.client_arguments import read_one_way


async def test_a_client_is_handed_the_arguments_the_identity_check_judged() -> None:
    """Two JSON objects back to back: AgentScope's repair reads the last one
    (``user_id`` = the signed-in user), so ``authorization_gate`` admits the
    call; the client is handed the model's text as written, and a client
    that decodes the first JSON value of it (Go's ``json.Decoder.Decode``,
    Python's ``raw_decode``, streaming JSON readers) refunds another user's
    order. For a server tool AgentScope parses again with the same repair,
    so judge and tool agree; for a client tool nothing makes what the
    client reads the value that was judged (README: every call is judged
    "on the exact arguments the tool receives (client-executed tools ...
    included)"; duplicate keys and trailing text are in its differential
    fuzzing)."""
    h, model, agent, handed = await handed_to_client('{"order_id": "A-9", "user_id": "u-7"} {"order_id": "A-9", "user_id": "u-42"}')
    for call in handed:  # whatever the client is asked to run is the call that was judged
        first, _ = json.JSONDecoder().raw_decode(call.input)
        assert first["user_id"] == ALICE.user_id
    assert handed == []  # text two readers read two ways is never handed to a client
    assert "[harness:bad_arguments]" in last_tool_message(model)  # the model is told to send it again
    report = h.last_report(agent)
    assert report is not None
    assert any(d.hook == "client_arguments_check" and d.code == "bad_arguments" for d in report.decisions)


async def test_a_client_is_handed_well_formed_arguments_as_written() -> None:
    """One object, each key once: handed to the client as the model wrote it."""
    raw = '{"order_id": "A-9", "user_id": "u-42", "lines": [1, 2]}'
    *_, handed = await handed_to_client(raw)
    assert [c.input for c in handed] == [raw]


@pytest.mark.parametrize(("written", "judged", "one_way"), [
    ('{"a": 1}', {"a": 1}, True),
    ('{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}, True),
    ('  {"a": 1}\n', {"a": 1}, True),
    ("", {}, True),
    ('{"a": 1, "a": 2}', {"a": 2}, False),
    ('{"a": 1} {"a": 2}', {"a": 2}, False),
    ('{"a": 1} trailing', {"a": 1}, False),
    ('{"a": 1', {"a": 1}, False),
    ('{"a": {"b": 1, "b": 1}}', {"a": {"b": 1}}, False),
    ("[]", {}, False),
])
def test_read_one_way(written: str, judged: dict[str, Any], one_way: bool) -> None:
    assert read_one_way(written, judged) is one_way
