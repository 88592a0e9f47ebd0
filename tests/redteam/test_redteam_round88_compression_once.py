"""Red team, round 88 (on rounds 85-87). A model class that overrides ``generate_structured_output`` (a user's
wrapper adding logging, calling ``super()``): AgentScope's compression then
goes through TWO guarded wrappers, the override's (wrapped at the
compression, as before) and now ``ChatModelBase``'s (wrapped at the Harness's
construction). Inside ``_COMPRESSION`` both guard it: one summary request is
counted twice in ``model_calls`` and charged twice."""

from typing import Any

from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig

SUMMARY = {"task_overview": "t", "current_state": "c", "important_discoveries": "d", "next_steps": "n",
           "context_to_preserve": "p"}


class LoggingModel(ScriptedModel):
    """A user's model that logs its structured-output requests."""

    structured: int = 0

    async def generate_structured_output(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        type(self).structured += 1
        return await super().generate_structured_output(messages, *args, **kwargs)


async def page(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return "lorem ipsum dolor sit amet " * 1000


async def test_one_compression_request_is_one_model_call() -> None:
    model = LoggingModel([calls(("page", {"url": "http://x"}), inp=1000, out=10),
                          calls(("generate_structured_output", SUMMARY), inp=1000, out=10),
                          text("Here is the page.", inp=1000, out=10)], model="m")
    model.context_size = 4000
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=100.0, prices={"m": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(model, [page], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "fetch it")
    report = h.last_report(agent)
    api_requests = len(model.calls)  # every request the provider received
    assert LoggingModel.structured == 1 and api_requests == 3
    assert report.model_calls == api_requests, (report.model_calls, api_requests)
    assert abs(report.spent_usd - 3 * 1010 / 1e6) < 1e-9, report.spent_usd


async def test_three_requests_fit_max_model_calls_3() -> None:
    LoggingModel.structured = 0
    model = LoggingModel([calls(("page", {"url": "http://x"}), inp=1000, out=10),
                          calls(("generate_structured_output", SUMMARY), inp=1000, out=10),
                          text("Here is the page.", inp=1000, out=10)], model="m")
    model.context_size = 4000
    h = Harness(HarnessConfig(max_model_calls=3), load_entry_points=False, environ={})
    agent = make_agent(model, [page], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "fetch it")
    report = h.last_report(agent)
    assert len(model.calls) == 3, len(model.calls)
    assert final.get_text_content() == "Here is the page.", (report.terminal_state, report.reason,
                                                              final.get_text_content()[:100])
