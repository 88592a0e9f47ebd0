"""A hook's refusal (or stop) with a field of the wrong type crashes the reply.

README "Writing a hook": "raise ``HookRejectSignal`` ...  Anything else a hook
raises is its failure, a ``BaseException`` too"; "The hooks": "S safety (always
refuses, fails closed ...), O observer (fails open unless ``fail_closed=True``)".

A ``HookRejectSignal`` whose ``code`` is not text (an HTTP status, ``403``) or
whose message is an exception object (``HookRejectSignal(exc)``), or a
``ctx.stop`` given a state that is no ``TerminalState``, is neither refused nor
treated as the hook's failure: the harness's own handling of it raises
(``Decision`` validation, the redactor, ``TerminalState(...)``) outside the
hook's try, and the exception escapes the middleware: the whole reply raises
to the caller, the report says ``failed`` (``error: ...``), and the user gets no
answer, even from an observer hook that must fail open.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, TerminalState, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDS: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDS.append(order_id)
    return f"refunded {order_id}"


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


def _gate(kind: str, make):
    @harness_hook("pre_tool_call", priority=25, name=f"refund_rule_{kind}", kind=kind)
    def gate(ctx) -> None:
        if ctx.tool.name == "refund":
            make(ctx)

    return gate


def _raise(signal):
    def make(ctx):
        raise signal()
    return make


def _mutated():
    signal = HookRejectSignal("Refunds are blocked.")
    signal.code = 403  # written after it was made
    return signal


CASES = {
    # a fraud service's HTTP status kept as the code
    "safety_int_code": ("safety", _raise(lambda: HookRejectSignal("Refunds are blocked for this account.", code=403))),
    # the caught exception passed on as the message
    "safety_exception_message": ("safety", _raise(lambda: HookRejectSignal(ValueError("refund limit reached")))),
    # an observer's bad refusal must at most fail open
    "observer_int_code": ("observer", _raise(lambda: HookRejectSignal("slow down", code=429))),
    "safety_code_written_after": ("safety", _raise(_mutated)),
    # an observer's stop with a state that is no TerminalState
    "observer_bad_stop_state": ("observer", lambda ctx: ctx.stop("refund needs review", state="review")),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_malformed_refusal_does_not_crash_the_reply(case: str) -> None:
    REFUNDS.clear()
    kind, make = CASES[case]
    h = Harness(HarnessConfig(), hooks=[_gate(kind, make)], load_entry_points=False)
    model = ScriptedModel([calls(("lookup", {"order_id": "A-1"})), calls(("refund", {"order_id": "A-1"})),
                           text("I could not refund A-1."), text("I could not refund A-1.")])
    agent = make_agent(model, [tool(lookup), tool(refund)], h.middlewares())
    try:
        _, final = await run(agent)
    except Exception as exc:  # the reply itself must not fail because of a hook's refusal
        report = h.last_report(agent)
        pytest.fail(f"{case}: the reply raised {type(exc).__name__}: {str(exc)[:120]!r}; "
                    f"report {report.terminal_state.value} {report.reason[:80]!r}")
    report = h.last_report(agent)
    assert report.terminal_state is not TerminalState.FAILED, report.reason
    assert final is not None and final.get_text_content()
    if kind == "safety":
        assert REFUNDS == []  # refused, or failed closed


# Round 120 (red team on round 119): the same with the other verbs, a wrong type
# crashing the reply outside the hook (the run's reason redacted at settle, the
# prompt joined) instead of failing the hook.
def _hook(point: str, kind: str, act):
    @harness_hook(point, priority=25, name=f"rule_{point}_{kind}", kind=kind)
    def hook(ctx) -> None:
        act(ctx)

    return hook


WRONG_TYPED = {
    "observer_constrain_int_code": ("pre_tool_call", "observer", lambda c: c.constrain("slow down", code=429)),
    "safety_constrain_int_reason": ("pre_tool_call", "safety", lambda c: c.constrain(403)),
    "observer_prompt_addition_int": ("on_system_prompt", "observer", lambda c: c.prompt_addition.append(5)),
}


@pytest.mark.parametrize("case", list(WRONG_TYPED))
async def test_a_wrong_typed_verb_does_not_crash_the_reply(case: str) -> None:
    point, kind, act = WRONG_TYPED[case]
    h = Harness(HarnessConfig(), hooks=[_hook(point, kind, act)], load_entry_points=False, environ={})
    # the model keeps calling the tool after being constrained
    model = ScriptedModel([calls(("lookup", {"order_id": f"A-{i}"})) for i in range(6)]
                          + [text("Order A-1 is paid.")] * 3)
    agent = make_agent(model, [tool(lookup)], h.middlewares())
    try:
        _, final = await run(agent)
    except Exception as exc:
        pytest.fail(f"{case}: the reply raised {type(exc).__name__}: {str(exc)[:120]!r}")
    report = h.last_report(agent)
    assert report.terminal_state is not TerminalState.FAILED, report.reason
    assert final is not None and final.get_text_content()
    assert any(d.action == "error" for d in report.decisions), "the hook's failure is not recorded"

