"""Round 166 a: a result a user's hook withholds after drift_result_tracker still counts as progress.

README row 20 (drift_result_tracker): "Also progress: ... (each by a result the model
read: one the harness withheld ... brings no fact, candidates or picks, and is no
progress)"; row 11/21: a refusal met again with nothing new between -> constrain;
`stall_rounds` rounds without progress -> hint, then constrain. "Writing a hook": a
post_tool_call hook may raise `HookRejectSignal` (the result is withheld) at any priority.

Attack (round 165 b's loop, through a user's hook): a compliance hook (safety,
post_tool_call, priority 60) withholds every `search` result that names a customer.
drift_result_tracker (priority 50) has already judged the text new and set the round's
progress flag; the withholding afterwards does not take it back (``credit`` covers facts
and counts only). Each round reads as progress: the drift ladder never climbs and the
refusal ladder forgets each `customer_data` refusal before meeting it again. The model,
which read nothing, loops to AgentScope's `max_iters` (14 calls). Harness-withheld
(`pii_blocked`, round 165 b) stops after 2.
"""

from __future__ import annotations

from agentscope.model import ChatResponse
from hookkit import Ran, drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, HookRejectSignal, ToolPolicy, harness_hook


@harness_hook("post_tool_call", priority=60, name="no_customer_data", kind="safety")
def no_customer_data(ctx) -> None:
    if ctx.tool.name == "search" and "customer record" in ctx.result.text:
        raise HookRejectSignal("That result holds customer data and was withheld.", code="customer_data")


def _search(ran: Ran):
    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return f"customer record {len(ran)}: {q} ordered item {len(ran) * 7} on day {len(ran) * 3} from shop {q[::-1]}"

    return search


async def test_a_search_whose_every_result_a_users_hook_withholds_is_stopped():
    ran = Ran()
    config = HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, stall_rounds=2,
                           require_finish_tool=False)

    def step(turn) -> ChatResponse:
        mode = getattr(turn.tool_choice, "mode", turn.tool_choice)
        if mode not in (None, "auto"):  # constrained: the model concludes
            return text("I could not find it.")
        return calls(("search", {"q": f"customer {len(turn.formatted)}"}))

    h, model, agent = harnessed(config, step, [_search(ran)], hooks=(no_customer_data,), max_iters=14)
    _, final, report = await drive(h, agent)
    told = [r for c in model.calls[-1:] for r in c.tool_results]
    assert told and all("customer_data" in r for r in told), told[:2]  # nothing was ever read
    constrained = [(d.hook, d.detail) for d in report.decisions if d.action == "constrain"]
    # the break: every round counted as progress; no ladder climbed; max_iters ended it
    assert constrained, (len(ran), report.terminal_state.value, report.reason)
    assert len(ran) <= 4, (len(ran), report.reason)
