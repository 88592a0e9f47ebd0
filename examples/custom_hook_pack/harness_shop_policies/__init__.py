"""An example hook pack: refund policies for a shop agent.

Installed as a package, it is found through the ``agentscope_harness.hooks``
entry point (see ``pyproject.toml``); ``HOOKS`` can also be passed to
``Harness(hooks=HOOKS)`` directly.
"""

from __future__ import annotations

import os

from agentscope_harness import HookContext, HookRejectSignal, harness_hook

REFUND_LIMIT_USD = float(os.environ.get("SHOP_REFUND_LIMIT_USD", "200"))
AUDIT: list[dict] = []
"""Refunds that ran, in order (a real pack would write to its audit log)."""


@harness_hook("pre_tool_call", priority=25, name="refund_limit", kind="safety")
def refund_limit(ctx: HookContext) -> None:
    """Refunds above the limit need a human: an exact fact, so a safety gate."""
    if ctx.tool.name != "refund":
        return
    amount = float(ctx.tool.args.get("amount_usd", 0) or 0)
    if amount > REFUND_LIMIT_USD:
        raise HookRejectSignal(
            f"Refunds above ${REFUND_LIMIT_USD:.0f} need a human agent "
            f"(asked: ${amount:.2f}). Tell the customer a colleague will follow up.",
            code="policy_refused",
        )


@harness_hook("post_tool_call", priority=60, name="refund_audit", kind="observer")
def refund_audit(ctx: HookContext) -> None:
    """Record every refund that ran."""
    if ctx.tool.name != "refund" or not ctx.result.ok:
        return
    principal = ctx.principal
    entry = {
        "user": principal.user_id if principal is not None else None,
        "order_id": ctx.tool.args.get("order_id"),
        "amount_usd": ctx.tool.args.get("amount_usd"),
    }
    AUDIT.append(entry)
    ctx.decide("audit", detail=f"refund {entry['order_id']} ${entry['amount_usd']}")


HOOKS = [refund_limit, refund_audit]

__all__ = ["AUDIT", "HOOKS", "REFUND_LIMIT_USD", "refund_audit", "refund_limit"]
