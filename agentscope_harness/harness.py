"""Harness: owns the config, the hook list, the run table, the breaker and
the store, and hands out the two AgentScope middlewares."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import os
import re
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from importlib.metadata import entry_points
from typing import Any

from agentscope.model import ChatModelBase
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .adapters import HarnessAgentAdapter, HarnessToolAdapter
from .adapters.tool_adapter import ErrorClassMiddleware, instrument_toolkit
from .approvals import approval_digest
from .calls import CallFlow
from .candidate import Candidate
from .config import _UNSET, MIN_SECRET_CHARS, EnvFlags, HarnessConfig, build_config, env_secret, given
from .context import HookContext
from .errors import HarnessConfigError
from .facts import declared_in, tools_in
from .hooks import BUILTIN_HOOKS
from .hooks.safety import undeclared_identity_args
from .hooks.sequencing import undeclared_same_args
from .lifecycle import ReplyLifecycle, record_parked, run_deadline
from .model_guard import ModelGuard, billed_tokens, guard_structured_calls
from .outputs import json_spelling
from .redaction import Redactor
from .registry import HookSpec, collect
from .report import RunReport
from .run_state import RunLimits, RunState, RunTable, context_for, current_run, live_parent, same_caller
from .runner import HookRunner, being_cancelled
from .services import Breaker, Services
from .stores import LedgerStore, MemoryStore

ENTRY_POINT_GROUP = "agentscope_harness.hooks"

log = logging.getLogger("agentscope_harness")

_PRINCIPAL: ContextVar[Principal | None] = ContextVar("harness_principal", default=None)

class Principal(BaseModel):
    """The authenticated caller a run acts for. Identity comes only from here,
    never from tool arguments the model writes."""

    model_config = ConfigDict(extra="allow", frozen=True)

    user_id: str
    tenant: str | None = None
    allowed_tools: frozenset[str] | None = None

    def __init__(
        self, user_id: str = _UNSET, tenant: str | None = _UNSET, allowed_tools: Iterable[str] | None = _UNSET,
        **attrs: Any,
    ) -> None:
        # positional as DESIGN writes it: Principal("u-42", "acme")
        super().__init__(**given(user_id=user_id, tenant=tenant, allowed_tools=allowed_tools, **attrs))

    @model_validator(mode="after")
    def _attrs_are_data(self) -> Principal:
        """An extra attribute is kept in reports and park records (JSON): an
        application object there would fail every reply at its end, so it
        fails here, named."""
        _kept_in_reports(self)
        return self

    def may_use(self, tool: str) -> bool:
        """Whether ``allowed_tools`` lets this principal call ``tool`` (no
        list: any tool). A refusal never offers one it may not use."""
        return self.allowed_tools is None or tool in self.allowed_tools

    def attr(self, name: str) -> Any:
        """An identity attribute (``user_id``, ``tenant`` or an extra one)."""
        if name in type(self).model_fields:  # its own, or a subclass's declared field, as JSON carries it
            value = getattr(self, name)
            return value if value is None or type(value) is str else to_jsonable_python(value)
        return (self.model_extra or {}).get(name)

    @property
    def key(self) -> str:
        """Key of this principal's daily spend, limits and approvals in the
        store: ``<tenant>/<user_id>``, ``-`` for no tenant. One principal, one
        key: ``%`` and ``/`` in a part, and a tenant that is ``-`` itself, are
        escaped (``tenant="a/b", user_id="c"`` is not ``tenant="a", user_id="b/c"``)."""
        tenant = "-" if self.tenant is None else "%2D" if self.tenant == "-" else _key_part(self.tenant)
        return f"{tenant}/{_key_part(self.user_id)}"


def _kept_in_reports(principal: Principal) -> None:
    """Every field of ``principal`` is data a report can keep (JSON), else
    a ``ValueError`` naming it."""
    for name, value in principal:
        try:
            to_jsonable_python(value)
        except (PydanticSerializationError, ValueError, RecursionError) as exc:  # bytes not UTF-8, a cycle
            where, value = _unkept(repr(name), value)
            raise ValueError(
                f"Principal attribute {where}: a {type(value).__name__} is not data a report can keep "
                "(JSON); pass its id or plain values",
            ) from exc


def _unkept(where: str, value: Any, depth: int = 0) -> tuple[str, Any]:
    """Where inside ``value`` (a dict's key, a list's index, as far as
    they go: a cycle stops it) the first value a report cannot keep is,
    and that value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items if depth < _UNKEPT_DEPTH else ():
        try:
            to_jsonable_python(item)
        except (PydanticSerializationError, ValueError, RecursionError):
            return _unkept(f"{where}[{key!r}]", item, depth + 1)
    return where, value


