"""Harness: owns the config, the hook list, the run table, the breaker and
the store, and hands out the two AgentScope middlewares."""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict

from .config import EnvFlags, HarnessConfig, build_config
from .errors import DependencyDown, HarnessConfigError
from .registry import HookSpec, collect
from .report import Decision, RunReport, TerminalState
from .run_state import RunState, RunTable, principal_dict
from .redaction import Redactor
from .runner import HookRunner
from .stores import LedgerStore, MemoryStore, daily_left

log = logging.getLogger("agentscope_harness")

ENTRY_POINT_GROUP = "agentscope_harness.hooks"

_PRINCIPAL: ContextVar["Principal | None"] = ContextVar("harness_principal", default=None)

try:  # opentelemetry-api ships with AgentScope; without an SDK this is a no-op
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover
    _otel_trace = None


class Principal(BaseModel):
    """The authenticated caller a run acts for. Identity comes only from here,
    never from tool arguments the model writes."""

    model_config = ConfigDict(extra="allow", frozen=True)

    user_id: str
    tenant: str | None = None
    allowed_tools: frozenset[str] | None = None

    def attr(self, name: str) -> Any:
        """An identity attribute (``user_id``, ``tenant`` or an extra one)."""
        if name in ("user_id", "tenant"):
            return getattr(self, name)
        return (self.model_extra or {}).get(name)

    @property
    def key(self) -> str:
        """Key of this principal's daily spend in the store."""
        return f"{self.tenant or '-'}/{self.user_id}"


@dataclass
class Breaker:
    """Circuit breaker of one tool, shared by all runs of a Harness."""

    failures: int = 0
    opened_at: float | None = None
    half_open_probe: bool = False


