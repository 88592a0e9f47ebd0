"""Human approvals: what a human was shown, what they approved to remember,
and budget extensions they granted.

- ``approval_digest`` is the exact identity of a call a human was asked
  about (tool name + AgentScope's parsed arguments, never normalised): a
  resumed call must match it byte for byte.
- ``ApprovalBook`` keeps remembered approvals ("always allow ``refund``
  under $50 for this session") per principal and session, bounded and
  expiring, and USD extensions granted to an agent whose run parked on its
  budget.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import numbers
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .context import awaited
from .facts import thawed
from .run_state import key_of

if TYPE_CHECKING:
    from .harness import Principal

MAX_SESSIONS = 4096
"""Principal+session pairs whose remembered approvals are kept (LRU)."""
MAX_GRANTS = 64
"""Remembered approvals kept per principal+session (the oldest go first)."""


def approval_digest(tool: str, args: Any) -> str:
    """Exact identity of a call: ``" A1"`` and ``"A1"`` are different
    approvals (the duplicate-call digest normalises; this one must not)."""
    canonical = json.dumps([tool, thawed(args)], sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Grant:
    """One remembered approval: ``tool`` for this principal and session,
    while ``when(args)`` is true (or always), until ``expires_at``."""

    tool: str
    when: Callable[[dict[str, Any]], Any] | None
    expires_at: float


@dataclass
class UsdExtension:
    """An extension granted to an agent whose run parked on its budget: the
    agent's next reply continues that budget (``carried_usd`` already spent)
    with ``usd`` more."""

    carried_usd: float
    largest_output_tokens: int = 0
    """The most output tokens one model call of the parked run produced: the
    continued run estimates its calls' output from there, not from nothing."""
    carried_input_tokens: int = 0
    carried_output_tokens: int = 0
    """The tokens the parked task used: its token caps continue too."""
    carried_extra_usd: float = 0.0
    """What earlier extensions added to the cap of the budget being continued:
    a second extension adds to the first, never replaces it."""
    usd: float = 0.0
    """The extensions approved so far, added up: what the cap grows by."""
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """Each approval as the report lists it, ``{"by": usd, "approved_by":
    user_id | None}``: two approvers (or one approving twice) are two."""
    claim: str = ""
    """The park's id: the one reply that continues it claims it in the
    store (``Fleet.claim_parked_budget``); a state kept before it had one
    reads as ``""`` (nothing claimed: continued as before)."""


