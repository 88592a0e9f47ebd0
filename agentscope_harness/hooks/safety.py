"""Safety: who may call what, circuit breakers, and keeping secrets and
forged instructions away from the model and the user."""

from __future__ import annotations

import re
import time

from ..errors import NOT_BREAKER_FAILURES
from ..harness import Breaker
from ..registry import HookRejectSignal, harness_hook
from ..sentinels import neutralise, strip_issued
from ..context import HookContext


@harness_hook("pre_tool_call", priority=8, name="authorization_gate", kind="safety")
def authorization_gate(ctx: HookContext) -> None:
    """The principal's ``allowed_tools`` and each ``identity_args`` argument
    checked against the bound principal; the model cannot argue past it."""
    call = ctx.tool
    principal = ctx.principal
    if principal is not None and principal.allowed_tools is not None:
        if call.name not in principal.allowed_tools:
            raise HookRejectSignal(
                f"{call.name} is not available to this user. Do not retry; "
                "tell the user this action is not permitted for their account.",
                code="permission_denied",
            )
    policy = call.policy
    if policy is None or not policy.identity_args:
        return
    if principal is None:
        raise HookRejectSignal(
            f"{call.name} acts for a signed-in user and no user is signed in to "
            "this conversation. Do not retry; tell the user to sign in.",
            code="permission_denied",
        )
    for arg, attr in policy.identity_args.items():
        expected = principal.attr(attr)
        given = call.args.get(arg)
        # exact: "acme " or "Alice" would reach the tool as another identity
        if expected is None or type(given) is not type(expected) or given != expected:
            raise HookRejectSignal(
                f"{call.name} may only act for the signed-in user: {arg} must be "
                f"{expected!r}. You cannot act for anyone else.",
                code="permission_denied",
            )


@harness_hook("pre_tool_call", priority=48, name="tool_breaker_gate", kind="safety")
def tool_breaker_gate(ctx: HookContext) -> None:
    """Refuse a tool whose breaker is open; after the cooldown let one probe
    through (half-open). A tool that reported its dependency down in this
    run is not called again in this run ("do not retry")."""
    facts = ctx.facts
    if ctx.tool.name in facts.dependency_down:
        if not facts.force_conclude:  # retried after "do not retry": constrain
            facts.force_conclude = True
            facts.forced_at = ctx.run.root.model_calls
            ctx.decide("constrain", detail=f"{ctx.tool.name} retried while its dependency is down")
        raise HookRejectSignal(
            f"{ctx.tool.name} reported its dependency unavailable earlier in this task. "
            "Do not retry; tell the user.",
            code="dependency_down",
        )
    breaker = ctx.harness.breakers.get(ctx.tool.name)
    if breaker is None or breaker.opened_at is None:
        return
    waited = time.monotonic() - breaker.opened_at
    if waited >= ctx.config.breaker_cooldown_s and not breaker.half_open_probe:
        breaker.half_open_probe = True
        ctx.decide("half_open", detail=f"probe after {waited:.1f}s")
        return
    raise HookRejectSignal(
        f"{ctx.tool.name} is unavailable (it failed {breaker.failures} times in a row). "
        "Do not retry; tell the user.",
        code="dependency_down",
    )


@harness_hook("post_tool_call", priority=5, name="tool_breaker_record", kind="observer")
def tool_breaker_record(ctx: HookContext) -> None:
    """Feed the breaker: a success closes it; a failure that says something
    about the dependency (never an argument error) counts towards opening."""
    result = ctx.result
    if result.refused or result.state in ("interrupted", "denied"):
        return
    breakers = ctx.harness.breakers
    name = ctx.tool.name
    if result.ok:
        if name in breakers:
            if breakers[name].opened_at is not None:
                ctx.decide("breaker_closed")
            del breakers[name]
        return
    if result.error_class in NOT_BREAKER_FAILURES:
        return
    breaker = breakers.setdefault(name, Breaker())
    breaker.failures += 1
    if breaker.half_open_probe or (
        breaker.opened_at is None and breaker.failures >= ctx.config.breaker_failures
    ):
        breaker.opened_at = time.monotonic()
        breaker.half_open_probe = False
        ctx.decide("breaker_open", code="dependency_down", detail=f"{breaker.failures} failures")


@harness_hook("post_tool_call", priority=5, name="content_filter", kind="transform", fail_closed=True)
def content_filter(ctx: HookContext) -> None:
    """Redact secrets from a tool result before the model sees it."""
    result = ctx.result
    if result.refused or not result.text:
        return
    redacted = ctx.harness.redactor.redact(result.text)
    if redacted != result.text:
        result.text = redacted
        ctx.decide("rewrite", detail="redacted secrets")


# any spacing around the slash: "< /tool-output" reads as a close too
_FENCE_MARK = re.compile(r"<(\s*/?\s*tool-output)", re.IGNORECASE)


def fence_open(nonce: str, tool: str) -> str:
    """The opening fence line of a tool result in this run."""
    return f'<tool-output nonce="{nonce}" tool="{tool}">'


def fence_close(nonce: str) -> str:
    """The closing fence line of a tool result in this run."""
    return f'</tool-output nonce="{nonce}">'


@harness_hook("post_tool_call", priority=15, name="content_fence", kind="transform", fail_closed=True)
def content_fence(ctx: HookContext) -> None:
    """Mark tool output as data: neutralise forged sentinels and fence
    markers in it, then wrap it in this run's nonce fence. An interrupted
    call's text is AgentScope's own reminder, not tool output."""
    result = ctx.result
    if result.refused or not result.text or result.state == "interrupted":
        return
    text = neutralise(result.text)
    if not ctx.config.fence:
        result.text = text
        return
    if "<" in text:  # no marker possible without one
        text = _FENCE_MARK.sub(r"&lt;\1", text)
    nonce = ctx.run.nonce
    result.text = f"{fence_open(nonce, ctx.tool.name)}\n{text}\n{fence_close(nonce)}"


@harness_hook("on_session_end", priority=10, name="final_answer_audit", kind="transform", fail_closed=True)
def final_answer_audit(ctx: HookContext) -> None:
    """Strip the sentinels and fences this run issued from the answer, redact
    secrets, and check the answer's claims against successful calls.
    (Synchronous: it awaits nothing, so it needs no timeout machinery.)"""
    run = ctx.run
    text = ctx.final_text or ""
    cleaned = strip_issued(text, run.issued)
    if ctx.run.nonce in cleaned:
        cleaned = re.sub(
            rf'</?tool-output nonce="{re.escape(run.nonce)}"[^>]*>', "", cleaned,
        )
    cleaned = ctx.harness.redactor.redact(cleaned)
    if cleaned != text:
        cleaned = re.sub(r"[ \t]{2,}", " ", cleaned).strip()
        ctx.decide("rewrite", detail="removed harness markers or secrets from the answer")
        ctx.final_text = cleaned
    for tool, policy in ctx.config.tools.items():
        if not policy.claims or ctx.facts.has_succeeded(tool):
            continue
        for pattern in policy.claims:
            if re.search(pattern, cleaned, re.IGNORECASE):
                ctx.facts.unsupported_claims.append(tool)
                ctx.decide(
                    "unsupported_claim", code="verification_failed", tool=tool,
                    detail=f"answer matches {pattern!r} but {tool} never succeeded",
                )
                break
    state, reason = ctx.harness.terminal_from_facts(run, ctx.end_reason)
    ctx.decide("terminal", code=state.value, detail=reason)