_UNKEPT_DEPTH = 8
"""How deep an error about a principal's attribute points (a cycle would never end)."""


def _key_part(text: str) -> str:
    return text.replace("%", "%25").replace("/", "%2F") if "%" in text or "/" in text else text


class Harness:
    """The control plane around AgentScope agents.

    ``Harness(config, hooks=[...])`` builds the hook chain once (built-ins,
    your hooks, hook packs from the ``agentscope_harness.hooks`` entry point,
    minus disabled ones); ``candidate=other_config`` judges another policy in
    shadow beside it (see ``candidate.py``); ``middlewares()`` gives the two adapters for
    ``Agent(middlewares=...)``. Public: ``config``, ``middlewares``,
    ``tool_middleware``, ``instrument``, ``acting_for``, ``approve``,
    ``revoke``, ``approve_edit``, ``extend``, ``last_report``, ``reports``,
    ``hooks``. The rest is the adapters' plumbing.
    """

    def __init__(
        self,
        config: HarnessConfig | Mapping[str, Any] | None = None,
        hooks: Iterable[Any] = (),
        candidate: HarnessConfig | Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        load_entry_points: bool = True,
    ) -> None:
        self.env = EnvFlags.read(environ)
        self.config: HarnessConfig = _effective_config(build_config(config), self.env)
        if isinstance(hooks, (str, bytes, HookSpec)) or callable(hooks) or not isinstance(hooks, Iterable):
            raise HarnessConfigError(f"hooks: a list of hooks (or of hook packs), not {hooks!r}")
        specs = collect(BUILTIN_HOOKS) + collect(hooks)
        if load_entry_points:
            specs += _entry_point_hooks()
        self.all_hooks: tuple[HookSpec, ...] = _unique(specs)
        _check_disabled(self.all_hooks, self.env, self.config)
        self.hooks: tuple[HookSpec, ...] = tuple(
            s for s in self.all_hooks if s.name not in self.config.disabled_hooks
        )
        self.shadow = self.config.mode == "shadow"
        self.runner = HookRunner(
            self.hooks,
            escape_after_rejects=self.config.escape_after_rejects,
            hook_timeout_s=self.config.hook_timeout_s,
            shadow=self.shadow,
        )
        self.table = RunTable(loop_window=self.config.loop_window, limits=RunLimits.of(self.config))
        self.store: LedgerStore = self.config.store or MemoryStore()
        values = self.config.resolved_secret_values()
        self._secrets = set(values)  # every secret value seen (one too short or blank is seen, not taken)
        self.redactor = Redactor(self.config.redact_patterns, self.config.redact_window, values)
        spelled = [spelling for value in values if (spelling := json_spelling(value)) != value]
        self.args_redactor = (  # tool-call arguments: exact values also as JSON spells them
            Redactor(self.config.redact_patterns, self.config.redact_window, [*values, *spelled])
            if spelled else self.redactor
        )
        # the incident switch turns a hook off for the candidate too (its mode stays: it judges as if enforcing)
        switches = EnvFlags(disabled_hooks=self.env.disabled_hooks)
        candidate_config = None if candidate is None else _candidate_config(candidate, switches, self.all_hooks)
        self.services = Services.of(self.config, self.redactor, self.store, candidate_config)
        self.flow = CallFlow(self.services, self.runner)
        self.model_guard = self.table.guard = ModelGuard(self)
        guard_structured_calls(ChatModelBase)  # a middleware's own model calls are its runs' too
        self.candidate: Candidate | None = None
        if candidate_config is not None:
            self.candidate = self.runner.candidate = self.table.candidate = Candidate(
                candidate_config, self.all_hooks, self.services,
            )
        self.reports: deque[RunReport] = deque(maxlen=self.config.reports_kept)
        self._last_by_agent: weakref.WeakKeyDictionary[Any, RunReport] = weakref.WeakKeyDictionary()
        self._prompt_addition: str | None = None
        # the runs a prompt hook failed open in, and the text each got: asked again by the next run
        self._failed_open: weakref.WeakKeyDictionary[RunState, str] = weakref.WeakKeyDictionary()
        self._tool_only: weakref.WeakKeyDictionary[Any, list[str | None]] = (
            weakref.WeakKeyDictionary()
        )
        self.stream_redaction = any(s.name == "final_answer_audit" for s in self.hooks)

    def opened(self, run: RunState, agent: Any) -> None:
        """What a run learns as it opens, wherever it is opened: the
        ``secret_env`` values now, and a sub-agent's toolkit (whether it owes
        the finishing tool: ``outcome.owes_finish``)."""
        self.refresh_secrets()
        toolkit = getattr(agent, "toolkit", None)
        if run.parent is not None and toolkit is not None:
            run.toolkit = weakref.ref(toolkit)

    def refresh_secrets(self) -> None:
        """``secret_env`` read again as a run opens: a value set or rotated
        since construction is redacted from then on, and the values read
        before stay secrets (a rotated-out key is still one). A value too
        short to redact, or blank, is not taken (logged once: it would fail
        construction); the others are."""
        fresh = []
        for name in self.config.secret_env:
            value = env_secret(os.environ.get(name, ""))
            if not value or value in self._secrets:
                continue
            self._secrets.add(value)
            if len(value) < MIN_SECRET_CHARS:  # seen, said once
                log.warning("harness secret_env: the value of %s is too short to redact; not taken", name)
                continue
            fresh.append(value)
        if fresh:
            self.redactor.learn(fresh)
            self.args_redactor.learn([*fresh, *map(json_spelling, fresh)])

    @property
    def enabled(self) -> bool:
        """False when ``HARNESS_ENABLED=0``: ``middlewares()`` is empty."""
        return self.env.enabled

    @property
    def breakers(self) -> dict[str, Breaker]:
        """This process's view of each tool's circuit breaker (what its runs'
        calls saw). With a store that holds breakers (every built-in store)
        the store decides, fleet-wide; this view decides while the store
        cannot answer."""
        return self.services.breakers

    @property
    def finish_tools(self) -> frozenset[str]:
        """Tools whose success ends the run."""
        return self.services.finish_tools

    # ------------------------------------------------------------ public API

    def middlewares(self) -> list[Any]:
        """``[HarnessAgentAdapter, HarnessToolAdapter]`` for
        ``Agent(middlewares=...)``; none at all under ``HARNESS_ENABLED=0``."""
        if not self.enabled:
            return []
        return [HarnessAgentAdapter(self), HarnessToolAdapter(self)]

    def tool_middleware(self) -> Any:
        """A tool-level middleware keeping a tool's exception class (for
        ``FunctionTool(..., middlewares=[harness.tool_middleware()])``)."""
        return ErrorClassMiddleware()

    def instrument(self, toolkit: Any) -> Any:
        """Add the error-class middleware to every tool already in
        ``toolkit``, and check each ``identity_args`` and prerequisite's
        ``same_args`` against the schemas of the tools there (a name a tool
        does not declare is a check of a value the tool never reads). Under
        ``HARNESS_ENABLED=0`` the toolkit is left as it is (checked all the same).
        A candidate policy's names are checked too (its error says so). A
        tool the config names that ``toolkit`` lacks is logged, with the
        nearest name there (a typo: its policy, identity binding or limit
        would never apply), not refused: it may be added later, or be
        another agent's (one Harness may serve agents whose toolkits differ,
        ``get_order`` beside ``get_orders``)."""
        _check_tool_names(self.config, toolkit)
        _check_declared_args(self.config, toolkit)
        if self.candidate is not None:
            try:
                _check_declared_args(self.candidate.config, toolkit)
            except HarnessConfigError as exc:
                raise HarnessConfigError(f"candidate policy: {exc}") from exc
        if self.enabled:
            instrument_toolkit(toolkit, self.tool_middleware())
        return toolkit

    @contextlib.contextmanager
    def acting_for(self, principal: Principal | None) -> Iterator[Principal | None]:
        """Bind the authenticated caller for replies run inside this block
        (one a report cannot keep, an application object in a field or put
        there by ``model_copy``, fails here, named, not every reply at its end).
        Bound inside a run that acts for another caller (a shared worker a
        tool started, serving everyone), the block is not that run's work:
        its replies are tasks of their own, outside the run's caps and stop
        (timed by its deadline while it runs, which cuts the tool); the run's
        own caller, or none, bound again inside is the run's work once more."""
        if principal is not None:
            _kept_in_reports(principal)
        token = _PRINCIPAL.set(principal)
        put_back = context_for(principal.key if principal is not None else None)
        try:
            yield principal
        finally:
            if put_back is not None:
                put_back()
            _PRINCIPAL.reset(token)

    def approve(
        self,
        principal: Principal,
        session_id: str | None,
        tool: str,
        *,
        when: Callable[[dict[str, Any]], Any] | None = None,
        ttl_s: float = 3600.0,
    ) -> None:
        """Remember a human's "always allow ``tool`` for this session":
        calls of ``tool`` the harness would ask about (``ask_when``,
        ``ctx.ask``) run without asking for ``principal`` in ``session_id``
        while ``when(args)`` holds (sync or async; always when ``None``),
        for ``ttl_s`` seconds. Never covers a budget extension, another
        principal or another session."""
        self.services.approvals.grant(principal, session_id, tool, when, ttl_s)

    def revoke(self, principal: Principal, session_id: str | None, tool: str | None = None) -> None:
        """Forget remembered approvals of ``tool`` (every tool when ``None``)."""
        self.services.approvals.revoke(principal, session_id, tool)

    def approve_edit(self, agent: Any, tool_call: Any, args: dict[str, Any]) -> Any:
        """A human edited a parked call before approving it: returns the
        ``ToolCallBlock`` to confirm (in ``ConfirmResult(tool_call=...)``),
        and records the edited arguments as the ones the human approved.
        Must run under ``acting_for`` the principal who parked the call; a
        confirmation carrying any other arguments is refused as
        ``approval_mismatch``. The edited call is judged by every gate; its
        tool is the one the human was shown (an edit changes arguments only)."""
        run = self.table.get(agent.state.reply_id)
        shown = run.approvals.get(tool_call.id) if run is not None else None
        if run is None or shown is None:
            raise ValueError(f"tool call {tool_call.id!r} is not waiting for approval")
        if not same_caller(self.current_principal(), run.principal):
            raise PermissionError("only the caller who parked this call may edit it")
        if tool_call.name != shown[0]:
            raise ValueError(f"tool call {tool_call.id!r} was parked as {shown[0]!r}, not {tool_call.name!r}")
        text = json.dumps(args, ensure_ascii=False)
        run.approvals[tool_call.id] = (shown[0], approval_digest(shown[0], json.loads(text)))
        return tool_call.model_copy(update={"input": text})

    def extend(self, agent: Any, usd: float) -> None:
        """Approve ``usd`` more for ``agent``'s run that parked on its budget
        (``CostPolicy(on_exhausted="ask")``): the next reply of the caller
        whose run parked continues with the extension, recorded in that run's
        ``RunReport.extensions`` with the principal bound here as
        ``approved_by``. Another caller's reply to the same agent is a task
        of its own and takes neither. When several callers' runs wait, the
        bound principal says whose."""
        self.services.approvals.extend(agent, usd, self.current_principal())

    def decline(self, agent: Any) -> None:
        """Decline to extend ``agent``'s run that parked on its budget: the
        agent's next reply is a new task with a budget of its own (until
        then, every reply continues the spent budget and asks again, so a
        new message never resets it by itself); the daily quota still binds."""
        self.services.approvals.decline(agent, self.current_principal())

    def last_report(self, agent: Any) -> RunReport | None:
        """The report of ``agent``'s most recent finished run."""
        try:
            return self._last_by_agent.get(agent)
        except TypeError:
            return None

    # ------------------------------------------------------------ plumbing

    @staticmethod
    def recorded_principal(data: Any) -> Principal | None:
        """A principal as a park record keeps it (its ``model_dump``);
        ``None`` for none, or one that does not read back."""
        try:
            return Principal.model_validate(data) if data else None
        except ValueError:
            return None

    def current_principal(self) -> Principal | None:
        """The principal bound by ``acting_for`` in this context."""
        return _PRINCIPAL.get()

    def caller_principal(self, run: RunState | None = None) -> Principal | None:
        """Who calls here, for ``run`` (opening it with the tool adapter
        alone, or resuming it): the bound principal, else the principal of
        the live run in whose context this happens (a sub-agent run by its
        lead's tool inherits the lead's, as when the agent adapter opens it)."""
        principal = _PRINCIPAL.get()
        if principal is None:
            live = live_parent(run.run_id if run is not None else "")  # not itself, not settled nor parked
            if live is not None:
                principal = live.principal
        return principal

    async def system_prompt_addition(self) -> str:
        """What ``on_system_prompt`` hooks append: a pure function of the
        config (judged on a run of their own: no principal, no run facts), so
        the prompt is byte-stable, computed once per Harness, bounded by the
        asking run's deadline. A safety hook that refuses or fails stops the
        asking run (its model call not made) and is asked again by the next
        run, as is a hook that failed open (that run goes without its text):
        only a clean pass is kept. The hooks' decisions are the asking run's,
        in its report."""
        if self._prompt_addition is not None:
            return self._prompt_addition
        asking = current_run()
        if asking is not None and asking in self._failed_open:
            return self._failed_open[asking]  # asked again by the next run, not at each prompt of this one
        scratch = RunTable(loop_window=self.config.loop_window).open(
            "system_prompt", "", None, None, None, None, self.config.mode,
        )
        scratch.set_deadline(asking.deadline if asking is not None else None)
        ctx = HookContext("on_system_prompt", scratch, self.services)
        refusal = await self.runner.run("on_system_prompt", ctx)
        # each addition a paragraph of its own (the harness's rules open with one)
        addition = "".join(f"\n\n{part.lstrip(chr(10))}" for part in ctx.prompt_addition)
        failed = any(d.action == "error" for d in scratch.decisions)  # a hook that failed open: asked again
        clean = refusal is None and scratch.facts.terminal is None and not scratch.past_deadline()
        if clean and not failed:
            self._prompt_addition = addition
        elif clean and asking is not None:
            self._failed_open[asking] = addition
        if asking is not None:
            _prompt_hooks_decided(scratch, asking)
        return addition

    def session_context(
        self, run: RunState, agent: Any, final_text: str, end_reason: str | None,
    ) -> HookContext:
        """The context of ``on_session_end`` hooks."""
        ctx = HookContext("on_session_end", run, self.services, agent, final_text=final_text)
        ctx.end_reason = end_reason
        return ctx

    def tier_model(self, run: RunState) -> Any:
        """The model the run's budget tier calls for, or ``None`` (keep)."""
        cost = self.config.cost
        tier = run.facts.tier
        if cost is None or self.shadow:
            return None
        return cost.model_for(tier)

    async def charge_usage(self, run: RunState, model: Any, usage: Any,
                           reservation: str | None = None, side: str | None = None) -> None:
        """Count a model response's tokens and their price on the run, and
        charge the price to the principal's daily spend at once: by settling
        the call's reservation (made before the call, so concurrent runs of
        one principal never spend past the quota), or, with a store that
        keeps the daily spend alone, by adding it (concurrent runs then
        overshoot the quota by at most one call each). ``side``: the call is
        one a middleware made beside the run's own (its rate units are its own)."""
        input_tokens, cached, output_tokens = billed_tokens(model, usage)
        usd = 0.0
        cost = self.config.cost
        name = str(getattr(model, "model", "") or "")
        if cost is not None:
            price = cost.price_of(name)
            if price is not None:
                usd = price.usd(input_tokens, output_tokens, cached)
        if usage is not None:
            run.add_usage(input_tokens, output_tokens, usd, name, cached)
            run.charge_candidates(input_tokens, output_tokens, usd, name, cached)
        if reservation is not None:  # settled first: no await before it may drop it
            await self.services.fleet.settle(run, reservation, usd)
        if usage is not None:
            await self.services.fleet.tokens_used(run, input_tokens + output_tokens, side)
            if run.parent is not None:  # a parked lead's record carries what it spent since
                await record_parked(self, run.parent)
        if reservation is not None:
            return
        root = run.root
        if usage is None or cost is None or cost.daily_quota_usd is None:
            return
        if usd <= 0 or root.daily_spent_usd is None or root.principal is None:
            return
        await self.services.fleet.settle(run, None, usd)

    async def publish(self, report: RunReport, agent: Any) -> None:
        """A settled report: into the history, as the agent's last, and to
        the ``on_report`` callback. An async one is awaited before the reply
        returns (a loop closed after it would cancel it: the report would be
        lost), bounded by ``hook_timeout_s`` as an async hook is, not by the
        run's deadline (a run stopped there still gets its report written):
        a sink that hangs holds the reply that long at most."""
        self.reports.append(report)
        if agent is not None:
            try:
                self._last_by_agent[agent] = report
            except TypeError:
                pass
        if self.config.on_report is not None:
            try:
                out = self.config.on_report(report)
                if hasattr(out, "__await__"):
                    await self.runner.bounded(out, None)
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise
                self.services.log_failure("harness on_report callback", exc)  # the sink's own (its I/O cancelled)
            except Exception as exc:
                self.services.log_failure("harness on_report callback", exc)

    async def tool_only_run(self, agent: Any) -> RunState:
        """The run of the tool adapter used without the agent adapter (no
        ``on_reply`` to open and settle runs): one per reply, opened at its
        first tool call, its ``deadline_s`` running from then; the agent's
        previous one is settled and dropped when its next reply calls a tool."""
        reply_id = agent.state.reply_id
        run = self.table.get(reply_id)
        if run is not None:
            return run
        slot = self.table.holder_of(self._tool_only, agent)  # its run is dropped with the agent
        previous = None if slot[0] is None else self.table.get(slot[0])
        if previous is not None:
            life = ReplyLifecycle(self, agent)
            life.run = previous
            await life.close(None)
        parent = live_parent(reply_id)  # a sub-agent run from a live run's tool answers to its limits
        run = self.table.open(
            reply_id, getattr(agent, "name", "agent"), agent.state.session_id,
            self.caller_principal(), run_deadline(self, parent), parent, self.config.mode,
        )
        slot[0] = run.run_id
        self.opened(run, agent)
        if parent is None and self.services.fleet.run_leases:
            self._run_limits_unheld(run)
        return run

    def _run_limits_unheld(self, run: RunState) -> None:
        """A run concurrency limit needs ``on_reply`` (the agent adapter) to
        know when a reply ends: the tool adapter alone could hold no slot
        for its runs, so they fail closed (no tool runs) rather than run
        past a limit that is silently off."""
        fields = ", ".join(
            f"concurrency_limits[{i}]" for i, limit in enumerate(self.config.concurrency_limits)
            if limit.scope in ("principal", "tenant")
        )
        detail = f"{fields} limit runs, which needs HarnessAgentAdapter (on_reply): the tool adapter alone cannot"
        log.error("harness: %s; this run's tool calls are refused", detail)
        self.services.fleet.stop(run, "policy_error", "policy_error", detail)