@dataclass
class ApprovalBook:
    """Remembered approvals and pending budget extensions of one Harness."""

    clock: Callable[[], float] = time.monotonic
    _grants: OrderedDict[tuple[str, str | None], list[Grant]] = field(default_factory=OrderedDict)
    """Per agent, the parked budget of each caller (by ``Principal.key``)
    whose run parked on it: only that caller's next reply continues it."""
    _rules: dict[int, tuple[weakref.ref[Any], list[tuple[Any, str]]]] = field(default_factory=dict)
    """Per permission context (by id, with a weak reference to it: agents
    may share one), the rules confirmations gave it and the key of the
    principal who gave each."""
    _hidden: dict[int, tuple[int, list[tuple[list[Any], list[Any]]]]] = field(default_factory=dict)
    """Per permission context judged without others' rules now: how many
    calls judge it so, and each rule list as it was."""

    # ---------------------------------------------------- remembered approvals

    def grant(
        self, principal: Principal, session_id: str | None, tool: str,
        when: Callable[[dict[str, Any]], Any] | None, ttl_s: float,
    ) -> Grant:
        """Remember that ``principal`` approved ``tool`` in ``session_id``."""
        if not (math.isfinite(ttl_s) and ttl_s > 0):  # NaN and infinity too: neither expires
            raise ValueError("ttl_s must be a finite number above 0: a remembered approval always expires")
        key = (principal.key, session_id)
        grants = [g for g in self._grants.pop(key, []) if g.expires_at > self.clock()]
        item = Grant(tool=tool, when=when, expires_at=self.clock() + ttl_s)
        grants = [*grants, item][-MAX_GRANTS:]
        self._grants[key] = grants
        while len(self._grants) > MAX_SESSIONS:
            self._grants.popitem(last=False)
        return item

    def revoke(self, principal: Principal, session_id: str | None, tool: str | None = None) -> None:
        """Forget ``tool``'s remembered approvals (all tools when ``None``)."""
        key = (principal.key, session_id)
        kept = [g for g in self._grants.get(key, []) if tool is not None and g.tool != tool]
        if kept:
            self._grants[key] = kept
        else:
            self._grants.pop(key, None)

    async def covers(
        self, principal: Principal | None, session_id: str | None, tool: str, args: Mapping[str, Any],
        bound: Callable[[Awaitable[Any]], Awaitable[Any]],
    ) -> bool:
        """A live remembered approval of this principal and session covers
        the call. ``when`` is awaited through ``bound`` (the hook timeout
        and the deadline); one that raises or times out covers nothing
        (fail closed)."""
        if principal is None:
            return False
        key = (principal.key, session_id)
        grants = self._grants.get(key)
        if not grants:
            return False
        now = self.clock()
        live = [g for g in grants if g.expires_at > now]
        if len(live) != len(grants):
            if live:
                self._grants[key] = live
            else:
                del self._grants[key]
        for grant in live:
            if grant.tool == tool and await _holds(grant.when, thawed(args), bound) and self._still_given(key, grant):
                return True
        return False

    def _still_given(self, key: tuple[str, str | None], grant: Grant) -> bool:
        """``grant`` neither expired nor was revoked while its ``when`` was awaited."""
        return grant.expires_at > self.clock() and any(g is grant for g in self._grants.get(key, ()))

    # ----------------------------------------------- AgentScope's permission rules

    def rules_given(self, agent: Any, rules: Iterable[Any], principal: Principal | None) -> None:
        """``principal`` confirmed a call with these rules ("always allow"):
        AgentScope keeps them on ``agent``, for whoever it serves next."""
        given = [(rule, key_of(principal)) for rule in rules]
        context = _permission_context(agent)
        if not given or context is None:
            return
        for key in [k for k, (ref, _) in self._rules.items() if ref() is None]:  # contexts gone
            del self._rules[key]
        owned = self._rules.setdefault(id(context), (weakref.ref(context), []))[1]
        owned.extend(given)

    def only_rules_of(self, agent: Any, principal: Principal | None) -> contextlib.AbstractContextManager[None]:
        """AgentScope's permission engine of ``agent`` without the rules other
        principals gave it, while a call of ``principal``'s is judged: an
        "always allow" serves the principal who gave it, as a remembered
        approval does. Nothing to do (the common case, on every call) costs
        no generator."""
        if not self._rules:
            return _NOTHING_HIDDEN
        context = _permission_context(agent)
        entry = self._rules.get(id(context)) if context is not None else None
        key = key_of(principal)
        foreign = [rule for rule, owner in entry[1] if owner != key] if entry and entry[0]() is context else []
        return self._hiding(context, foreign) if foreign else _NOTHING_HIDDEN

    @contextlib.contextmanager
    def _hiding(self, context: Any, foreign: list[Any]) -> Iterator[None]:
        """``foreign`` out of ``context`` while the call is judged. Calls
        judged at once share one hiding (counted): each takes out the rules
        foreign to it too, and all come back with the last."""
        count, saved = self._hidden.get(id(context), (0, []))
        self._hidden[id(context)] = (count + 1, [*saved, *_without(context, foreign)])
        try:
            yield
        finally:
            count, saved = self._hidden[id(context)]
            if count == 1:
                del self._hidden[id(context)]
                for rules, before in reversed(saved):  # the earliest state last: as it was
                    rules[:] = before
            else:
                self._hidden[id(context)] = (count - 1, saved)

    # -------------------------------------------------------- USD extensions

    def budget_parked(
        self, agent: Any, owner: Principal | None, spent_usd: float, largest_output_tokens: int,
        extra_usd: float = 0.0, tokens: tuple[int, int] = (0, 0),
    ) -> None:
        """``agent``'s run for ``owner`` parked on its budget having spent
        ``spent_usd`` and ``tokens`` (input, output), its cap raised by
        ``extra_usd`` of earlier extensions: the owner's next reply continues
        that budget until a human extends it."""
        parked = _parked_budgets(agent, create=True)
        if parked is not None:
            parked[key_of(owner)] = asdict(UsdExtension(
                carried_usd=spent_usd, largest_output_tokens=largest_output_tokens,
                carried_input_tokens=tokens[0], carried_output_tokens=tokens[1], carried_extra_usd=extra_usd,
                claim=uuid.uuid4().hex,
            ))

    def extend(self, agent: Any, usd: float, approved_by: Principal | None) -> UsdExtension:
        """A human (``approved_by``) approved ``usd`` more for ``agent``'s
        parked budget: the approver's own, else the only one parked."""
        # NaN would poison the sum, infinity lift the cap, True read as 1
        if isinstance(usd, bool) or not isinstance(usd, numbers.Real) or not (math.isfinite(usd) and usd > 0):
            raise ValueError(f"an extension must be a finite amount above 0, not {usd!r}")
        usd = float(usd)  # a numpy float is kept as the state reads it back (else the park reads as none)
        owner, pending = self._parked(agent, approved_by)
        if not math.isfinite(pending.usd + usd):  # finite amounts whose sum is not
            raise ValueError(f"an extension must be a finite amount above 0: {usd!r} more is not")
        pending.usd += usd
        pending.approvals.append({"by": usd, "approved_by": approved_by.user_id if approved_by is not None else None})
        parked = _parked_budgets(agent)
        assert parked is not None  # ``_parked`` found it there
        parked[owner] = asdict(pending)
        return pending

    def decline(self, agent: Any, declined_by: Principal | None) -> None:
        """A human declined to extend ``agent``'s parked budget (the
        decliner's own, else the only one parked): forget it."""
        owner, _ = self._parked(agent, declined_by)
        parked = _parked_budgets(agent)
        assert parked is not None
        del parked[owner]

    def _parked(self, agent: Any, bound: Principal | None) -> tuple[str, UsdExtension]:
        """The parked budget a human acting as ``bound`` decides on, and its owner's key."""
        parked = {
            owner: extension for owner, value in (_parked_budgets(agent) or {}).items()
            if (extension := _extension(value)) is not None
        }
        if not parked:
            raise ValueError("this agent has no run waiting on its budget")
        own = key_of(bound)
        if own in parked:
            return own, parked[own]
        if len(parked) > 1:
            raise ValueError(
                "runs of several callers wait on this agent's budget: bind the caller "
                "(Harness.acting_for) whose run to decide on",
            )
        return next(iter(parked.items()))

    def parked_of(self, agent: Any, caller: Principal | None) -> UsdExtension | None:
        """The budget ``agent``'s new run for ``caller`` continues, if one is
        parked. Another caller's run is a task of its own: a parked budget
        and its extension stay for the caller whose run parked."""
        parked = _parked_budgets(agent)
        return _extension(parked.get(key_of(caller))) if parked else None

    def take(self, agent: Any, caller: Principal | None) -> None:
        """Forget ``caller``'s parked budget of ``agent``: a run continues it."""
        parked = _parked_budgets(agent)
        if parked:
            parked.pop(key_of(caller), None)