class Harness:
    """The control plane around AgentScope agents.

    ``Harness(config, hooks=[...])`` builds the hook chain once (built-ins,
    your hooks, hook packs from the ``agentscope_harness.hooks`` entry point,
    minus disabled ones); ``middlewares()`` gives the two adapters for
    ``Agent(middlewares=...)``.
    """

    def __init__(
        self,
        config: HarnessConfig | Mapping[str, Any] | None = None,
        hooks: Iterable[Any] = (),
        *,
        environ: Mapping[str, str] | None = None,
        load_entry_points: bool = True,
    ) -> None:
        from .hooks import BUILTIN_HOOKS

        self.env = EnvFlags.read(environ)
        config = build_config(config)
        updates: dict[str, Any] = {}
        if self.env.mode is not None:
            updates["mode"] = self.env.mode
        if self.env.disabled_hooks:
            updates["disabled_hooks"] = set(config.disabled_hooks) | set(self.env.disabled_hooks)
        self.config: HarnessConfig = config.model_copy(update=updates) if updates else config

        specs = collect(BUILTIN_HOOKS) + collect(hooks)
        if load_entry_points:
            specs += _entry_point_hooks()
        self.all_hooks: tuple[HookSpec, ...] = _unique(specs)
        known = {s.name for s in self.all_hooks}
        for source, names in (
            ("HARNESS_DISABLED_HOOKS", self.env.disabled_hooks),
            ("disabled_hooks", set(config.disabled_hooks)),
        ):
            unknown = sorted(set(names) - known)
            if unknown:
                raise HarnessConfigError(
                    f"{source}: unknown hook name(s) {unknown}; known hooks: {sorted(known)}",
                )
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
        self.table = RunTable(loop_window=self.config.loop_window)
        self.store: LedgerStore = self.config.store or MemoryStore()
        self.breakers: dict[str, Breaker] = {}
        self.reports: deque[RunReport] = deque(maxlen=self.config.reports_kept)
        self._last_by_agent: "weakref.WeakKeyDictionary[Any, RunReport]" = weakref.WeakKeyDictionary()
        self._finish_tools = frozenset(self.config.finish_tools())
        self._prompt_addition: str | None = None
        self._parked: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._tool_only: "weakref.WeakKeyDictionary[Any, list[RunState | None]]" = (
            weakref.WeakKeyDictionary()
        )
        self.redactor = Redactor(self.config.redact_patterns, self.config.redact_window)
        self.stream_redaction = not self.shadow and any(
            s.name == "final_answer_audit" for s in self.hooks
        )

    @property
    def enabled(self) -> bool:
        """False when ``HARNESS_ENABLED=0``: both adapters pass everything through."""
        return self.env.enabled

    # ------------------------------------------------------------ public API

    def middlewares(self) -> list[Any]:
        """``[HarnessAgentAdapter, HarnessToolAdapter]`` for ``Agent(middlewares=...)``."""
        from .adapters import HarnessAgentAdapter, HarnessToolAdapter

        return [HarnessAgentAdapter(self), HarnessToolAdapter(self)]

    def tool_middleware(self) -> Any:
        """A tool-level middleware keeping a tool's exception class (for
        ``FunctionTool(..., middlewares=[harness.tool_middleware()])``)."""
        from .adapters.tool_adapter import ErrorClassMiddleware

        return ErrorClassMiddleware()

    def instrument(self, toolkit: Any) -> Any:
        """Add the error-class middleware to every tool already in ``toolkit``."""
        from .adapters.tool_adapter import instrument_toolkit

        instrument_toolkit(toolkit, self.tool_middleware())
        return toolkit

    @contextlib.contextmanager
    def acting_for(self, principal: Principal | None) -> Iterator[Principal | None]:
        """Bind the authenticated caller for replies run inside this block."""
        token = _PRINCIPAL.set(principal)
        try:
            yield principal
        finally:
            _PRINCIPAL.reset(token)

    def last_report(self, agent: Any) -> RunReport | None:
        """The report of ``agent``'s most recent finished run."""
        try:
            return self._last_by_agent.get(agent)
        except TypeError:
            return None

    def policy(self, tool: str):
        """The ``ToolPolicy`` of a tool, or ``None``."""
        return self.config.tools.get(tool)

    @property
    def finish_tools(self) -> frozenset[str]:
        """Tools whose success ends the run."""
        return self._finish_tools

    # ------------------------------------------------------------ internals

    def current_principal(self) -> Principal | None:
        """The principal bound by ``acting_for`` in this context."""
        return _PRINCIPAL.get()

    async def system_prompt_addition(self) -> str:
        """What ``on_system_prompt`` hooks append: computed from the config
        alone (no run facts, no clock), so the prompt is byte-stable."""
        from .context import HookContext

        if self._prompt_addition is not None:  # pure in the config: once per Harness
            return self._prompt_addition
        scratch = RunTable(loop_window=self.config.loop_window).open(
            "system_prompt", "", None, None, None, None, self.config.mode,
        )
        ctx = HookContext("on_system_prompt", scratch, self)
        await self.runner.run("on_system_prompt", ctx)
        self._prompt_addition = "".join(ctx.prompt_addition)
        return self._prompt_addition

    async def charge_usage(self, run: RunState, model: Any, usage: Any) -> None:
        """Count a model response's tokens and their price on the run, and
        charge the price to the principal's daily spend at once: concurrent
        runs of one principal then see each other's spend at their next
        model call, so together they overshoot the quota by at most one call
        each."""
        if usage is None:
            return
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        usd = 0.0
        cost = self.config.cost
        if cost is not None:
            price = cost.prices.get(getattr(model, "model", ""))
            if price is not None:
                usd = price.usd(input_tokens, output_tokens)
        run.add_usage(input_tokens, output_tokens, usd)
        root = run.root
        if usd <= 0 or root.daily_left_usd is None or root.principal is None:
            return
        try:
            total = await self.store.add_spend(root.principal.key, usd)
        except Exception as exc:  # noqa: BLE001 - the store is a dependency: fail closed
            root.store_error = str(DependencyDown("spend store", exc))
            self._record(
                run, "budget_router", "on_model_call", "error",
                code="dependency_down", detail=f"daily spend not charged: {exc}",
            )
            return
        root.daily_left_usd = daily_left(cost.daily_quota_usd, total) + root.facts.spent_usd

    async def tool_only_run(self, agent: Any) -> RunState:
        """The run of the tool adapter used without the agent adapter (no
        ``on_reply`` to open and settle runs): one per reply, opened at its
        first tool call; the agent's previous one is settled and dropped when
        its next reply calls a tool."""
        reply_id = agent.state.reply_id
        run = self.table.get(reply_id)
        if run is not None:
            return run
        slot = self._tool_only.get(agent)
        if slot is None:  # one holder per agent; its run is dropped with the agent
            slot = self._tool_only[agent] = [None]
            weakref.finalize(agent, _drop_held_run, self.table, slot)
        previous = slot[0]
        if previous is not None:
            state, reason = self.terminal_from_facts(previous, None)
            await self.settle(previous, agent, state, reason)
            self.table.drop(previous.run_id)
        run = slot[0] = self.table.open(
            reply_id, getattr(agent, "name", "agent"), agent.state.session_id,
            self.current_principal(), None, None, self.config.mode,
        )
        return run

    def remember_parked(self, agent: Any, run: RunState) -> None:
        """A reply parked on human-in-the-loop keeps its slot until resumed."""
        try:
            self._parked[agent] = run.run_id
        except TypeError:
            pass

    def forget_parked(self, agent: Any) -> None:
        """A new reply replaces a parked one that was never resumed."""
        try:
            run_id = self._parked.pop(agent, None)
        except TypeError:
            return
        if run_id is not None:
            self.table.drop(run_id)

    def _record(
        self,
        run: RunState,
        hook: str,
        point: str,
        action: str,
        *,
        code: str | None = None,
        tool: str | None = None,
        detail: str = "",
    ) -> Decision:
        decision = Decision(
            hook=hook, point=point, action=action, code=code, tool=tool,
            detail=detail, enforced=not self.shadow,
        )
        run.record(decision)
        log.info(
            "harness %s %s %s code=%s tool=%s %s%s",
            run.run_id, hook, action, code, tool, detail,
            "" if decision.enforced else " (shadow)",
        )
        if _otel_trace is not None:
            span = _otel_trace.get_current_span()
            if span.is_recording():
                span.add_event(
                    "harness.decision",
                    {
                        "harness.run_id": run.run_id,
                        "harness.hook": hook,
                        "harness.point": point,
                        "harness.action": action,
                        "harness.code": code or "",
                        "harness.tool": tool or "",
                        "harness.detail": detail[:500],
                        "harness.enforced": decision.enforced,
                    },
                )
        return decision

    def terminal_from_facts(self, run: RunState, end_reason: str | None) -> tuple[TerminalState, str]:
        """The terminal state a run that left the loop has earned.

        Leaving the loop is not success: ``completed`` needs the finishing
        tool to have succeeded and been verified (where one is required) and
        no unsupported claim in the answer.
        """
        facts = run.facts
        if end_reason == "interrupted":
            return TerminalState.CANCELLED, "interrupted"
        if facts.terminal is not None and facts.terminal.state != TerminalState.COMPLETED.value:
            return TerminalState(facts.terminal.state), facts.terminal.reason
        if facts.unsupported_claims:
            return TerminalState.INCOMPLETE, "unsupported_claim"
        if facts.terminal is not None:
            return TerminalState.COMPLETED, facts.terminal.reason
        if facts.dependency_down:
            # the answer may be honest, but the task was not done
            return TerminalState.INCOMPLETE, "dependency_down"
        if end_reason == "exceed_max_iters":
            return TerminalState.INCOMPLETE, "max_iters"
        if self.config.finish_required():
            return TerminalState.INCOMPLETE, "finish_tool_not_called"
        return TerminalState.COMPLETED, "answered"

    def build_report(
        self, run: RunState, state: TerminalState, reason: str, agent_name: str,
    ) -> RunReport:
        """The report of a run, from its slot."""
        return RunReport(
            run_id=run.run_id,
            session_id=run.session_id,
            agent=agent_name,
            principal=principal_dict(run.principal),
            terminal_state=state,
            reason=reason,
            model_calls=run.model_calls,
            input_tokens=run.input_tokens,
            output_tokens=run.output_tokens,
            spent_usd=round(run.facts.spent_usd, 10),
            tool_calls=dict(run.facts.called_tools),
            refusals=dict(run.refusals),
            refusals_by_hook=dict(run.refusals_by_hook),
            decisions=list(run.decisions),
            wall_s=round(time.monotonic() - run.started, 6),
            deadline_left_s=(
                None if run.deadline is None else round(run.deadline - time.monotonic(), 6)
            ),
            in_flight=[f"{name}:{call_id}" for call_id, name in run.in_flight.items()],
            unsupported_claims=list(run.facts.unsupported_claims),
            facts=sorted(run.facts.progress_marks),
            children=list(run.children),
            mode=self.config.mode,
        )

    async def settle(
        self, run: RunState, agent: Any, state: TerminalState, reason: str,
    ) -> RunReport:
        """Close the books of a run once: the report, the parent's children,
        the report history and the ``on_report`` callback."""
        if run.report is not None:
            return run.report
        report = self.build_report(run, state, reason, getattr(agent, "name", run.agent_name))
        run.report = report
        if run.parent is not None:
            run.parent.children.append(report)
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
                    await out
            except Exception:  # noqa: BLE001 - a callback must not break the reply
                log.exception("harness on_report callback failed")
        return report


def _drop_held_run(table: RunTable, slot: list[RunState | None]) -> None:
    if slot[0] is not None:
        table.drop(slot[0].run_id)


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
        if other is not None and other.fn is not spec.fn:
            raise HarnessConfigError(
                f"two hooks are named {spec.name!r} ({other.module} and {spec.module})",
            )
        seen[spec.name] = spec
    return tuple(seen.values())
