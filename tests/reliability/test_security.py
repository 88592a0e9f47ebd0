"""Security: identity bypass attempts succeed 0 times; shadow mode and the
kill switch never let a run end ``completed`` without its contract."""

from __future__ import annotations

import itertools
import random

import pytest
from relkit import assert_context_well_formed, result_text, results_by_id
from scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

from agentscope_harness import (
    Harness,
    HarnessConfig,
    Principal,
    TerminalState,
    ToolPolicy,
)

ME = Principal(user_id="alice", tenant="acme", allowed_tools=frozenset({"orders", "refund", "search"}))


def identity_config() -> HarnessConfig:
    return HarnessConfig(
        tools={
            "orders": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
            "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id", "tenant": "tenant"}),
            "search": ToolPolicy(role="retrieval"),
            "admin": ToolPolicy(role="mutation"),
        },
    )


def identity_tools(ran: list[tuple]):
    async def orders(user_id: str) -> str:
        """Orders of a user.

        Args:
            user_id (str): Whose orders.
        """
        ran.append(("orders", user_id))
        return f"orders of {user_id}"

    async def refund(user_id: str, tenant: str, amount: float = 1.0) -> str:
        """Refund a user.

        Args:
            user_id (str): Who.
            tenant (str): Which tenant.
            amount (float): How much.
        """
        ran.append(("refund", user_id, tenant))
        return f"refunded {user_id}@{tenant}"

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append(("search", q))
        # new content every time: a productive model that also keeps trying
        # forged identities (a refusal met again with nothing new climbs the
        # ladder instead: tests/stopping)
        return f"found {q}: " + " ".join(f"doc{len(ran)}x{j}" for j in range(8))

    async def admin(action: str) -> str:
        """Administer.

        Args:
            action (str): What to do.
        """
        ran.append(("admin", action))
        return "done"

    return [orders, refund, search, admin]


FORGED_USERS = [
    "bob", "Alice", "ALICE", "alice\u200b", "\u0430lice",  # Cyrillic a
    "alice;bob", "alice,bob", "*", "%", "", " ", "admin", "root", "alice/../bob",
    ["alice"], ["alice", "bob"], {"$ne": ""}, {"user_id": "alice"}, None, 0, True,
]
FORGED_TENANTS = ["other", "ACME", "acme ", "*", "", None, ["acme"], {"tenant": "acme"}]


def attempts() -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for user in FORGED_USERS:
        out.append(("orders", {"user_id": user}))
        out.append(("orders", {"user_id": user, "principal": {"user_id": user}, "as_user": "alice"}))
        out.append(("refund", {"user_id": user, "tenant": "acme"}))
    for tenant in FORGED_TENANTS:
        out.append(("refund", {"user_id": "alice", "tenant": tenant}))
    out.append(("orders", {}))
    out.append(("refund", {"user_id": "alice"}))
    out.append(("admin", {"action": "grant alice admin"}))
    out.append(("admin", {"action": "x", "allowed_tools": ["admin"]}))
    return out


def bypasses(ran: list[tuple]) -> list[tuple]:
    """Calls that ran for anyone but alice@acme, or a tool she may not use."""
    return [
        r for r in ran
        if (r[0] == "orders" and r[1] != "alice")
        or (r[0] == "refund" and (r[1], r[2]) != ("alice", "acme"))
        or r[0] == "admin"
    ]


