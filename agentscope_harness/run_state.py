"""One run, one slot, one reset.

All per-run state lives in one :class:`RunState` per run, kept in the
:class:`RunTable` owned by the Harness: created when the reply starts, kept
across a human-in-the-loop park, dropped in the reply's ``finally``.
Parallel tool calls run in their own asyncio tasks; they all reach the same
slot object, so their writes are never lost (a ContextVar written in a child
task would be).

ContextVars carry only what is fixed before the run starts and read below it:
the principal, the deadline and the handle of the current run.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .context import ContextResult
from .facts import Batch, GuardState, Terminal
from .lazy import LazyFields, lazy, made
from .report import Decision, RunReport, TerminalState

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .candidate import Candidate
    from .config import CostPolicy, HarnessConfig
    from .harness import Principal
    from .prefix import PrefixTrack

FINDINGS_KEPT = 5
ACTIONS_KEPT = 10
FINDING_CHARS = 300

class RunHandle(weakref.ref["RunState"]):
    """A run's weak handle, and the deadline a task that outlives the run
    keeps (the run's last: a tool's background task stays bounded)."""

    __slots__ = ("deadline", "key", "parent", "stopped")
    deadline: float | None
    stopped: Terminal | None
    """How the run was stopped short of its task (set as it settles): a task
    still running in its context (a background worker) opens its principal's
    runs bound by it, the run itself long freed."""
    key: str
    """Whom the run acts for (its principal's key, ``""`` for none): a block
    bound to another caller in its context is not its work (``acting_for``)."""
    parent: RunHandle | None
    """The handle of the run this one is nested in: a task started in a
    nested run that settled reaches the runs it was part of."""


RUN_HANDLE: ContextVar[RunHandle | None] = ContextVar("harness_run", default=None)
"""Weak handle of the run whose reply is executing (inherited by tools and
by sub-agents, which become nested runs). Weak, because asyncio keeps copies
of a context alive after the run (a cancelled timer armed by a tool stays
queued, with its context, until it is due): they must not keep the run's
state alive. Read it with :func:`current_run`."""


TOOL_CALL: ContextVar[str | None] = ContextVar("harness_tool_call", default=None)
"""The id of the tool call whose tool is running: a run nested there (a
sub-agent the tool runs) records it, so the call's result can say how the
sub-agent's run ended."""


class _SetAside(NamedTuple):
    """A run's context set aside by a block bound to another caller
    (``acting_for``), and what was set aside before it."""

    handle: RunHandle
    tool_call: str | None
    earlier: _SetAside | None


_SET_ASIDE: ContextVar[_SetAside | None] = ContextVar("harness_set_aside", default=None)
"""The runs set aside in this context, innermost first: a block bound to one
of their callers again is that run's work once more."""


def context_for(key: str | None) -> Callable[[], None] | None:
    """Make this context ``key``'s (a caller's ``Principal.key``): inside a
    run acting for another caller, the run is set aside (a reply opened here
    is a task of its own), and a run of ``key`` set aside earlier (a block
    bound to that caller again) is this context's run once more. A run acting
    for nobody sets nothing aside: every reply in its context is its work.
    ``None`` (no caller bound) inside a block that set a run aside, and no
    run of its own, is that run's work again (a reply there inherits its
    caller). Returns what puts the context back (``None``: nothing changed)."""
    handle = RUN_HANDLE.get()
    if handle is not None and (key is None or handle.key in (key, "")):
        return None
    earlier = _SET_ASIDE.get()
    back = earlier
    while back is not None and key is not None and back.handle.key != key:
        back = back.earlier
    if handle is None and back is None:
        return None
    aside = _SetAside(handle, TOOL_CALL.get(), earlier) if handle is not None else earlier
    tokens = (
        RUN_HANDLE.set(back.handle if back is not None else None),
        TOOL_CALL.set(back.tool_call if back is not None else None),
        _SET_ASIDE.set(aside),
    )

    def put_back() -> None:
        _SET_ASIDE.reset(tokens[2])
        TOOL_CALL.reset(tokens[1])
        RUN_HANDLE.reset(tokens[0])

    return put_back


def _live_set_aside() -> Iterator[RunState]:
    """The live runs set aside in this context, innermost first: a block
    bound to another caller inside a run's tool ends with that tool."""
    aside = _SET_ASIDE.get()
    while aside is not None:
        run = aside.handle()
        if run is not None and run.report is None:
            yield run
        aside = aside.earlier


def set_aside_depth() -> int:
    """How many runs' tools a run opened (or resumed) here runs inside, the
    live runs set aside in this context counted (see ``RunState.depth``)."""
    return max((run.depth + 1 for run in _live_set_aside()), default=0)


def set_aside_deadline() -> float | None:
    """The earliest deadline of the live runs set aside in this context (the
    tool running the block is cut at it; ``None``: none applies)."""
    deadlines = [run.deadline for run in _live_set_aside() if run.deadline is not None]
    return min(deadlines) if deadlines else None


def steps_moved(context: contextvars.Context, lead: RunState, old: asyncio.Task[Any], new: asyncio.Task[Any]) -> None:
    """A tool of ``lead`` whose first step ran inline in ``old`` goes on in
    ``new``, in ``context``: the steps of the runs nested in it that began
    there (a sub-agent's reply) go on in ``new``, and so do their cuts."""
    handle = context.get(RUN_HANDLE)
    run = handle() if handle is not None else None
    while run is not None and run is not lead:
        cut = run.outside_cut
        if cut is not None and cut.stepping is old:
            cut.stepping = new
        run = run.parent


def current_run() -> RunState | None:
    """The run whose reply is executing, if any (and still alive)."""
    handle = RUN_HANDLE.get()
    return handle() if handle is not None else None


SHORT_ENDS = frozenset({TerminalState.INCOMPLETE.value, TerminalState.FAILED.value})
"""The ends of a run stopped short of its task."""

CALLLESS_ENDS = frozenset({
    "concurrency_limited", "rate_limited", "unpriced_model", "dependency_down",
    "policy_refused", "policy_error", "model_error",
})
"""Ends after which no model call of the run is made, not even one narrowed
to its structured output: it holds no slot, may not call the model now,
cannot be priced, lost what it needed (a store; the provider, failed for
good after its retries: a structured round would only ask it again, and
deliver output beside "failed"), or a hook refused it (a safety hook at
``on_system_prompt``: that run's model call is not made). A run that acts
for nobody is a fact of its own (``RunState.acts_for_nobody``); a deadline
passed refuses every call by itself."""


def live_parent(reply_id: str) -> RunState | None:
    """The run whose step is executing the reply ``reply_id`` (a sub-agent
    called from one of its tools), if it is still live, else the nearest
    live run it was nested in (a task a sub-agent started, the sub-agent
    settled since, is its lead's work): the run a new run of that reply is
    nested in."""
    handle = RUN_HANDLE.get()
    while handle is not None:
        parent = handle()
        if parent is not None and parent.report is None:
            return None if parent.run_id == reply_id else parent
        handle = handle.parent
    return None


@dataclass(frozen=True, eq=False)
class RunLimits:
    """The run-wide caps of the config a run was opened under. A nested run
    answers to these and to those of every run it is nested in, whichever
    Harness opened them: the strictest wins (DESIGN §6.1)."""

    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    cost: CostPolicy | None = None
    enforced: bool = True
    """``False``: its Harness is in shadow mode; these caps bind its own
    runs only (in shadow: recorded), never another Harness's."""

    @classmethod
    def of(cls, config: HarnessConfig) -> RunLimits:
        return cls(config.max_model_calls, config.max_tool_calls, config.cost, config.mode == "enforce")


NO_LIMITS = RunLimits()


class EndPassed(Protocol):
    """A reply's end that passed, its report settled (``RunState.reopen``)."""

    def __call__(self) -> None:
        """The reply went on past it: the run is open again."""

    def swallowed(self) -> bool:
        """It has not reached the caller: a middleware before the harness's
        holds it, and may ask for another round."""


_HOLDING = ("judging", "admitted", "in_flight", "awaiting_human")
"""The fields of a run that hold calls by id (read without making them)."""


@dataclass(eq=False)
class RunState(LazyFields):
    """Everything one run knows. Counters that a nested run shares with its
    parent (ledgers, spend, model and tool call totals) are reached through
    ``root``/ancestors, never copied."""

    run_id: str
    agent_name: str
    session_id: str | None
    principal: Principal | None
    deadline: float | None
    facts: GuardState
    table: RunTable
    parent: RunState | None = None
    limits: RunLimits = NO_LIMITS
    """The caps of the Harness that opened this run (see ``bounds``)."""
    started: float = field(default_factory=time.monotonic)
    nonce: str = field(default_factory=lambda: secrets.token_hex(6))
    pii_key: str = field(default_factory=lambda: secrets.token_hex(16))
    """The key of the run's ``hash`` tags (``outputs.pii_salt``)."""
    answer_blocked: tuple[str, ...] = ()
    """``block`` kinds of personal data an answer the harness gave in the
    model's place held (a finishing tool's): the audit withholds it."""
    decisions: list[Decision] = lazy(list)
    unflushed: list[Decision] = lazy(list)
    issued: set[str] = lazy(set)
    artifacts: dict[str, str] = lazy(dict)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls_total: int = 0
    refusals: Counter = lazy(Counter)
    refusals_by_hook: Counter = lazy(Counter)
    in_flight: dict[str, str] = lazy(dict)
    outside_cut: Any = None
    """The reply layer's cut of the reply running it (``lifecycle.OutsideCut``),
    while that reply runs: a step of it begun in its lead's task, inside a
    tool's first step, is followed into the tool's own task (``steps_moved``)."""
    tools_bounded: int = 0
    """Its calls now in the tool adapter's deadline bound (``_within_deadline``):
    that cut ends them, with what it records of them (a mutation cut), so the
    reply layer's cut of a wait outside the harness's layers waits for it."""
    children: list[RunReport] = lazy(list)
    called_by: str | None = None
    """The parent's tool call this nested run ran inside (``TOOL_CALL``)."""
    open_children: weakref.WeakValueDictionary[str, RunState] = lazy(weakref.WeakValueDictionary)
    """Nested runs not settled yet, by run id (a sub-agent a tool started in
    a background task may outlive this run): the report lists them, and
    their calls still running, in ``in_flight``. Weak: a child holds its
    parent, never the other way (a dropped child frees both)."""
    live_nested: weakref.WeakValueDictionary[str, RunState] = lazy(weakref.WeakValueDictionary)
    """Of a root run: the runs nested in it, at any depth, not settled (a
    sub-agent a tool started in the background may outlive its lead): its
    work in flight, for which its run slots stay taken. Weak, as
    ``open_children``."""
    after_nested: Callable[[], None] | None = None
    """Once this root run has closed or parked with nested runs still
    running: what to do when the last of them ends (its Harness's fleet
    gives back the run slots it kept for them)."""
    adopt_late: Callable[[RunReport], RunReport] | None = None
    """Once this run has settled: how its Harness takes a nested run's
    report that settles later into this run's report's ``children``."""
    ended_inside: dict[str, list[RunReport]] = lazy(dict)
    """Reports of nested runs that ended inside a call of this run, by call
    id, until the call's result takes them."""
    done_inside: dict[str, dict[str, list[Mapping[str, Any]]]] = lazy(dict)
    """The successes of nested runs inside a call of this run (tool ->
    arguments), by call id, until the call ends: then kept in the agent's
    state (``claims.remember_done_inside``), so that a later reply's claim
    of them stands as one of the agent's own earlier calls does."""
    hold_reply_end: bool = False
    results: ResultAccount = lazy(lambda: ResultAccount())
    """The running account of the tool results in the agent's context."""
    deferred_hints: list[tuple[str, str]] = lazy(list)
    """Hints given at the next pre_think: a tool point's, and post_reflect's
    of a round that called tools."""
    mode: str = "enforce"
    shown: Any = None
    """The filter of the model events of the run's latest round (the agent
    adapter's): a call cut at the deadline drops what it holds back."""
    answer_made_up: bool = False
    """The model answered in a round whose answer the fallback replaces (a
    dependency down, made to conclude): whatever rule then ended the run in
    that round, the user receives ``outcome.replacement``, not the answer."""
    parked_calls: dict[Batch, set[str]] = lazy(dict)
    """Per batch, the ids of its calls that waited for a human or a client:
    a finishing tool of such a batch was written before they answered (its
    own approval answers for itself only)."""
    awaiting_human: set[str] = lazy(set)
    """The ids of this run's calls parked on a human or a client (asked, or
    run by the client). ``on_reply`` clears them when it resumes the run;
    with the tool adapter alone, each leaves once answered (or resumed), and
    the run is timed again then: the other calls of its batch go on in the
    same reply, with the time it had."""
    daily_spent_usd: float | None = None
    """The principal's spend today beside this run's own (read when the run
    opens, moved on at each charge): what each policy's ``daily_quota_usd``
    is judged against, a candidate's too. ``inf`` when it cannot be known
    (no principal bound, the store unreachable): nothing is left."""
    stored_usd: float = 0.0
    """What of this run's spend the store has counted (a lead whose Harness
    keeps no quota spends without it): the rest of the store's day is the
    spend beside it."""
    store_error: str | None = None
    report: RunReport | None = None
    reopen: EndPassed | None = None
    """Set while the report settled at an end that passed, until its reply
    closes: a round that begins after it (a middleware before the harness's
    swallowed that end) calls it first, reopening the run
    (``ReplyLifecycle._went_on``)."""
    said_after_end: bool = False
    """The run's books changed after its end was settled, before its reply
    closed (a middleware's own model call, made or refused: a judge of the
    answer, a grader of the final message): the reply's close publishes the
    report that supersedes the end's."""
    superseded: RunReport | None = None
    """The provisional report (a park's, a swallowed end's) the run's next
    report supersedes: it leaves ``Harness.reports`` when that one is
    published (one report per run in the history)."""
    candidate: Any = None
    """The model's candidate final ``Msg`` of the latest round."""
    harness_answer: str | None = None
    """The text the harness answered in the model's place in the latest
    round (a stop's text, the fallback and what the run found): the final
    audit filters it, but reads no claim in it (the model claimed nothing;
    what the run found may quote a result that reads like one)."""
    with_consumer: bool = False
    """The reply has handed its consumer an item and waits to be asked for
    the next (a reply still producing one is running, never abandoned)."""
    replaced: bool = False
    """A later reply of its agent settled and freed it, abandoned: its
    stream, read on, ends."""
    ended_at_cap: bool = False
    """The harness answered a stopped structured reply in the model's place
    and set AgentScope's iteration count at its cap to end it: AgentScope's
    cap message is replaced by that answer."""
    admitted: dict[str, Any] = lazy(dict)
    """Calls judged and admitted at the permission point, by call id: the
    view (AgentScope's own parse) their result is shaped against."""
    own_pieces: dict[str, tuple[str, ...]] = lazy(dict)
    """The text the harness's ``on_acting`` streams of each call's result, by
    call id: the reply shows it as it comes, and holds any other text of
    that call's stream (a middleware's before the harness's) until the
    call's end. Tuples of text: the collector stops tracking them, where a
    list would be walked by every collection until the reply reads it."""
    breaker_failures: Counter = lazy(Counter)
    """Per tool, its dependency failures in this run (the root's count: a
    run tree is one caller's). The first counts towards the tool's breaker,
    the rest towards this run's own: one caller's arguments (a batch of
    calls to closed ports) cannot open the breaker for everyone."""
    made: dict[str, Batch] = lazy(dict)
    """The calls this run admitted, by id: the batch each was made in. One
    met again in that batch on a resume (AgentScope runs again a call under
    way when its reply parked, its result never written) is refused, never
    made twice; a later batch's call under the id is another call."""
    replied_by: int = 0
    """The number of the reply (``ReplyLifecycle.serial``) whose run this
    is now: only that reply's end may settle, park or free it."""
    pauses: int = 0
    """How many times the run's reply paused here (parked, its stream closed
    at a question, resumed): a call whose judgement began before a pause is
    not admitted after it (its reply moved on without it; the resume, here
    or on another worker, judges it afresh)."""
    answered_in: Batch | None = None
    """The batch of the last finishing call admitted past ``max_tool_calls``:
    one answer a batch is not counted on the cap, the others are."""
    judging: set[str] = lazy(set)
    """Ids of the calls being judged now (their gates' slots are held
    under the id)."""
    approvals: dict[str, tuple[str, str]] = lazy(dict)
    """Calls parked for a human, by call id: the tool the human was shown,
    and the digest of that tool with the arguments shown."""
    findings: deque[tuple[str, str]] = lazy(lambda: deque(maxlen=FINDINGS_KEPT))
    """The last successful results, redacted and short: what a stopped run
    hands over instead of a bare apology."""
    actions: deque[tuple[str, str]] = lazy(lambda: deque(maxlen=ACTIONS_KEPT))
    """The same of its mutations, kept apart: the lookups after them never
    push out of a stopped run's answer what it did."""
    unpriced_seen: set[str] = lazy(set)
    """Model names without a price already reported in this run."""
    turns: int = 0
    """Model turns this reply's agent began (``on_reasoning``): part of a
    call's ``Batch``."""
    structured_rounds: int = 0
    """Model rounds a stopped run was given to produce its structured output."""
    harness_choice: Any = None
    """The ``tool_choice`` the harness set for this round's model call (its
    own narrowing): the only one it may turn to text (a finishing tool not
    in the table) or leave to a thinking model; another middleware's forced
    choice is sent as it forced it."""
    narrowed_round: bool = False
    """The coming model call is one of those rounds (the model guard lets it
    past the run's own ``max_model_calls``, and clears it)."""
    answer_owed: str | None = None
    """The answer (filtered) a run that ended (its finishing tool's, or a
    stop's text) owes the user once its structured output is made in those
    rounds: the reply's text then, not AgentScope's line about the output."""
    largest_output_tokens: int = 0
    """The most output tokens one model call of the run (sub-agents
    included) was charged: the output estimate of a call to a model that
    declares no ``max_tokens``."""
    usage_estimated: bool = False
    """A model call reported no usage and was charged an estimate (said once)."""
    longest_model_call_s: float = 0.0
    """The slowest model call so far: the wrap-up window is at least that."""
    prefix_breaks: int = 0
    """How many times a model call's payload broke the previous call's
    cached prefix (``prefix.observe``): a report's count, carried by a park."""
    judged_calls: set[str] = lazy(set)
    """Ids of the calls judged in this run (a re-judged call counts once)."""
    enclosing_refusals: set[Batch] = lazy(set)
    """The batches in which an enclosing enforcing Harness's
    ``max_tool_calls`` refused a call of this shadow run."""
    parked_by_another: bool = False
    """Restored here from a park another caller made (its park record says
    who): whoever resumes it resumes another's run."""
    spent_approvals: set[str] = lazy(set)
    """Calls whose approval a resume used (matched or not): no later park of
    the run offers them again (an old copy of the state still waits for them)."""
    park_awaiting: set[str] = lazy(set)
    """The calls AgentScope waited for at the run's latest park (the
    application's own questions too): a resume answering others answers an
    earlier park (an old copy of the state) and must not take this one's."""
    park_id: str | None = None
    """The latest park's id in the store's park records (``ParkRecords``):
    its one answer is claimed under it."""
    parked_at: float = 0.0
    """When (``time.monotonic``) this process recorded the latest park: one
    older than ``PARK_TTL_S`` has outlived its record and claim."""
    earlier_parks: set[str] = lazy(set)
    """The ids of this run's earlier parks: a record of one of them in the
    store is older than the latest park (whose write did not land), not newer."""
    park_recorded: bool = False
    """The store kept the latest park's record (its write answered): a
    record missing at the resume expired or was lost, not never written."""
    asked_here: bool = False
    """This process saw the run park (so a resume must match what was shown,
    whoever asked: the harness, AgentScope's engine or a middleware of the
    application's); false for a run restored in another process."""
    asks: dict[str, str] = lazy(dict)
    """Why a rule (``ctx.ask``, ``ask_when``) put each call to a human, by
    call id: a park's reason is the questions of the calls it awaits (a
    partial answer parks again on the ones left)."""
    toolkit: Any = None
    """A weak reference to a sub-agent run's toolkit (``Harness.opened``;
    weak: a run that outlives its agent keeps none of it): whether it owes
    the finishing tool is read from it (``outcome.owes_finish``)."""
    resumed_by: Any = None
    """The principal bound when a parked run was resumed (``None``: nobody)."""
    resumer_recorded: bool = False
    """The reply lifecycle recorded ``resumed_by`` when the resume began (in
    the resuming context); without it, the tool adapter records it."""
    acts_for_nobody: bool = False
    """Resumed by another caller than the one who parked it, or by nobody
    (``lifecycle.end_resumed_by_another``): no model call of it is made, not
    even one narrowed to its structured output. A fact of its own: its
    reason, ``refused:permission_denied``, also ends a run that met that
    refusal again, which gets its narrowed rounds."""
    budget_question_shadowed: bool = False
    """Shadow mode recorded the budget question enforcing would have asked
    (``budget_spent``): once, as enforcing asks it once and the run ends
    there; the rounds shadow mode lets run after it ask nothing more."""
    offers: dict[str, dict[str, int]] = lazy(dict)
    """Calls parked on an exhausted ledger, by call id: the extensions the
    human was offered (``{"ledger:<name>": units}``)."""
    extensions: list[dict[str, Any]] = lazy(list)
    """Budget extensions a human approved in this run (root only)."""
    ledger_extra: dict[str, int] = lazy(dict)
    """Units added to each ledger's cap by approved extensions (root only)."""
    usd_extra: float = 0.0
    """USD added to the run's cap by approved extensions (root only)."""
    usd_carried: float = 0.0
    """USD a budget-parked run of the same agent spent before this run
    continued its budget (root only; never charged again)."""
    input_carried: int = 0
    output_carried: int = 0
    """Input and output tokens that parked run used (root only): the token
    caps continue the task as its USD cap does, an approval of dollars lifts
    neither."""
    carried_park: str | None = None
    """The claim of the parked budget whose spend ``usd_carried`` holds
    (carried once, before its claim is made)."""
    held: tuple[float, int, int] = (0.0, 0, 0)
    """USD, input and output tokens of model calls answering to this run's
    limits that were admitted and are not charged yet (parallel sub-agents
    see each other's calls in flight: see ``hooks.budget.hold``)."""
    prefix: PrefixTrack | None = None
    """The previous model call's payload, as the prefix observer keeps it."""
    hints_read: tuple[Any, int] = (None, 0)
    """The context's last message at the run's last model call and how many
    of its blocks were read for other middlewares' hints (``ModelGuard``):
    each call reads only what is new since."""
    streaming: list[Any] = lazy(list)
    """The streamed model calls in flight (``model_guard``): each charged
    once, by its last chunk or, when the run ends before it, by the run's end."""
    candidate_differences: list[dict[str, Any]] = lazy(list)
    """Calls where the candidate policy decided otherwise than the live one."""
    timed_from: float = field(init=False, repr=False)
    """When the current deadline was set (the open, or the last resume): the
    time the run has runs from here."""
    handle: RunHandle = field(init=False, repr=False)
    """This run's weak handle (what ``RUN_HANDLE`` carries)."""
    enclosing_bounds: tuple[RunState, ...] = field(init=False, repr=False)
    """The enclosing runs whose ``limits`` bind this one (see ``bounds``):
    those of enforcing Harnesses, and of this run's own; never this run
    itself, which would make a reference cycle."""
    binds_itself: bool = field(init=False, repr=False)
    """No enclosing run holds this run's ``limits``: they bind on its own counters."""
    inside_set_aside: int = field(init=False, repr=False, default=0)
    """How many runs' tools this run, opened in a block bound to another
    caller, runs inside (see ``depth``)."""
    bound_by: Terminal | None = field(init=False, repr=False, default=None)
    """The end of a run stopped short of its task, settled before this one
    opened in its context (a background worker's sub-agent, nested in a live
    lead or not): this run is part of that stopped task."""

    def __post_init__(self) -> None:
        self.handle = RunHandle(self)
        self.handle.deadline, self.handle.stopped, self.handle.parent = self.deadline, None, None
        self.handle.key = key_of(self.principal)
        self.timed_from = self.started
        self.nest_in(self.parent)
        self.bound_by = _stopped_here(self.principal)
        self.inside_set_aside = set_aside_depth()

    def nest_in(self, parent: RunState | None) -> None:
        """Answer to ``parent`` (and what it answers to): its caps bind this
        run, and its ledgers (its root's) are the ones this run spends."""
        if self.parent is not None and self.parent is not parent:
            self.parent.open_children.pop(self.run_id, None)
        self.parent = parent
        self.handle.parent = parent.handle if parent is not None else None
        if parent is not None:
            parent.open_children[self.run_id] = self
            parent.root.live_nested[self.run_id] = self
            self.facts.ledger_used = parent.facts.ledger_used
        enclosing = parent.bounds if parent is not None else ()
        # a shadow Harness's caps bind its own runs only
        self.enclosing_bounds = tuple(b for b in enclosing if b.limits.enforced or b.limits is self.limits)
        self.binds_itself = all(bound.limits is not self.limits for bound in self.enclosing_bounds)

    def nest_on_resume(self) -> bool:
        """A parked run resumed from a tool of another live run than the one
        it was nested in (that one settled: a sub-agent resumed from its
        lead's next reply) is nested in the live one, whose caps it answers
        to now (``True``). Resumed outside any run, it keeps its settled
        parent: the task whose caps it spends. Never in a run nested in it
        (a lead resumed from its own sub-agent's tool): no cycle. Resumed in
        its own live parent, it answers to what that parent answers to now
        (the parent may have been re-nested meanwhile)."""
        if self.parent is not None and self.parent.report is None:
            self.nest_in(self.parent)
            return False
        parent = live_parent(self.run_id)
        if parent is None or parent is self.parent or self._encloses(parent):
            if self.parent is not None:  # live again: its root's work in flight (its slot kept for it)
                self.root.live_nested[self.run_id] = self
            return False
        self.nest_in(parent)
        return True

    def _encloses(self, run: RunState) -> bool:
        """Whether ``run`` is nested in this one (or is it)."""
        while run is not None:
            if run is self:
                return True
            run = run.parent  # type: ignore[assignment]
        return False

    @property
    def bounds(self) -> tuple[RunState, ...]:
        """The runs whose ``limits`` bind this one, outermost first: of each
        Harness's limits in the nesting, the outermost run holding them (its
        counters include every run inside it). Fixed at open, so a check costs
        one step per Harness of the nesting, not per call made."""
        return (*self.enclosing_bounds, self) if self.binds_itself else self.enclosing_bounds

    def set_deadline(self, deadline: float | None) -> None:
        """A new deadline (a resumed reply's): what the run and every task
        it started read, through its handle, even after the run is freed."""
        self.deadline = self.handle.deadline = deadline
        self.timed_from = time.monotonic()

    def resume_by(self, principal: Principal | None) -> None:
        """Who resumes the parked run. The caller who parked it acts with
        what is bound now, so every gate judges the resumed call on it (a
        tool taken from ``allowed_tools`` or an account changed since the
        park counts); another caller is recorded, and refused."""
        self.resumed_by = principal
        if same_caller(self.principal, principal):
            self.act_for(principal)

    def act_for(self, principal: Principal | None) -> None:
        """The caller the run acts for from here (its handle says whom)."""
        self.principal = principal
        self.handle.key = key_of(principal)

    def resumed_by_another(self) -> bool:
        """Whether the caller bound at a resume is not the one who parked the
        run: another tenant or user, or nobody. The same caller's other
        attributes may differ (a web app's per-request id): a caller is its
        ``Principal.key``, as its approvals and spend are."""
        return self.parked_by_another or not same_caller(self.principal, self.resumed_by)

    def ledger_cap(self, name: str, cap: int) -> int:
        """A ledger's cap in this run (call on the root): the configured
        ``cap`` plus what a human approved."""
        return cap + (made(self, "ledger_extra") or {}).get(name, 0)

    def time_left(self) -> float | None:
        """Seconds before the deadline (negative past it; ``None``: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def ended_callless(self) -> bool:
        """Whether the run's end leaves it no model call, not even one
        narrowed to its structured output: one of ``CALLLESS_ENDS``, or it
        waits for its user (a budget question: a call now would spend past
        what the parked budget carries)."""
        end = self.facts.terminal
        return end is not None and (
            self.acts_for_nobody or end.reason in CALLLESS_ENDS or end.state == TerminalState.WAITING_INPUT.value
        )

    def past_deadline(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def root(self) -> RunState:
        """The outermost run of a nesting (itself when not nested)."""
        run = self
        while run.parent is not None:
            run = run.parent
        return run

    @property
    def depth(self) -> int:
        """How many runs' tools this one runs inside (0: none): those it is
        nested in, and the live runs set aside where it, or a run it is nested
        in, opened (an awaited reply for another caller): each is cut at its
        deadline after its own tools, so it ends with its own answer."""
        depth, inside, run = 0, self.inside_set_aside, self
        while run.parent is not None:
            depth, run = depth + 1, run.parent
            inside = max(inside, depth + run.inside_set_aside)
        return max(depth, inside)

    def _bounds_of(self, enforced_only: bool) -> Iterator[RunState]:
        """``bounds``; ``enforced_only``: those of enforcing Harnesses."""
        return (bound for bound in self.bounds if bound.limits.enforced or not enforced_only)

    def model_calls_spent(self, enforced_only: bool = False) -> int | None:
        """The ``max_model_calls`` reached among the runs this one answers to
        (``None``: calls are left); ``enforced_only``: among enforcing
        Harnesses' caps."""
        calls = self.model_call_cap(enforced_only)
        return calls[1] if calls is not None and calls[0] >= calls[1] else None

    def model_cap_reached_above(self) -> bool:
        """An enforcing ``max_model_calls`` is reached that a run this one is
        nested in holds (a sub-agent under the same Harness shares its lead's):
        this run's structured output gets no rounds past it."""
        return any(
            bound is not self and (cap := bound.limits.max_model_calls) is not None and bound.model_calls >= cap
            for bound in self._bounds_of(enforced_only=True)
        )

    def model_call_cap(self, enforced_only: bool = False) -> tuple[int, int] | None:
        """``(used, cap)`` of the ``max_model_calls`` with the fewest calls
        left among the runs this one answers to (``None``: none is capped);
        ``enforced_only``: among enforcing Harnesses' caps."""
        return _tightest((b.model_calls, b.limits.max_model_calls) for b in self._bounds_of(enforced_only))

    def tool_call_cap(self, enforced_only: bool = False) -> tuple[int, int] | None:
        """``(used, cap)`` of the ``max_tool_calls`` with the fewest calls
        left among the runs this one answers to (``None``: none is capped);
        ``enforced_only``: among enforcing Harnesses' caps."""
        return _tightest((b.tool_calls_total, b.limits.max_tool_calls) for b in self._bounds_of(enforced_only))

    def request_input_cap(self, enforced_only: bool = False) -> int | None:
        """The lowest ``max_request_input_tokens`` among the runs this one
        answers to (``None``: none is capped); ``enforced_only``: among
        enforcing Harnesses' caps."""
        caps = [
            cap for bound in self._bounds_of(enforced_only)
            if (cost := bound.limits.cost) is not None and (cap := cost.max_request_input_tokens) is not None
        ]
        return min(caps, default=None)

    def note_model_call_s(self, seconds: float) -> None:
        """How long a model call took (the root keeps the longest)."""
        root = self.root
        root.longest_model_call_s = max(root.longest_model_call_s, seconds)

    def add_model_call(self) -> None:
        """Count a model call here and in every ancestor (run-wide caps
        include sub-agents)."""
        run: RunState | None = self
        while run is not None:
            run.model_calls += 1
            run = run.parent

    def add_usage(
        self, input_tokens: int, output_tokens: int, usd: float, model_name: str, cached_input_tokens: int = 0,
    ) -> None:
        """Charge tokens and USD here and in every ancestor (a sub-agent
        spends its parent's budget). A run opened under another Harness is
        charged at its own price of the model, when its policy has one
        (``usd`` is the charging Harness's price): a sub-agent's Harness
        cannot make its parent's budget cheaper."""
        run: RunState | None = self
        while run is not None:
            run.input_tokens += input_tokens
            run.output_tokens += output_tokens
            run.largest_output_tokens = max(run.largest_output_tokens, output_tokens)
            cost = run.limits.cost
            price = cost.price_of(model_name) if cost is not None else None
            run.facts.spent_usd += usd if price is None else price.usd(input_tokens, output_tokens, cached_input_tokens)
            run = run.parent

    def priced(self) -> bool:
        """Whether a cost policy prices this run's calls: its own Harness's
        or that of a run it is nested in (``add_usage`` charges each)."""
        run: RunState | None = self
        while run is not None:
            if run.limits.cost is not None:
                return True
            run = run.parent
        return False

    def stored_today(self, usd: float, total: float) -> None:
        """The store counted ``usd`` more of this run's spend, the day's total
        now ``total``: the spend beside this run's own moves on with it."""
        self.stored_usd += usd
        self.daily_spent_usd = total - self.stored_usd

    def charge_candidates(
        self, input_tokens: int, output_tokens: int, usd: float, model_name: str, cached_input_tokens: int = 0,
    ) -> None:
        """A model call's usage on the candidate policy of every Harness
        whose runs this one is (or is nested in), once each, at its own
        prices (``usd``: the charging Harness's price, where it has none): a
        sub-agent under another Harness spends its lead's candidate budget
        as it spends the live one."""
        charged: set[int] = set()
        run: RunState | None = self
        while run is not None:
            candidate = run.table.candidate
            if candidate is not None and id(candidate) not in charged:
                charged.add(id(candidate))
                candidate.charged(run, input_tokens, output_tokens, usd, model_name, cached_input_tokens)
            run = run.parent

    def tell_enclosing_runs(self, succeeded_tool: str, args: Mapping[str, Any], confirmed: bool = True) -> None:
        """A tool succeeded here with ``args`` (``confirmed``: else made, its
        result withheld, ``facts.unconfirmed``): every run this one is nested
        in knows its sub-agents did it (``claims`` are checked run-wide)."""
        below, run = self, self.parent
        while run is not None:
            (run.facts.done_otherwise if confirmed else run.facts.unconfirmed).setdefault(
                succeeded_tool, []).append(args)
            if below.called_by is not None and confirmed:  # what a later reply's claims may stand on
                run.done_inside.setdefault(below.called_by, {}).setdefault(succeeded_tool, []).append(args)
            below, run = run, run.parent

    def dependency_went_down(self, tool: str) -> None:
        """``tool``'s dependency is down for this run and every run it is
        nested in: a lead left without a sub-agent's data is as tempted to
        make its answer up as the sub-agent (its answer is replaced, and the
        run ends ``dependency_down``, as if it had called the tool itself).
        A shadow Harness's finding stays on its own run: it enforces nothing
        on the runs it is nested in (its breaker's refusal let the call run)."""
        run: RunState | None = self
        while run is not None:
            run.facts.dependency_down.add(tool)
            if not run.limits.enforced:
                return
            run = run.parent

    def enclosing_end(self) -> Terminal | None:
        """How a run this one is nested in was stopped short of its task
        (``incomplete``, ``failed``; ``None``: none was), by an enforcing
        Harness: a sub-agent is part of its lead's task, and nothing of a
        stopped task acts on, awaited or in a background task, before the
        lead settles or after. A lead that completed or waits for its user
        leaves its sub-agents to their own rules (a background worker goes
        on; one parked goes on when resumed). An end decided only as the
        lead settled (AgentScope's ``max_iters``, a claim it could not back)
        is its report's."""
        run = self.parent
        while run is not None:
            end = run.facts.terminal or _settled_end(run.report)
            if end is not None and end.state in SHORT_ENDS and run.limits.enforced:
                return end
            run = run.parent
        run = self
        while run is not None:  # the task it (or a run it is nested in) opened in was stopped before
            if run.bound_by is not None:
                return run.bound_by
            run = run.parent
        return None

    def stopped_short(self) -> Terminal | None:
        """How this settled run, or one it is part of, was stopped short of
        its task by an enforcing Harness (``None``: none was)."""
        end = _settled_end(self.report)
        if end is not None and end.state in SHORT_ENDS and self.limits.enforced:
            return end
        return self.enclosing_end()

    def add_tool_call(self, n: int = 1) -> None:
        """Count admitted tool calls run-wide (``-1`` gives one back)."""
        run: RunState | None = self
        while run is not None:
            run.tool_calls_total += n
            run = run.parent

    def record(self, decision: Decision) -> None:
        """Keep a decision for the report and for the next event flush."""
        self.decisions.append(decision)
        self.unflushed.append(decision)
        if decision.action == "refuse" and decision.enforced:
            self.refusals[decision.code or "policy_refused"] += 1
            self.refusals_by_hook[decision.hook] += 1

    def take_unflushed(self) -> list[Decision]:
        """Decisions not yet emitted as events (then forgotten by the buffer)."""
        out, self.unflushed = self.unflushed, []
        return out

    def still_running(self) -> list[str]:
        """Its calls still running (``tool:call_id``), then each nested run
        not settled (``sub_run:agent:run_id``) and what runs in it
        (``agent/`` before each entry): side effects that may still happen."""
        running = [f"{name}:{call_id}" for call_id, name in self.in_flight.items()]
        for child in list(self.open_children.values()):
            running.append(f"sub_run:{child.agent_name}:{child.run_id}")
            running += [f"{child.agent_name}/{entry}" for entry in child.still_running()]
        return running

    def met_by_enclosing_runs(self, refused: tuple[str, str, str | None], enforced: bool) -> None:
        """A call for another user is every enclosing run's attempt too: each
        meets it at its next round (a lead sending a fresh sub-agent after
        each refusal climbs its own ladder), told as it is refused (a
        sub-agent that ends in that batch never reaches another round). A
        refusal shadow mode only recorded (``enforced`` False) moves no
        enforcing run's ladder: nothing was refused there."""
        run = self.parent
        while run is not None:
            if enforced or not run.limits.enforced:
                run.facts.refused.append(refused)
            run = run.parent

    def holds_call(self, call_id: str) -> bool:
        """Whether a call of this run holds ``call_id``: being judged,
        admitted, running, or parked for a human or a client."""
        for name in _HOLDING:
            held = made(self, name)
            if held and call_id in held:
                return True
        return False

    def remember_sentinel(self, code: str, text: str) -> None:
        """Sentinels the audit may strip from the final answer."""
        self.issued.add(text)
        self.issued.add(f"[harness:{code}]")


def _stopped_here(principal: Principal | None) -> Terminal | None:
    """The end of the run whose context this is, or of one it was nested in,
    when it settled stopped short of its task for ``principal`` (its handle
    says so: the run may be freed). Another principal's run opened there (a
    shared worker a tool started) is a task of its own."""
    key = key_of(principal)
    handle = RUN_HANDLE.get()
    while handle is not None:
        if handle.stopped is not None and handle.key == key:
            return handle.stopped
        handle = handle.parent
    return None


def _settled_end(report: RunReport | None) -> Terminal | None:
    """How a settled run ended, as its report says (``None``: not settled)."""
    return None if report is None else Terminal(report.terminal_state.value, report.reason)


def _tightest(caps: Iterable[tuple[int, int | None]]) -> tuple[int, int] | None:
    """Of ``(used, cap)`` pairs, the capped one with the least left."""
    tightest: tuple[int, int] | None = None
    for used, cap in caps:
        if cap is not None and (tightest is None or cap - used < tightest[1] - tightest[0]):
            tightest = (used, cap)
    return tightest


class ResultAccount:
    """The tool results in the agent's context that are not pruned, oldest
    first, with their token total: kept up to date from the blocks appended
    since the last round (``scanned_to``), so a round costs what it added,
    not what the run holds. ``rounds`` counts the run's ``pre_think`` rounds;
    ``pruned_round`` is the round of the last prune (prunes are spaced);
    ``fresh`` counts the newest results, added since the previous round: the
    model has not read them yet."""

    __slots__ = (
        "blocks", "content", "context", "fresh", "live", "msg_index", "pruned", "pruned_round", "rounds",
        "tokens",
    )

    def __init__(self) -> None:
        self.live: dict[str, tuple[ContextResult, Any]] = {}
        """``(result, block)`` by result id, oldest first."""
        self.pruned: set[str] = set()
        """Ids of the results the pruner replaced: the model can no longer read them."""
        self.tokens = 0
        self.fresh = 0
        self.rounds = 0
        self.pruned_round: int | None = None
        self.context: list[Any] | None = None
        self.msg_index = 0
        self.content: Any = None
        self.blocks = 0

    def scanned_to(self, context: list[Any]) -> tuple[int, int] | None:
        """Where the scan of ``context`` resumes (message index, block
        index); ``None`` when the context was replaced or rewritten since
        (compression, a cleared history): the account is then rebuilt."""
        i = self.msg_index
        if self.context is None or context is not self.context or i >= len(context):
            return None
        content = context[i].content
        if content is not self.content or (isinstance(content, list) and len(content) < self.blocks):
            return None
        return i, self.blocks

    def mark(self, context: list[Any]) -> None:
        """The scan reached the end of ``context``."""
        self.context = context
        self.msg_index = max(len(context) - 1, 0)
        last = context[-1].content if context else None
        self.content = last
        self.blocks = len(last) if isinstance(last, list) else 0

    def reset(self) -> None:
        """Forget every result (the context is scanned again from the start)."""
        self.live.clear()
        self.tokens = 0
        self.context = None

    def add(self, result: ContextResult, block: Any) -> None:
        """A result entered the context (a pruned placeholder is not live)."""
        if result.pruned or result.id in self.live:
            return
        self.live[result.id] = (result, block)
        self.tokens += result.tokens
        self.fresh += 1

    def take(self, result_id: str) -> Any:
        """Remove a live result (it is being pruned); its block, or ``None``."""
        entry = self.live.pop(result_id, None)
        if entry is None:
            return None
        self.tokens -= entry[0].tokens
        return entry[1]

    def snapshot(self) -> list[ContextResult]:
        """The live results, oldest first."""
        return [result for result, _ in self.live.values()]


@dataclass
class RunTable:
    """The slots of live runs, keyed by reply id. Owned by one Harness."""

    slots: dict[str, RunState] = field(default_factory=dict)
    loop_window: int = 6
    limits: RunLimits = NO_LIMITS
    """The caps of the owning Harness's config, given to each run it opens."""
    candidate: Candidate | None = None
    """The owning Harness's candidate policy: it judges this table's runs,
    and is charged what runs nested in them spend, whichever Harness opened
    those."""
    guard: Any = None
    """The owning Harness's ``ModelGuard``: a model call a middleware makes
    itself in one of this table's runs goes through it."""
    parked: weakref.WeakKeyDictionary[Any, list[str | None]] = field(
        default_factory=weakref.WeakKeyDictionary,
    )
    """The run each agent parked on a human (in a holder of one), kept until
    resumed or replaced, or until the agent is collected (nobody can resume
    it then: its slot goes with it)."""
    current: weakref.WeakKeyDictionary[Any, RunState] = field(
        default_factory=weakref.WeakKeyDictionary,
    )
    """Each agent's live run: a new reply of the agent finds one its
    consumer abandoned (a stream dropped, not yet collected)."""

    def bind(self, agent: Any, run: RunState) -> RunState | None:
        """Make ``run`` the agent's live run; the one it replaces, if any."""
        try:
            previous = self.current.get(agent)
            self.current[agent] = run
        except TypeError:
            return None
        return previous if previous is not run else None

    def unbind(self, agent: Any, run: RunState) -> None:
        """The agent's run ended: nothing keeps it alive from here."""
        try:
            if self.current.get(agent) is run:
                del self.current[agent]
        except TypeError:
            pass

    def holder_of(self, holders: weakref.WeakKeyDictionary[Any, list[str | None]], agent: Any) -> list[str | None]:
        """The agent's holder in ``holders`` of one run's id (made on first
        use): the run it names leaves the table with the agent (collected,
        nobody can go on with it). ``TypeError``: no weak reference can key
        the agent."""
        holder = holders.get(agent)
        if holder is None:
            holder = holders[agent] = [None]
            weakref.finalize(agent, _drop_held, weakref.ref(self), holder)  # weak: the table may go first
        return holder

    def park(self, agent: Any, run_id: str) -> None:
        """A reply parked on human-in-the-loop keeps its slot until resumed."""
        try:
            self.holder_of(self.parked, agent)[0] = run_id
        except TypeError:  # an agent no weak reference can key: not kept as parked
            pass

    def take_parked(self, agent: Any) -> RunState | None:
        """The run the agent parked on a human, no longer parked (resumed,
        or replaced by a new reply); ``None``: none is."""
        try:
            holder = self.parked.get(agent)
        except TypeError:
            return None
        if holder is None or holder[0] is None:
            return None
        run_id, holder[0] = holder[0], None
        return self.slots.get(run_id)

    def forget_parked(self, run_id: str) -> None:
        """No agent holds ``run_id`` parked any more (it went on in another
        process): a later reply of the agent that parked it must not take
        a new run under the same id for it."""
        for holder in list(self.parked.values()):
            if holder[0] == run_id:
                holder[0] = None

    def open(
        self,
        run_id: str,
        agent_name: str,
        session_id: str | None,
        principal: Principal | None,
        deadline: float | None,
        parent: RunState | None,
        mode: str,
        limits: RunLimits | None = None,
    ) -> RunState:
        """Create the slot of a new run (a nested run shares its root's
        ledgers: ``RunState.nest_in``), under the table's limits unless others
        are given."""
        facts = GuardState(
            recent_tools=deque(maxlen=self.loop_window),
            recent_digests=deque(maxlen=self.loop_window),
        )
        run = RunState(
            run_id=run_id,
            agent_name=agent_name,
            session_id=session_id,
            principal=principal,
            deadline=deadline,
            facts=facts,
            table=self,
            parent=parent,
            limits=self.limits if limits is None else limits,
            mode=mode,
        )
        self.slots[run_id] = run
        return run

    def get(self, run_id: str) -> RunState | None:
        """The live slot of a run, if any."""
        return self.slots.get(run_id)

    def drop(self, run_id: str) -> None:
        """The one reset: forget the run."""
        self.slots.pop(run_id, None)

    def __len__(self) -> int:
        return len(self.slots)


def _drop_held(table: weakref.ref[RunTable], holder: list[str | None]) -> None:
    live = table()
    if live is not None and holder[0] is not None:
        live.slots.pop(holder[0], None)


def key_of(principal: Principal | None) -> str:
    """Whom a run acts for: its principal's key, ``""`` for none."""
    return principal.key if principal is not None else ""


def same_caller(one: Principal | None, other: Principal | None) -> bool:
    """Whether two bound principals are the same caller: the same
    ``Principal.key`` (tenant and user), whatever their other attributes (a
    web app's per-request id); nobody is only nobody."""
    if one is None or other is None:
        return one is other
    return one.key == other.key


def principal_dict(principal: Any) -> dict[str, Any] | None:
    """The principal as plain JSON data for a report."""
    if principal is None:
        return None
    data = principal.model_dump(mode="json") if hasattr(principal, "model_dump") else dict(vars(principal))
    return data