def _prompt_hooks_decided(scratch: RunState, asking: RunState) -> None:
    """What ``on_system_prompt`` hooks decided on their own run, in the run
    that asked: their decisions (a clean pass's too), and the stop one of
    them made."""
    asking.decisions += scratch.decisions
    asking.unflushed += scratch.unflushed
    terminal = scratch.facts.terminal
    if terminal is not None and asking.facts.terminal is None:
        asking.facts.conclude(terminal.state, terminal.reason)
        asking.facts.stop_text = scratch.facts.stop_text


def _check_tool_names(config: HarnessConfig, toolkit: Any) -> None:
    """Each tool the config names (a policy, a rate or concurrency limit)
    against the tools in ``toolkit``: a name with no tool there is logged,
    naming the field, as a warning with the nearest tool (a likely typo)."""
    present = {tool.name for tool in tools_in(toolkit)}
    if not present:
        return
    named = [(f"tools.{name}", name) for name in config.tools]
    named += [(f"{field}[{i}].tool", limit.tool)
              for field in ("rate_limits", "concurrency_limits")
              for i, limit in enumerate(getattr(config, field)) if limit.tool is not None]
    for where, name in named:
        if name in present:
            continue
        close = difflib.get_close_matches(name, present, n=1, cutoff=0.8)
        if close:  # a likely typo
            log.warning("harness config %s: this toolkit has no tool %r (did you mean %r? a misspelt name's "
                        "policy never applies)", where, name, close[0])
        else:  # likely another agent's (one Harness serving toolkits that differ)
            log.info("harness config %s: this toolkit has no tool %r; its policy applies where a toolkit has it",
                     where, name)