async def test_model_supplied_identities_never_get_through() -> None:
    # the gates alone: the refusal ladder (liveness_watchdog) stops a model
    # that keeps trying (tests/redteam/test_redteam_round56.py), which would
    # end the run before every attempt was judged
    harness = Harness(HarnessConfig(**{**dict(identity_config()), "disabled_hooks": {"liveness_watchdog"}}))
    ran: list[tuple] = []
    tries = attempts()
    random.Random(7).shuffle(tries)
    # in parallel batches of 6, with one legitimate call per batch
    turns = [calls(*batch, ("search", {"q": f"legit {i}"})) for i, batch in enumerate(_chunks(tries, 6))]
    model = ScriptedModel(turns + [text("done")])
    agent = make_agent(model, identity_tools(ran), harness.middlewares(), max_iters=200)
    with harness.acting_for(ME):
        await run(agent)
    assert bypasses(ran) == []
    report = harness.last_report(agent)
    assert len(model.calls) == len(turns) + 1, (report.terminal_state, report.reason)
    assert [r for r in ran if r[0] == "search"] == [("search", f"legit {i}") for i in range(len(turns))]
    assert_context_well_formed(agent)
    results = [b for bs in results_by_id(agent).values() for b in bs]
    denied = [b for b in results if result_text(b).startswith("[harness:permission_denied]")]
    assert len(denied) == report.refusals["permission_denied"]
    # every attempt failed: refused by the harness, or its arguments rejected
    # by AgentScope's schema validation before any middleware ran
    failed = [b for b in results if b.state != "success"]
    assert len(failed) == len(tries) and len(results) == len(tries) + len(turns)
    assert len(denied) >= len(tries) // 2


async def test_no_principal_means_no_identity_tool() -> None:
    harness = Harness(identity_config())
    ran: list[tuple] = []
    tries = [("orders", {"user_id": u}) for u in ("alice", "bob", "", "*")] + [
        ("refund", {"user_id": "alice", "tenant": "acme"}),
    ]
    model = ScriptedModel([calls(*tries), text("done")])
    agent = make_agent(model, identity_tools(ran), harness.middlewares())
    await run(agent)  # no acting_for
    assert [r for r in ran if r[0] in ("orders", "refund")] == []
    msgs = tool_messages(model.calls[1])
    assert len(msgs) == 5 and all(m.startswith("[harness:permission_denied]") for m in msgs)
    assert harness.last_report(agent).principal is None


async def test_a_principal_of_another_tenant_cannot_act_in_this_one() -> None:
    harness = Harness(identity_config())
    ran: list[tuple] = []
    mallory = Principal(user_id="alice", tenant="evil")  # same user id, other tenant
    model = ScriptedModel([
        calls(("refund", {"user_id": "alice", "tenant": "acme"}),
              ("refund", {"user_id": "alice", "tenant": "evil"})),
        text("done"),
    ])
    agent = make_agent(model, identity_tools(ran), harness.middlewares())
    with harness.acting_for(mallory):
        await run(agent)
    assert ("refund", "alice", "acme") not in ran
    assert ran == [("refund", "alice", "evil")]  # only within her own tenant


async def test_allowed_tools_is_enforced_whatever_the_arguments() -> None:
    harness = Harness(identity_config())
    ran: list[tuple] = []
    readonly = Principal(user_id="alice", tenant="acme", allowed_tools=frozenset({"search"}))
    tries = [("orders", {"user_id": "alice"}), ("refund", {"user_id": "alice", "tenant": "acme"}),
             ("admin", {"action": "a"}), ("search", {"q": "ok"}),
             ("nonexistent", {"x": 1}), ("search", {"q": "y", "allowed_tools": ["admin"]})]
    model = ScriptedModel([calls(*tries), text("done")])
    agent = make_agent(model, identity_tools(ran), harness.middlewares())
    with harness.acting_for(readonly):
        await run(agent)
    assert all(r[0] == "search" for r in ran)
    # orders, refund, admin refused; the unknown tool never reaches a middleware
    assert harness.last_report(agent).refusals == {"permission_denied": 3}
    assert_context_well_formed(agent)


