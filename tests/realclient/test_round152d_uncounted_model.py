"""Round 152 d (scenarios: a newcomer's first day with AgentScope's real `OpenAIChatModel`
against a misbehaving server; about 60 held, no promise broken). Its doc note acted on:
a `CostPolicy` with prices but no cap ran a model it could not price and reported
`spent_usd == 0.0` ("spent $0.000000 in 1 model calls") with nothing saying the spend was
not counted. Now an `unpriced_model` decision says so, once per run (no cap: the call is
made, as before). A blank `fallback_text` or `model_error_text` is refused.
"""
from __future__ import annotations

import pytest
from scripted import ALICE, make_agent, run
from server import Reply
from side_kit import model as real_model

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState


@pytest.mark.asyncio
@pytest.mark.parametrize("unpriced, said", [("error", True), ((1.0, 2.0), False)])
async def test_an_uncapped_policys_unpriced_model_is_said_in_the_report(server, unpriced, said) -> None:
    server.plan(Reply(text="Hello."), Reply(text="Hello again."))
    h = Harness(HarnessConfig(cost=CostPolicy(prices={"gpt-test": (1.0, 2.0)}, unpriced=unpriced)),
                load_entry_points=False, environ={})
    agent = make_agent(real_model(server, "my-llm"), [], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "hi")
        await run(agent, "hi again")
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED and final.get_text_content() == "Hello."
    told = [d for d in report.decisions if d.action == "unpriced_model"]
    assert [d.detail for d in told] == (
        ["model 'my-llm' has no price; its calls are not counted in spent_usd"] if said else [])
    assert (report.spent_usd == 0.0) is said


@pytest.mark.asyncio
async def test_a_policy_of_token_caps_alone_says_nothing_of_prices(server) -> None:
    server.plan(Reply(text="Hello."))
    h = Harness(HarnessConfig(cost=CostPolicy(max_output_tokens=1000)), load_entry_points=False, environ={})
    agent = make_agent(real_model(server, "my-llm"), [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "hi")
    assert [d for d in h.last_report(agent).decisions if d.action == "unpriced_model"] == []


@pytest.mark.parametrize("field, value", [
    ("fallback_text", ""), ("fallback_text", "   "), ("model_error_text", ""), ("model_error_text", "\n"),
])
def test_a_blank_answer_text_is_refused_naming_its_field(field: str, value: str) -> None:
    """Doc note of round 152 d: a blank `fallback_text` or `model_error_text` was taken, so
    a stopped or failed run answered its user with nothing."""
    with pytest.raises(ValueError, match=f"{field}[\\s\\S]*blank text"):
        HarnessConfig(**{field: value})
    with pytest.raises(ValueError, match="fallback_text[\\s\\S]*blank text"):
        CostPolicy(fallback_text=value)