def _check_declared_args(config: HarnessConfig, toolkit: Any) -> None:
    """Every ``identity_args`` name is an argument of its tool, every
    ``same_args`` name one of the gated tool and of its prerequisite, and
    every named group of a ``claims`` pattern one of its tool (a claim naming
    a value no call carries could never stand), where ``toolkit`` has them
    (with a schema)."""
    declared = {
        tool.name: found for tool in tools_in(toolkit)
        if (found := declared_in(getattr(tool, "input_schema", None))) is not None
    }
    for name, policy in config.tools.items():
        unread = undeclared_identity_args(name, policy, declared.get(name))
        if unread is not None:
            raise unread
        for i, prereq in enumerate(policy.requires):
            for tool in (name, prereq.tool):
                typo = undeclared_same_args(name, i, prereq, tool, declared[tool]) if tool in declared else None
                if typo is not None:
                    raise typo
        for i, claim in enumerate(policy.claims if name in declared else ()):
            unknown = sorted(set(re.compile(claim).groupindex) - declared[name].names)
            if unknown:
                raise HarnessConfigError(
                    f"tools.{name}.claims[{i}]: its named groups {unknown} are not arguments of {name} "
                    f"(its schema declares {sorted(declared[name].names)})",
                )


def _candidate_config(
    candidate: HarnessConfig | Mapping[str, Any], switches: EnvFlags, hooks: tuple[HookSpec, ...],
) -> HarnessConfig:
    """The candidate policy, checked as the live one is; its errors say it
    is the candidate's (the live config may be fine in the same field)."""
    try:
        config = _effective_config(build_config(candidate), switches)
        _check_disabled(hooks, switches, config)
    except (HarnessConfigError, ValidationError) as exc:
        raise HarnessConfigError(f"candidate policy: {exc}") from exc
    return config


