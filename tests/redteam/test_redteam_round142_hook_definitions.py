"""Round 142 (a red team on round 141; scenarios on "Writing a hook"): what cannot
run as a hook, or as a principal or a store, is refused at construction, named.

README "Writing a hook": "a `HookSpec` built by hand is checked as a declared one";
hooks are switched off by name (`HARNESS_DISABLED_HOOKS=a,b`); a hook's refusal is
never a crash of the reply. Principal: "refused at construction, named". RedisStore:
"told as `redis://***@host:port/db` wherever it is told".

- A name that is no text (`name=5`, a rule id; `None`): accepted, then its first
  refusal built a `Decision(hook=5)` and the reply raised an ExceptionGroup. A name
  with a comma or surrounding spaces could never be switched off by the env flag.
- A decorated method given bound (`hooks=[FraudGate(...).check]`, a gate holding its
  client): the plain function was called with `ctx` alone, and the safety gate failed
  closed on every call (a legitimate refund refused `policy_error`).
- `when=True` or an async `when`: accepted, the hook then always ran.
- `hooks=fn` (no list): a bare TypeError naming nothing.
- A principal's bytes that are no UTF-8 (`session_key=b"\\x9f..."`): a bare
  UnicodeDecodeError, the attribute unnamed.
- A Redis URL missing its `://` (`default:pw@host:6379/0` as a console shows it): the
  refusal quoted the password whole.
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import (
    Harness,
    HarnessConfigError,
    HookRejectSignal,
    Principal,
    RedisStore,
    ToolCallContext,
    harness_hook,
)
from agentscope_harness.registry import HookSpec
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
RAN: list[str] = []


def refuse(ctx: Any) -> None:
    raise HookRejectSignal("no", code="permission_denied")


def _spec(**changes: Any) -> HookSpec:
    fields: dict[str, Any] = {"fn": refuse, "point": "pre_tool_call", "priority": 50, "name": "gate",
                              "kind": "safety", "escape_key": None, "module": "app.hooks", "is_async": False,
                              "fail_closed": None}
    return HookSpec(**{**fields, **changes})


@pytest.mark.parametrize("name", [5, None, "", " gate", "gate ", "fraud,gate"])
async def test_a_name_that_cannot_name_the_hook_is_refused(name: Any) -> None:
    with pytest.raises(HarnessConfigError, match="hook name"):
        _spec(name=name)
    if name:  # the decorator names a hook by its function where no name is given
        with pytest.raises(HarnessConfigError, match="hook name"):
            harness_hook("pre_tool_call", name=name, kind="safety")(lambda ctx: refuse(ctx))


@pytest.mark.parametrize("changes", [{"fn": "refuse"}, {"when": True}, {"when": None, "fn": refuse}])
async def test_what_cannot_be_called_is_refused(changes: dict[str, Any]) -> None:
    if changes.get("when", 1) is None:  # the control
        assert _spec(**changes).name == "gate"
        return
    with pytest.raises(HarnessConfigError, match="gate"):
        _spec(**changes)


async def test_an_async_when_is_refused() -> None:
    async def when(policy: Any, config: Any) -> bool:
        return False

    with pytest.raises(HarnessConfigError, match="when="):
        _spec(when=when)


async def test_hooks_given_as_one_hook_are_refused_naming_hooks() -> None:
    with pytest.raises(HarnessConfigError, match="hooks"):
        Harness(hooks=harness_hook("pre_tool_call", name="one")(lambda ctx: refuse(ctx)),  # type: ignore[arg-type]
                load_entry_points=False, environ={})


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return f"refunded {order_id}"


class FraudGate:
    """How a team writes a gate that holds a client: a method of the object holding it."""

    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    @harness_hook("pre_tool_call", priority=25, name="fraud_gate", kind="safety")
    async def check(self, ctx: ToolCallContext) -> None:
        if ctx.tool.args.get("order_id") in self.blocked:
            raise HookRejectSignal("Order flagged for fraud review.", code="policy_refused")


@pytest.mark.parametrize("order", ["A-1", "BAD-1"])
async def test_a_hook_given_as_a_bound_method_runs_bound(order: str) -> None:
    RAN.clear()
    h = Harness(hooks=[FraudGate({"BAD-1"}).check], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("refund", {"order_id": order})), text("done")]), [refund],
                       h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, f"refund {order}")
    report = h.last_report(agent)
    assert not any(d.hook == "fraud_gate" and d.action == "error" for d in report.decisions), report.decisions
    assert RAN == ([] if order == "BAD-1" else [f"refund:{order}"])
    assert report.refusals == ({"policy_refused": 1} if order == "BAD-1" else {})


KEY = b"\x9f\x12\xe4\x00\xff\x10"


async def test_a_principals_bytes_that_are_no_text_are_refused_naming_them() -> None:
    with pytest.raises(ValueError) as info:
        Principal(user_id="u-42", tenant="acme", session_key=KEY)
    assert "session_key" in str(info.value).split("input_value")[0], str(info.value)
    harness = Harness(load_entry_points=False, environ={})
    principal = Principal.model_construct(user_id="u-42", tenant="acme", session_key=KEY)
    with pytest.raises(ValueError, match="session_key"):
        with harness.acting_for(principal):
            pass


SECRET = "s3cretPW9x"


@pytest.mark.parametrize("url", [
    f"default:{SECRET}@redis.internal:6379/0",
    f"redis:/default:{SECRET}@redis.internal:6379/0",
    f"redis//:{SECRET}@redis.internal:6379",
    f"redis:{SECRET}@redis.internal:6379/0",
    f"default:{SECRET}",
], ids=["no-scheme", "one-slash", "no-colon", "scheme-colon-only", "password-only"])
async def test_a_url_without_its_scheme_separator_is_refused_without_its_password(url: str) -> None:
    with pytest.raises(ValueError, match="url must be a redis://") as info:
        RedisStore(url)
    assert SECRET not in str(info.value), str(info.value)


async def test_ctx_ask_where_nothing_acts_on_it_names_the_point() -> None:
    """A doc note of round 142 b: `ctx.ask` at a point other than `pre_tool_call` failed
    saying only where it works; it says where it was used, as the other verbs do."""
    @harness_hook("pre_think", name="asks_too_early")
    def asks_too_early(ctx: Any) -> None:
        ctx.ask("is this fine?")

    h = Harness(hooks=[asks_too_early], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([text("done")]), [refund], h.middlewares())
    await run(agent, "hi")
    failed = [d.detail for d in h.last_report(agent).decisions if d.hook == "asks_too_early" and d.action == "error"]
    assert failed and "ctx.ask() is not available at pre_think" in failed[0], failed