BUDGETS_KEY = "agentscope_harness.parked_budgets"
"""Where an agent's parked budgets are kept: in its state's
``middle_context`` (AgentScope's place for a middleware's data across
replies), so they travel with the state to whichever worker, or restart,
the next message reaches."""


def _parked_budgets(agent: Any, create: bool = False) -> dict[str, Any] | None:
    """The parked budgets in ``agent``'s state, by their owner's key (``None``:
    an agent without a state to keep them in)."""
    middle = getattr(getattr(agent, "state", None), "middle_context", None)
    if not isinstance(middle, dict):
        return None
    parked = middle.get(BUDGETS_KEY)
    if not isinstance(parked, dict):
        if not create:
            return None
        parked = middle[BUDGETS_KEY] = {}
    return parked


def _extension(value: Any) -> UsdExtension | None:
    """A parked budget as the state keeps it (``None``: none, or one that does
    not read back as one: a state edited or of another version)."""
    if not isinstance(value, dict):
        return None
    if "approved_by" in value:  # kept by 0.1: one approver for the sum
        value = {**value, "approvals": [{"by": value.get("usd"), "approved_by": value["approved_by"]}]
                 if value.get("usd") else []}
        del value["approved_by"]
    try:
        extension = UsdExtension(**value)
    except TypeError:
        return None
    numbers = (extension.carried_usd, extension.carried_extra_usd, extension.usd)
    if not all(type(n) in (int, float) and math.isfinite(n) and n >= 0 for n in numbers):
        return None
    counts = (extension.largest_output_tokens, extension.carried_input_tokens, extension.carried_output_tokens)
    if not all(type(n) is int and n >= 0 for n in counts):
        return None
    if not _approvals_add_up(extension):
        return None
    if type(extension.claim) is not str:
        return None
    return extension


def _approvals_add_up(extension: UsdExtension) -> bool:
    """Each approval a positive amount by a user id or nobody, together the extension."""
    approvals = extension.approvals
    if type(approvals) is not list or not all(
        type(a) is dict and a.keys() == {"by", "approved_by"} and type(a["by"]) in (int, float)
        and math.isfinite(a["by"]) and a["by"] > 0 and (a["approved_by"] is None or type(a["approved_by"]) is str)
        for a in approvals
    ):
        return False
    return math.isclose(sum(a["by"] for a in approvals), extension.usd, rel_tol=1e-9, abs_tol=1e-12)


_NOTHING_HIDDEN = contextlib.nullcontext()


def _permission_context(agent: Any) -> Any:
    """The permission context AgentScope's engine of ``agent`` judges with
    (agents may share one), if it has one."""
    return getattr(getattr(agent, "_engine", None), "context", None)


def _without(context: Any, foreign: list[Any]) -> list[tuple[list[Any], list[Any]]]:
    """Take ``foreign`` rules out of a permission context's rule lists (by
    identity); each list changed, with what it held."""
    saved = []
    for bucket in (context.allow_rules, context.deny_rules, context.ask_rules):
        for rules in bucket.values():
            kept = [rule for rule in rules if not any(rule is f for f in foreign)]
            if len(kept) != len(rules):
                saved.append((rules, list(rules)))
                rules[:] = kept
    return saved


async def _holds(
    when: Callable[[dict[str, Any]], Any] | None, args: dict[str, Any],
    bound: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> bool:
    if when is None:
        return True
    try:
        value = await bound(awaited(when(args)))
    except Exception:
        return False
    return bool(value)


__all__ = ["ApprovalBook", "Grant", "UsdExtension", "approval_digest"]