def _effective_config(config: HarnessConfig, env: EnvFlags) -> HarnessConfig:
    """The config with the incident switches of the environment applied."""
    updates: dict[str, Any] = {}
    if env.mode is not None:
        updates["mode"] = env.mode
    if env.disabled_hooks:
        updates["disabled_hooks"] = set(config.disabled_hooks) | set(env.disabled_hooks)
    return config.model_copy(update=updates) if updates else config


def _check_disabled(hooks: tuple[HookSpec, ...], env: EnvFlags, config: HarnessConfig) -> None:
    """Unknown hook names in ``disabled_hooks`` are an error, not silence."""
    known = {s.name for s in hooks}
    for source, names in (
        ("HARNESS_DISABLED_HOOKS", env.disabled_hooks),
        ("disabled_hooks", set(config.disabled_hooks) - set(env.disabled_hooks)),
    ):
        unknown = sorted(set(names) - known)
        if unknown:
            raise HarnessConfigError(
                f"{source}: unknown hook name(s) {unknown}; known hooks: {sorted(known)}",
            )


def _entry_point_hooks() -> list[HookSpec]:
    specs: list[HookSpec] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            specs.extend(collect([ep.load()]))
        except HarnessConfigError:
            raise
        except Exception as exc:
            raise HarnessConfigError(
                f"hook pack {ep.name!r} ({ep.value}) failed to load: {exc}",
            ) from exc
    return specs


def _unique(specs: list[HookSpec]) -> tuple[HookSpec, ...]:
    seen: dict[str, HookSpec] = {}
    for spec in specs:
        other = seen.get(spec.name)
        if other is not None and other.fn is not spec.fn and other.fn != spec.fn:  # a bound method: equal, not one
            raise HarnessConfigError(
                f"two hooks are named {spec.name!r} ({other.module} and {spec.module})",
            )
        if other is not None and (other != spec or other.when is not spec.when):  # declared twice: one would be lost
            raise HarnessConfigError(f"hook {spec.name!r} is given twice, declared differently")
        seen[spec.name] = spec
    return tuple(seen.values())