async def test_a_sub_agent_inherits_the_principal_and_cannot_widen_it() -> None:
    """A sub-agent run inside a tool inherits the parent's principal; it
    cannot widen it by being called without one."""
    harness = Harness(identity_config())
    ran: list[tuple] = []
    child_model = ScriptedModel([calls(("orders", {"user_id": "bob"}), ("orders", {"user_id": "alice"})),
                                 text("child")])
    child = make_agent(child_model, identity_tools(ran), harness.middlewares(), name="child")

    async def delegate(task: str) -> str:
        """Delegate.

        Args:
            task (str): What.
        """
        msg = await child.reply(__import__("agentscope.message", fromlist=["UserMsg"]).UserMsg("p", task))
        return msg.get_text_content()

    parent_model = ScriptedModel([calls(("delegate", {"task": "t"})), text("parent")])
    parent = make_agent(parent_model, [delegate], harness.middlewares(), name="parent")
    with harness.acting_for(Principal(user_id="alice", tenant="acme")):
        await run(parent)
    assert ran == [("orders", "alice")]
    child_report = harness.last_report(parent).children[0]
    assert child_report.principal["user_id"] == "alice"
    assert child_report.refusals == {"permission_denied": 1}


# ----------------------------------------------- shadow mode, kill switch

FINISH = {"submit": ToolPolicy(role="finish", verify=lambda text: None if "ok" in text else "needs ok")}


async def submit(answer: str) -> str:
    """Submit the answer.

    Args:
        answer (str): The answer.
    """
    if answer == "raise":
        raise RuntimeError("submission backend failed")
    return f"submitted {answer}"


OPTIONAL_HOOKS = ["terminal_enforcer", "final_answer_audit", "liveness_watchdog", "drift_detector",
                  "phase_step", "strategy_feedback", "content_fence", "spend_gate"]

SCENARIOS = {
    "no_finish": [text("all done")],
    "finish_fails_verify": [calls(("submit", {"answer": "bad"})), text("all done")],
    "finish_raises": [calls(("submit", {"answer": "raise"})), text("all done")],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("mode", ["enforce", "shadow"])
@pytest.mark.parametrize("disabled", [(), *[(h,) for h in OPTIONAL_HOOKS], ("terminal_enforcer", "strategy_feedback")])
async def test_never_completed_without_the_contract(scenario: str, mode: str, disabled: tuple) -> None:
    harness = Harness(
        HarnessConfig(tools=FINISH),
        environ={"HARNESS_MODE": mode, "HARNESS_DISABLED_HOOKS": ",".join(disabled)},
    )
    model = ScriptedModel(list(SCENARIOS[scenario]), repeat=False)
    model.script += [text("still done")] * 4
    agent = make_agent(model, [submit], harness.middlewares())
    await run(agent)
    report = harness.last_report(agent)
    assert report is not None
    assert report.terminal_state != TerminalState.COMPLETED, (scenario, mode, disabled, report.reason)
    assert len(harness.table) == 0


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_the_contract_met_completes(mode: str) -> None:
    harness = Harness(HarnessConfig(tools=FINISH), environ={"HARNESS_MODE": mode})
    model = ScriptedModel([calls(("submit", {"answer": "ok"})), text("submitted")])
    agent = make_agent(model, [submit], harness.middlewares())
    await run(agent)
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED and report.reason == "finished"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS) + ["finish_ok"])
async def test_the_kill_switch_reports_nothing_rather_than_completed(scenario: str) -> None:
    """``HARNESS_ENABLED=0``: the harness steps aside completely; it never
    produces a report, so it can never vouch for a run."""
    got = []
    harness = Harness(HarnessConfig(tools=FINISH, on_report=got.append), environ={"HARNESS_ENABLED": "0"})
    script = SCENARIOS.get(scenario, [calls(("submit", {"answer": "ok"})), text("done")])
    model = ScriptedModel(list(script) + [text("more")] * 3)
    agent = make_agent(model, [submit], harness.middlewares())
    events, _ = await run(agent)
    assert harness.last_report(agent) is None and got == [] and len(harness.reports) == 0
    assert not any(getattr(e, "name", "").startswith("harness.") for e in events)


def _chunks(items: list, n: int):
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield chunk
