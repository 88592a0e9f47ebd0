"""Round 121 (event loop on crafted input). Every decision's detail is scrubbed in one
synchronous call (``services.Services.record`` -> ``scrubbed``: ``redactor.redact`` then
``apply_pii(text, _ALL_PII)``, seven detectors over the whole text), and a
``HookRejectSignal``'s message, a hint's and a notice's text are recorded whole as the
decision's detail (``runner._rejected``: ``detail=signal.message``; ``HookContext.hint`` /
``notice`` -> ``decide("hint", detail=text)``). A hook that quotes what the call carries
(the README expects it: a refusal's message "may quote a tool's output") turns a model's
1 MB argument into ~150 ms of PII scanning in one step of the loop (bare agent, same call:
a few ms), on top of the message's own redaction, also in one step.

README hook 14: redaction and personal data "in steps for results over 16 KB (the event
loop gets a turn every millisecond of work)"; Writing a hook: a refusal's message is
"redacted before the model reads it ... as it may quote a tool's output", a hint's and a
notice's secrets "are redacted, as a result's are". The model reads this message as the
call's result. Not among the README's stated one-step limits.

Round 123 (red team on round 122): Round 123 red team: round 122 made ``redaction.shaped_within`` end its window "where a
word does" -- at the next whitespace (``_SPACE.search(text, end)``), else at the text's end.
A message with no whitespace past the window (a hook quoting a model's 1 MB argument that is
one token: a data URI, base64, a minified JSON line, a long URL) is then shaped whole in one
step, as before round 121: ``Services.record`` -> ``scrubbed`` (redaction + seven PII
detectors) for a decision's detail, ``runner._refusal_text`` (redaction + PII) for a
refusal's message, ``termination._verification_failed`` for a ``verify`` message.

Round 121's tests/perf/test_round121_decision_detail.py, with the same message spelled
without spaces. README hook 14: redaction and personal data "in steps for results over
16 KB (the event loop gets a turn every millisecond of work)"; the refusal and the detail
are read to 16 KB / 4 KB for exactly this (CHANGELOG rounds 121-122).
"""
from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, HookRejectSignal, harness_hook
from tests.perf.loopkit import loop_gaps
from tests.scripted import calls, text

pytestmark = pytest.mark.asyncio

CONTENTS = {
    "prose": ("Use the tool with your own settings: run it from the system menu, then call support. " * 12_000),
    # one token: a query string or a minified line (round 123)
    "one_token": ("Use+the+tool+with+your+own+settings:run+it+from+the+system+menu,then+call+support." * 12_000),
}


async def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path (str): Where.
        content (str): What.
    """
    return "wrote"


@harness_hook("pre_tool_call", name="no_big_files", kind="safety")
def no_big_files(ctx) -> None:
    content = ctx.tool.args.get("content", "")
    if len(content) > 100_000:
        raise HookRejectSignal(f"Refusing to write {len(content)} characters: {content}")


@harness_hook("post_tool_call", name="tell_what_was_written")
def tell_what_was_written(ctx) -> None:
    ctx.hint(f"The file now holds: {ctx.tool.args.get('content', '')}", "written")


@pytest.mark.parametrize("content", list(CONTENTS))
@pytest.mark.parametrize("hook", [no_big_files, tell_what_was_written], ids=["refusal", "hint"])
async def test_a_hooks_megabyte_message_is_recorded_without_holding_the_loop(hook, content: str) -> None:
    script = [calls(("write_file", {"path": "notes.txt", "content": CONTENTS[content][:1_000_000]})), text("done")]
    gap, bare, (model, bare_model), _ = await loop_gaps(script, [write_file], "save my notes", HarnessConfig(),
                                                   hooks=[hook], model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < bare + 0.1, (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same call: {bare * 1000:.1f} ms)")
