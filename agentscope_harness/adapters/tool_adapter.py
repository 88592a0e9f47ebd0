"""HarnessToolAdapter: the tool side. ``pre_tool_call`` hooks judge the call
before it runs, ``post_tool_call`` hooks shape its result.

The AgentScope contract it keeps (AGENTSCOPE2 §10): ``on_acting`` never
raises, consumes ``next_handler`` to the end and yields exactly one
``ToolResponse``. A refused call is answered with a sentinel in state
``DENIED``; the tool table sent to the model never changes.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from agentscope.message import DataBlock, TextBlock, ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolChunk, ToolMiddlewareBase, ToolResponse

from ..context import HookContext, ToolCallView, ToolResultView
from ..errors import METADATA_KEY, ErrorClass, classify_exception, error_class_of
from ..sentinels import format_sentinel
from .agent_adapter import run_of

if TYPE_CHECKING:
    from ..harness import Harness
    from ..run_state import RunState

log = logging.getLogger("agentscope_harness")

_STATES = {s.value: s for s in ToolResultState}
_STATE_NAMES = {s: str(s.value) for s in ToolResultState}


def _state_name(state: Any) -> str:
    """A response's state as its plain string value."""
    name = _STATE_NAMES.get(state)
    return name if name is not None else str(getattr(state, "value", state))


def parse_args(raw: str) -> tuple[dict[str, Any], bool]:
    """The call's arguments as a dict, and whether they parsed cleanly."""
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        try:
            import json_repair

            value = json_repair.loads(raw)
        except Exception:  # noqa: BLE001 - unparseable: judge with no args
            return {}, False
        return (value, False) if isinstance(value, dict) else ({}, False)
    return (value, True) if isinstance(value, dict) else ({}, False)


