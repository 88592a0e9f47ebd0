"""Every decision is also an OpenTelemetry span event on the current span."""

from __future__ import annotations

import pytest
from scripted import ScriptedModel, calls, decisions, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, Prerequisite, Principal, ToolPolicy

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ran: list[str] = []


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        user_id (str): The customer.
    """
    ran.append(order_id)
    return f"cancelled {order_id}"


def harness() -> Harness:
    return Harness(HarnessConfig(tools={
        "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}),
    }), load_entry_points=False)


def script() -> ScriptedModel:
    return ScriptedModel([
        calls(("cancel_order", {"order_id": "A-9", "user_id": "u-77"})),
        text("I can't cancel that order."),
    ])


async def test_refusal_becomes_a_span_event_on_the_current_span():
    ran.clear()
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("shop-backend")
    h = harness()
    agent = make_agent(script(), [cancel_order], h.middlewares())

    with tracer.start_as_current_span("POST /chat"):
        with h.acting_for(Principal(user_id="u-42")):
            events, _ = await run(agent, "cancel A-9 for u-77")

    assert ran == []
    [span] = exporter.get_finished_spans()
    harness_events = [e for e in span.events if e.name == "harness.decision"]
    refusals = [e for e in harness_events if e.attributes["harness.action"] == "refuse"]
    assert len(refusals) == 1
    attrs = refusals[0].attributes
    assert attrs["harness.code"] == "permission_denied"
    assert attrs["harness.hook"] == "authorization_gate"
    assert attrs["harness.tool"] == "cancel_order"
    assert attrs["harness.point"] == "pre_tool_call"
    assert attrs["harness.enforced"] is True
    assert attrs["harness.run_id"] == h.last_report(agent).run_id
    # the same decisions as in the reply stream and the report, in order
    stream = [(d["hook"], d["action"]) for d in decisions(events)]
    assert [(e.attributes["harness.hook"], e.attributes["harness.action"])
            for e in harness_events] == stream
    assert len(stream) == len(h.last_report(agent).decisions)


async def test_without_a_recording_span_nothing_breaks():
    ran.clear()
    h = harness()
    agent = make_agent(script(), [cancel_order], h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        _, final = await run(agent, "cancel A-9 for u-77")
    assert ran == []
    assert h.last_report(agent).refusals == {"permission_denied": 1}
    assert final.get_text_content() == "I can't cancel that order."


def _global_sdk_provider():
    """The global SDK TracerProvider (set once per process, as an app would)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        trace.set_tracer_provider(sdk_trace.TracerProvider())
        provider = trace.get_tracer_provider()
    return provider


async def test_agentscope_tracing_spans_show_why_a_call_was_refused():
    from agentscope.middleware import TracingMiddleware

    ran.clear()
    exporter = InMemorySpanExporter()
    _global_sdk_provider().add_span_processor(SimpleSpanProcessor(exporter))
    h = harness()
    agent = make_agent(script(), [cancel_order], [TracingMiddleware(), *h.middlewares()])
    with h.acting_for(Principal(user_id="u-42")):
        await run(agent, "cancel A-9 for u-77")
    exporter.shutdown()

    assert ran == []
    spans = exporter.get_finished_spans()
    assert spans, "AgentScope's TracingMiddleware recorded no span"
    carrying = [
        (s.name, e.attributes) for s in spans for e in s.events
        if e.name == "harness.decision" and e.attributes["harness.action"] == "refuse"
    ]
    assert len(carrying) == 1
    span_name, attrs = carrying[0]
    assert attrs["harness.code"] == "permission_denied"
    assert attrs["harness.tool"] == "cancel_order"
    # judged at AgentScope's permission point, which opens no span of its own:
    # the refusal is on the agent's span of the reply
    assert span_name == "invoke_agent shop", (span_name, [s.name for s in spans])


async def test_span_events_and_log_lines_carry_the_scrubbed_detail(caplog: pytest.LogCaptureFixture):
    """Red team: the report's decision detail was scrubbed, the span event's
    and the log line's were the raw one: a key and an e-mail address the model
    put in a refused call's arguments reached the tracing backend and the logs."""
    ran.clear()
    key, email = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ", "jane.doe@example.com"
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("shop-backend")
    h = Harness(HarnessConfig(tools={
        "lookup_order": ToolPolicy(role="lookup"),
        "cancel_order": ToolPolicy(role="mutation", requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])]),
    }), load_entry_points=False)  # the prerequisite's refusal quotes the argument
    model = ScriptedModel([calls(("cancel_order", {"order_id": f"{key} {email}", "user_id": "u-42"})), text("no")])
    agent = make_agent(model, [cancel_order], h.middlewares())
    with caplog.at_level("INFO", logger="agentscope_harness"), tracer.start_as_current_span("POST /chat"):
        with h.acting_for(Principal(user_id="u-42")):
            await run(agent, "cancel it")
    [span] = exporter.get_finished_spans()
    details = [str(e.attributes["harness.detail"]) for e in span.events if e.name == "harness.decision"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert any("[redacted:" in d for d in details)
    for leak in (key, email):
        assert not any(leak in d for d in details) and leak not in logged


async def test_a_failing_hooks_log_line_is_scrubbed(caplog: pytest.LogCaptureFixture):
    """Red team (second pass): a hook's exception message quoting the call
    went raw into the warning line that the failure logs."""
    from agentscope_harness import HookContext, harness_hook

    key = "sk-proj-" + "Zx9dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ"

    @harness_hook("pre_tool_call", priority=25, name="backend_check", kind="safety")
    def backend_check(ctx: HookContext) -> None:
        raise RuntimeError(f"backend rejected {ctx.tool.args}")

    ran.clear()
    h = Harness(HarnessConfig(), hooks=[backend_check], load_entry_points=False)
    model = ScriptedModel([calls(("cancel_order", {"order_id": key, "user_id": "u-42"})), text("no")])
    agent = make_agent(model, [cancel_order], h.middlewares())
    with caplog.at_level("INFO", logger="agentscope_harness"), h.acting_for(Principal(user_id="u-42")):
        await run(agent, "cancel it")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert ran == [] and "backend_check" in logged and "[redacted:" in logged and key not in logged
