"""Arguments the model got wrong: AgentScope answers a call whose arguments
do not parse or do not match the tool's schema with its raw parser or
``jsonschema`` message, before any permission point or middleware sees the
call. The model often repeats the mistake on that text. The harness turns
that result, in the context and before the model reads it, into a sentinel
that says what to send: every problem, then the argument list with types,
and for an identity argument the bound principal's own value.

The call is judged again with AgentScope's own parser and validator (the
ones that refused it), so the sentinel describes exactly what was refused.
AgentScope's own tools (``GenerateStructuredOutput``, ``CompressContext``)
keep AgentScope's text: their retry loop is written against it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jsonschema
from agentscope._utils._common import _json_loads_with_repair
from agentscope.exception import AgentOrientedException
from agentscope.message import ToolCallBlock, ToolResultBlock, ToolResultState

from .calls import UNGATED_TOOLS, tool_run_as
from .hooks.termination import undelivered
from .outputs import quoted_pii, quoted_shown
from .sentinels import format_sentinel, neutralise_markers, unusable_by

if TYPE_CHECKING:
    from .config import ToolPolicy
    from .harness import Harness
    from .run_state import RunState

_REFUSALS = (
    "Input validation failed for tool ",
    "Error: Failed to parse your tool arguments",
    "Error: Your argument string is decoded",
    "Error: When decoding your tool arguments",
    "Error: NaN and Infinity are not valid JSON numbers.",
)
"""How AgentScope's refusals of arguments begin (``_execute_tool_call`` and
``_json_loads_with_repair``): its own words, written before any tool ran."""
_QUOTING = (*_REFUSALS, "ToolNotFoundError: ")
"""AgentScope's answers to a call no gate judged that quote the model's
words (its arguments, the tool name it wrote)."""
CODE = "bad_arguments"
"""The sentinel code of a call refused for its arguments (DESIGN §3.2); the
error class of such a failure is ``invalid_arguments`` (§6.2)."""
MAX_PROBLEMS = 4
"""Problems listed in one sentinel (the rest are counted)."""
_PROBLEM_CHARS = 160
"""A problem is cut to this length: it may quote what the model sent."""
_READ_CHARS = 4096
"""Of a problem, this much is filtered before the cut (far past it, so a
secret that starts before the cut is whole when it is redacted)."""


async def guide_invalid_arguments(harness: Harness, agent: Any, run: RunState, call_id: str) -> None:
    """Rewrite the ERROR result of call ``call_id`` when its arguments were
    refused by AgentScope's parser or schema check; leave any other error."""
    result, call = _blocks(agent, call_id)
    if result is None or call is None or result.state != ToolResultState.ERROR:
        return
    if call.name in UNGATED_TOOLS:  # AgentScope's own tools: their retry text is its contract
        return
    if not isinstance(result.output, str) or not _refused(result.output):
        return  # another error (an inactive tool group, the tool itself): AgentScope's words stand
    if call.name in harness.finish_tools:
        undelivered(run.facts)  # a finishing call refused for its arguments delivers nothing
    tool = await tool_run_as(agent, call.name)
    schema = getattr(tool, "input_schema", None)
    if not isinstance(schema, dict):
        return
    policy = harness.config.tools.get(call.name)
    problems = [_shown(p, harness, run, policy) for p in _problems(call.input, schema)]
    if not problems:
        return
    code, text = _guide(call.name, problems, schema, policy, run, harness.services.redactor.redact)
    denied = code == "permission_denied"  # a refusal, met again as any gate's is: the ladder counts it
    shadow = harness.services.shadow
    if not shadow:
        result.output = text
        run.remember_sentinel(code, text)
    if denied:  # shadow mode's too: its report ends as enforcing would
        met = ("argument_guide", code, call.name)
        run.facts.refused.append(met)
        if policy is not None and policy.identity_args:  # as the gate's: its lead meets it too
            run.met_by_enclosing_runs(met, enforced=not shadow)
    harness.services.record(
        run, "argument_guide", "post_tool_call", "refuse" if denied else "rewrite", code=code, tool=call.name,
        detail="; ".join(problems),
    )


def _guide(
    tool: str, problems: list[str], schema: dict[str, Any], policy: ToolPolicy | None, run: RunState,
    redact: Callable[[str], str],
) -> tuple[str, str]:
    """The code and sentinel of a call refused for its arguments: how to
    call it again, unless the bound caller cannot use the tool whatever its
    arguments (then no call of it is offered)."""
    identity = policy.identity_args if policy is not None else {}
    unusable = unusable_by(tool, run.principal, identity)
    if unusable is not None:
        return "permission_denied", format_sentinel("permission_denied", unusable)
    return CODE, _sentinel(tool, problems, schema, identity, run, redact)