class HarnessToolAdapter(MiddlewareBase):
    """The tool-side middleware (second of ``harness.middlewares()``)."""

    def __init__(self, harness: "Harness") -> None:
        self.harness = harness

    async def get_middleware_key(self) -> str:
        """Distinct from other middlewares' keys in ``middle_context``."""
        return "agentscope_harness.tool"

    async def on_acting(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Judge, run and shape one tool call; always exactly one response."""
        harness = self.harness
        if not harness.enabled:
            async for item in next_handler(**input_kwargs):
                yield item
            return
        # used without the agent adapter, no on_reply opened a run: open one
        run = run_of(harness, agent) or await harness.tool_only_run(agent)
        call = input_kwargs["tool_call"]
        try:
            response = await self._handle(agent, run, call, input_kwargs, next_handler)
        except Exception as exc:  # noqa: BLE001 - never raise out of on_acting
            log.exception("harness tool adapter failed on %s", call.name)
            harness._record(
                run, "tool_adapter", "post_tool_call", "error",
                code="policy_error", tool=call.name, detail=f"{type(exc).__name__}: {exc}",
            )
            text = format_sentinel(
                "policy_error",
                f"The call to {call.name} could not be completed safely. "
                "Do not retry it; tell the user.",
            )
            run.remember_sentinel("policy_error", text)
            run.in_flight.pop(call.id, None)
            response = ToolResponse(
                id=call.id, content=[TextBlock(text=text)], state=ToolResultState.ERROR,
                metadata={METADATA_KEY: {"code": "policy_error"}},
            )
        text_blocks = [b for b in response.content if isinstance(b, TextBlock)]
        if text_blocks:  # the response's id: no fresh id to generate per call
            yield ToolChunk(content=text_blocks, state=ToolResultState.RUNNING, id=response.id)
        yield response

    async def _handle(
        self,
        agent: Any,
        run: "RunState",
        call: Any,
        input_kwargs: dict,
        next_handler: Callable[..., AsyncGenerator],
    ) -> ToolResponse:
        harness = self.harness
        args, valid = parse_args(call.input)
        view = ToolCallView(
            id=call.id,
            name=call.name,
            args=args,
            raw_input=call.input,
            policy=harness.config.tools.get(call.name),
            batch=(agent.state.reply_id, agent.state.cur_iter),
            args_valid=valid,
        )
        ctx = HookContext("pre_tool_call", run, harness, agent, tool=view)
        run.facts.recent_tools.append(call.name)
        refusal = await harness.runner.run("pre_tool_call", ctx)

        original: ToolResponse | None = None
        data: list[DataBlock] = []
        if refusal is not None:
            run.remember_sentinel(refusal.code, refusal.text)
            ctx.result = ToolResultView(
                text=refusal.text, state="denied", metadata={},
                error_class=refusal.code, refused=True,
            )
            ctx.attach_pending_notices()
        else:
            run.facts.called_tools[call.name] += 1
            run.in_flight[call.id] = call.name
            async for item in next_handler(**input_kwargs):
                if isinstance(item, ToolResponse):
                    original = item
            if original is None:
                original = ToolResponse(
                    id=call.id, state=ToolResultState.ERROR,
                    content=[TextBlock(text=f"{call.name} produced no result.")],
                )
            if original.state != ToolResultState.INTERRUPTED:
                run.in_flight.pop(call.id, None)
            content = original.content
            if len(content) == 1 and type(content[0]) is TextBlock:  # the usual result
                text = content[0].text
            else:
                text = "".join(b.text for b in content if isinstance(b, TextBlock))
                data = [b for b in content if isinstance(b, DataBlock)]
            state = _state_name(original.state)
            error_class = error_class_of(original.metadata, text) if state == "error" else None
            result = ctx.result = ToolResultView(
                text=text, state=state, metadata=dict(original.metadata),
                error_class=error_class, has_data=bool(data), raw_text=text,
            )
            if error_class == ErrorClass.DEPENDENCY_DOWN:
                dependency = result.harness_meta.get("dependency") or call.name
                line = format_sentinel(
                    "dependency_down",
                    f"{dependency} is unavailable. Do not retry; tell the user.",
                )
                run.remember_sentinel("dependency_down", line)
                run.facts.dependency_down.add(call.name)
                result.notices.append(line)
                # DependencyDown's own message starts with the same sentinel:
                # keep only its cause, not a second (defanged) copy
                if text.startswith("[harness:dependency_down]"):
                    result.text = text.partition("tell the user.")[2].strip(" ()")
            else:
                ctx.attach_pending_notices()
            # an identical repeat of a call that already succeeded brings no
            # new facts (its results are already counted)
            if result.ok and view.digest not in run.facts.succeeded:
                counted = (
                    await _count_results(view, text)
                    if view.policy is not None and view.policy.count_results is not None
                    else None
                )
                result.new_facts = run.facts.record_result_facts(
                    view.role, True, text, result.harness_meta, counted,
                )

        ctx.point = "post_tool_call"
        post_refusal = await harness.runner.run("post_tool_call", ctx)
        result = ctx.result
        if post_refusal is not None:
            run.remember_sentinel(post_refusal.code, post_refusal.text)
            result.text, result.notices, result.state, data = post_refusal.text, [], "error", []
        if not result.refused:
            run.facts.record_outcome(
                call.name, view.digest, args, call.id, result.ok,
                str(getattr(result.error_class, "value", result.error_class) or "tool_error")
                if result.state == "error" else None,
            )
        if harness.shadow and original is not None:
            return original
        if (  # nothing to say: the tool's own response, blocks and metadata untouched
            original is not None and post_refusal is None and not result.refused
            and not result.notices and not result.error_class
            and result.text == result.raw_text
            and result.state == _state_name(original.state)
        ):
            return original
        body = "\n".join(p for p in [result.text, *result.notices] if p)
        meta = dict(original.metadata) if original is not None else {}
        own = dict(meta.get(METADATA_KEY) or {})
        if result.refused:
            own["code"] = result.error_class
        elif result.error_class:
            own["error_class"] = str(getattr(result.error_class, "value", result.error_class))
        if own:  # stamp the run only where the harness has something to say
            own["run_id"] = run.run_id
            meta[METADATA_KEY] = own
        return ToolResponse(
            id=original.id if original is not None else call.id,
            content=[_text_block(body, original), *data] if body or not data else data,
            state=_STATES.get(result.state, ToolResultState.ERROR)
            if not result.refused else ToolResultState.DENIED,
            metadata=meta,
        )


def _text_block(text: str, original: ToolResponse | None) -> TextBlock:
    """The block the model reads. It takes the id and timestamp of the tool's
    own first text block, which it replaces (that block never left the
    harness), instead of generating new ones on every call."""
    if original is not None:
        for block in original.content:
            if isinstance(block, TextBlock):
                return TextBlock(text=text, id=block.id, created_at=block.created_at)
    return TextBlock(text=text)


async def _count_results(view: ToolCallView, text: str) -> int | None:
    """The policy's ``count_results`` on a successful result (``None``: not
    configured, or it failed: the defaults apply)."""
    counter = view.policy.count_results if view.policy is not None else None
    if counter is None:
        return None
    try:
        value = counter(text)
        if inspect.isawaitable(value):
            value = await value
        return int(value)
    except Exception:  # noqa: BLE001 - a counting bug must not fail the call
        log.exception("count_results of %s failed", view.name)
        return None


class ErrorClassMiddleware(ToolMiddlewareBase):
    """Tool-level middleware keeping the class of a tool's exception, which
    AgentScope would reduce to ``str(e)``: ``metadata["harness"]["error_class"]``."""

    async def on_tool_call(
        self, tool: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Re-yield the tool's chunks; turn an exception into a classified error."""
        try:
            async for chunk in next_handler(**input_kwargs):
                yield chunk
        except Exception as exc:
            if type(exc).__name__ in ("DeveloperOrientedException",):
                raise
            error_class = classify_exception(exc)
            meta = {"error_class": error_class.value, "exc_type": type(exc).__qualname__}
            dependency = getattr(exc, "dependency", None)
            if dependency:
                meta["dependency"] = dependency
            yield ToolChunk(
                content=[TextBlock(text=str(exc) or type(exc).__name__)],
                state=ToolResultState.ERROR,
                metadata={METADATA_KEY: meta},
            )


def instrument_toolkit(toolkit: Any, middleware: ToolMiddlewareBase) -> None:
    """Prepend ``middleware`` to every tool registered in ``toolkit``.

    AgentScope has no public way to add a middleware to a tool that already
    exists; this is the one place that touches its private ``_middlewares``
    list (a test fails loudly if AgentScope renames it).
    """
    for group in getattr(toolkit, "tool_groups", []):
        for tool in group.tools:
            chain = getattr(tool, "_middlewares", None)
            if chain is None:
                raise RuntimeError(
                    f"cannot instrument tool {getattr(tool, 'name', tool)!r}: AgentScope's "
                    "ToolBase no longer has _middlewares; use harness.tool_middleware() "
                    "when building the tool",
                )
            if not any(isinstance(m, ErrorClassMiddleware) for m in chain):
                chain.insert(0, middleware)
