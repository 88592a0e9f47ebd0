"""Safety: who may call what, circuit breakers, and keeping secrets and
forged instructions away from the model and the user."""

from __future__ import annotations

import re

from ..context import SessionEndContext, ToolCallContext, ToolResultContext
from ..errors import BREAKER_FAILURES, ErrorClass
from ..registry import HookRejectSignal, harness_hook
from ..sentinels import format_sentinel, neutralise, strip_issued


@harness_hook("pre_tool_call", priority=8, name="authorization_gate", kind="safety")
def authorization_gate(ctx: ToolCallContext) -> None:
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
async def tool_breaker_gate(ctx: ToolCallContext) -> None:
    """Refuse a tool whose breaker is open; after the cooldown let one probe
    through across the fleet (half-open). A tool that reported its
    dependency down in this run is not called again in this run ("do not
    retry"). The last built-in gate: the probe is claimed from the store
    here and used at admission; a call refused after this (by a custom gate
    above 48, or at admission) leaves the probe with this process for its
    next call of the tool, or for another process after ``PROBE_LEASE_S``."""
    facts = ctx.facts
    if ctx.tool.name in facts.dependency_down:
        # retried after "do not retry": constrain
        ctx.constrain(f"{ctx.tool.name} retried while its dependency is down")
        raise HookRejectSignal(
            f"{ctx.tool.name} reported its dependency unavailable earlier in this task. "
            "Do not retry; tell the user.",
            code="dependency_down",
        )
    await ctx.services.fleet.breaker_gate(ctx)


@harness_hook("post_tool_call", priority=5, name="tool_breaker_record", kind="observer")
async def tool_breaker_record(ctx: ToolResultContext) -> None:
    """Feed the breaker: a success closes it; only a failure of the
    dependency (``DependencyDown``, a timeout, a connection error: never an
    argument error or a tool's own bug) counts towards opening. A dependency
    reported down is also told to the model: do not retry."""
    result = ctx.result
    if result.state in ("interrupted", "denied"):
        return
    if result.error_class == ErrorClass.DEPENDENCY_DOWN:
        _dependency_down(ctx)
    if result.ok or result.error_class in BREAKER_FAILURES:
        await ctx.services.fleet.breaker_record(ctx, result.ok)


def _dependency_down(ctx: ToolResultContext) -> None:
    result = ctx.result
    dependency = result.harness_meta.get("dependency") or ctx.tool.name
    line = format_sentinel("dependency_down", f"{dependency} is unavailable. Do not retry; tell the user.")
    ctx.run.remember_sentinel("dependency_down", line)
    ctx.facts.dependency_down.add(ctx.tool.name)
    result.notices.insert(0, line)


@harness_hook("post_tool_call", priority=5, name="content_filter", kind="transform", fail_closed=True)
def content_filter(ctx: ToolResultContext) -> None:
    """Redact secrets from a tool result before the model sees it."""
    result = ctx.result
    if not result.text:
        return
    redacted = ctx.services.redactor.redact(result.text)
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
def content_fence(ctx: ToolResultContext) -> None:
    """Mark tool output as data: neutralise forged sentinels and fence
    markers in it, then wrap it in this run's nonce fence. An interrupted
    call's text is AgentScope's own reminder, not tool output."""
    result = ctx.result
    if not result.text:
        return
    text, reminder = result.text, ""
    if result.state == "interrupted":  # AgentScope's own reminder stays readable
        text, reminder = _split_reminder(text)
        if not text.strip():
            return
    text = neutralise(text)
    if not ctx.config.fence:
        result.text = text
        return
    if "<" in text:  # no marker possible without one
        text = _FENCE_MARK.sub(r"&lt;\1", text)
    nonce = ctx.run.nonce
    fenced = f"{fence_open(nonce, ctx.tool.name)}\n{text}\n{fence_close(nonce)}"
    result.text = f"{fenced}\n{reminder}" if reminder else fenced


_REMINDER = re.compile(r"<system-reminder>The tool call has been interrupted[^<]*</system-reminder>\s*$")


def _split_reminder(text: str) -> tuple[str, str]:
    """An interrupted result: (the tool's partial output, AgentScope's reminder)."""
    match = _REMINDER.search(text)
    if match is None:
        return text, ""
    return text[: match.start()], match.group(0).strip()


@harness_hook("on_session_end", priority=10, name="final_answer_audit", kind="transform", fail_closed=True)
def final_answer_audit(ctx: SessionEndContext) -> None:
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
    cleaned = ctx.services.redactor.redact(cleaned)
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