def refusal_shown(harness: Harness, agent: Any, run: RunState, call_id: str, text: str) -> str:
    """A streamed result ``text`` as the user is shown it: AgentScope's
    answer to a call no gate judged (its refusal of the arguments, of an
    unknown tool's name) quotes what the model sent, so its personal data
    is rewritten as the streamed arguments' and the model's copy's are
    (``quoted_pii``); any other text (a tool's result, shaped as the model
    read it) as it is. Told by AgentScope's own words, not by which calls
    this process judged (a call judged before a park elsewhere is not)."""
    if not _refused(text, _QUOTING):
        return text
    _, call = _blocks(agent, call_id)
    modes, salt = quoted_pii(harness.config, harness.config.tools.get(call.name) if call else None, run)
    return quoted_shown(text, modes, salt)


def quotes_the_call(text: str) -> bool:
    """Whether a result's text is AgentScope's answer to a call no gate
    judged that quotes the model's words (``refusal_shown`` rewrites it)."""
    return _refused(text, _QUOTING)


def _refused(text: str, openings: tuple[str, ...] = _REFUSALS) -> bool:
    """Whether a result's text is AgentScope's refusal of the arguments (or
    begins with another of its ``openings``)."""
    return text.removeprefix("<system-reminder>").startswith(openings)


def _blocks(agent: Any, call_id: str) -> tuple[ToolResultBlock | None, ToolCallBlock | None]:
    """The call's result and the call itself, newest first in the context."""
    result = call = None
    for msg in reversed(agent.state.context):
        if isinstance(msg.content, str):
            continue
        for block in reversed(msg.content):  # a call and its result share a message
            if block.type == "tool_result" and block.id == call_id and result is None:
                result = block
            elif block.type == "tool_call" and block.id == call_id:
                return result, block
    return result, call


def _problems(raw: str, schema: dict[str, Any]) -> list[str]:
    """What AgentScope refused in ``raw``: a parse failure, or every schema
    error (most specific first); empty when the arguments are valid."""
    try:
        parsed = _json_loads_with_repair(raw, schema)
    except AgentOrientedException as exc:
        nan = "NaN and Infinity" in str(exc)
        return ["NaN and Infinity are not valid JSON numbers" if nan else "the arguments are not a JSON object"]
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(parsed), key=lambda e: (len(e.path), e.message))
    return [_problem(e) for e in errors]


def _problem(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.path)
    return f"{where}: {error.message}" if where else error.message


def _shown(problem: str, harness: Harness, run: RunState, policy: ToolPolicy | None) -> str:
    """A problem as the model may read it: it quotes what the model sent,
    so markers are defanged, secrets redacted and personal data rewritten,
    all before it is cut (a cut never splits a secret)."""
    # a huge argument is quoted whole by jsonschema: only its start is read
    text = harness.services.redactor.redact(" ".join(neutralise_markers(problem[:_READ_CHARS]).split()))
    modes, salt = quoted_pii(harness.config, policy, run)
    text = quoted_shown(text, modes, salt)
    return text[:_PROBLEM_CHARS] + ("…" if len(text) > _PROBLEM_CHARS else "")


def _sentinel(
    tool: str, problems: list[str], schema: dict[str, Any], identity: dict[str, str], run: RunState,
    redact: Callable[[str], str],
) -> str:
    shown = problems[:MAX_PROBLEMS]
    more = len(problems) - len(shown)
    said = "; ".join(shown) + (f" (and {more} more)" if more else "")
    return format_sentinel(
        CODE,
        f"{tool} was not run: {said}. Call it again with {_template(schema, identity, run, redact)}.",
    )


def _template(schema: dict[str, Any], identity: dict[str, str], run: RunState, redact: Callable[[str], str]) -> str:
    """The arguments to send: required ones first, each with its type; an
    identity argument with the bound principal's value, its secrets
    redacted (a session token is the provider's to read no more than a
    result's: the authorization gate says it so too)."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name in sorted(properties, key=lambda n: (n not in required, n)):
        spec = properties[name] if isinstance(properties[name], dict) else {}
        value = _bound_value(name, identity, run)
        if value is not None:
            parts.append(f"{json.dumps(name)}: {redact(json.dumps(value))}")
            continue
        kind = spec.get("type") or ("one of " + ", ".join(map(json.dumps, spec["enum"])) if "enum" in spec else "any")
        parts.append(f"{json.dumps(name)}: <{kind}{'' if name in required else ', optional'}>")
    return "{" + ", ".join(parts) + "}"


def _bound_value(name: str, identity: dict[str, str], run: RunState) -> Any:
    attribute = identity.get(name)
    if attribute is None or run.principal is None:
        return None
    return run.principal.attr(attribute)


__all__ = ["MAX_PROBLEMS", "guide_invalid_arguments", "quotes_the_call", "refusal_shown"]
