"""Round 122 red team: ``redaction.shaped_within`` shapes a window of a long detail
(4 KB kept + 4 KB ``CUT_TAIL`` + 4 KB reach) and stops when the window's shaped text
reaches 8 KB. A JWT longer than that tail (an id token carrying its groups: ~11 KB here)
that starts before the 4 KB cut and ends past the window is halved by the window's end:
the redactor does not know a JWT with no signature, so the window keeps it raw, and the
report's detail (the log line and the OTel event get the same) keeps its header and the
start of its payload. Scrubbed whole, the same detail holds ``[redacted:jwt]``.

README, Security: "a decision's detail is kept to its first 4 KB and a refusal's message
is read to its first 16 KB, each shaped past its cut so nothing is halved"; secrets
redacted include "JWTs"; reports/decisions carry them redacted ("decision details and the
report's reason").
"""
from __future__ import annotations

import base64
import json

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


GROUPS = [f"grp-{i:04d}-finance-eu-west" for i in range(330)]
CLAIMS = {"sub": "u-42", "name": "Alice Example", "email": "alice@example.com", "groups": GROUPS}
JWT = ".".join((_b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()), _b64(json.dumps(CLAIMS).encode()),
                _b64(b"s" * 256)))
NOTE = "Meeting notes, see the session below. " * 80 + "session " + JWT + " end of notes."


async def save_note(content: str) -> str:
    """Save a note.

    Args:
        content (str): The note.
    """
    return "saved"


@harness_hook("pre_tool_call", name="no_tokens_in_notes", kind="safety")
def no_tokens_in_notes(ctx) -> None:
    raise HookRejectSignal(f"Refusing to save this note: {ctx.tool.args.get('content', '')}")


async def test_a_long_jwt_across_the_window_is_not_kept_raw_in_the_report() -> None:
    start = NOTE.index(JWT)
    assert 10_000 < len(JWT) and start < 4_096 < start + len(JWT)
    h = Harness(HarnessConfig(), hooks=[no_tokens_in_notes], load_entry_points=False, environ={})
    assert h.redactor.redact(NOTE).count("[redacted:jwt]") == 1  # whole: the token is redacted
    model = ScriptedModel([calls(("save_note", {"content": NOTE})), text("I could not save it.")])
    agent = make_agent(model, [save_note], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "save my notes")
    details = [d.detail or "" for d in h.last_report(agent).decisions if d.hook == "no_tokens_in_notes"]
    assert details, "the refusal was not recorded"
    leaked = [d[d.find("session eyJ"):][:90] for d in details if JWT[:200] in d]
    assert not leaked, f"the report's detail keeps the JWT's header and payload raw: {leaked}"
