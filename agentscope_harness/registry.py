"""Hook registration: the six points, ``@harness_hook`` and the ordering rule
(ascending priority, ties by name)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import FunctionType
from typing import Any, Literal

from .errors import HarnessConfigError

HOOK_POINTS: tuple[str, ...] = (
    "on_system_prompt",
    "pre_think",
    "pre_tool_call",
    "post_tool_call",
    "post_reflect",
    "on_session_end",
)
"""Where hooks run, in the order a round meets them (DESIGN section 4)."""

TOOL_POINTS: tuple[str, ...] = ("pre_tool_call", "post_tool_call")
"""The points that judge one tool call (where ``when=`` applies)."""

HookKind = Literal["safety", "efficiency", "observer", "transform"]
KINDS: tuple[str, ...] = ("safety", "efficiency", "observer", "transform")


class HookRejectSignal(Exception):
    """Raised by a gate to refuse the call; the model reads ``message`` as a
    sentinel ``[harness:<code>] message`` (or verbatim with ``raw=True``).

    ``hard=True`` marks a refusal on an exact fact raised by an efficiency
    hook: the escape latch never lets it through.
    """

    def __init__(
        self,
        message: str,
        code: str = "policy_refused",
        *,
        raw: bool = False,
        ref: str | None = None,
        hard: bool = False,
    ) -> None:
        super().__init__(message)
        problem = malformed(message, code, ref)
        if problem is not None:
            raise TypeError(f"HookRejectSignal: {problem}")
        self.message = message
        self.code = code
        self.raw = raw
        self.ref = ref
        self.hard = hard


def malformed(message: Any, code: Any, ref: Any) -> str | None:
    """What is wrong with a refusal's fields (the model reads them as a
    sentinel, the report keeps them), or ``None``."""
    if type(message) is not str:
        return f"message must be text, got {type(message).__name__}"
    if type(code) is not str or not code:
        return f"code must be non-empty text, got {code!r}"
    if ref is not None and type(ref) is not str:
        return f"ref must be text or None, got {type(ref).__name__}"
    return None


@dataclass(frozen=True)
class HookSpec:
    """One registered hook: where it runs, in which order, and how it fails."""

    fn: Callable[..., Any]
    point: str
    priority: int
    name: str
    kind: str = "observer"
    escape_key: str | None = None
    module: str = ""
    """Where the hook comes from, as reports and errors name it (by hand:
    the function's module when left blank)."""
    is_async: bool | None = field(default=None, compare=False)
    """Whether ``fn`` is a coroutine function (by hand: read from it when left out)."""
    fail_closed: bool | None = None
    when: Callable[[Any, Any], bool] | None = field(default=None, compare=False)
    """``(policy, config) -> bool``: whether the hook can act at all on a
    tool call with this ``ToolPolicy`` (``None`` for an unconfigured tool)
    under this config. Tool points only; ``None`` (the default): always run.
    The runner asks once per (point, tool) and skips the hook where it is
    false, so it must not depend on the run."""

    def __post_init__(self) -> None:
        """What makes a hook what it says it is, checked however the spec
        was built (``make_spec``, or by hand: ``HookSpec`` is public)."""
        name = self.name
        if type(name) is not str or not name.strip() or name != name.strip() or "," in name:
            raise HarnessConfigError(
                f"hook name {name!r}: a name is text, not blank, with no comma nor surrounding spaces "
                "(reports, decisions and HARNESS_DISABLED_HOOKS, a comma-separated list, name hooks by it)",
            )
        if not callable(self.fn):
            raise HarnessConfigError(f"hook {name!r}: fn {self.fn!r} is not callable")
        if self.point not in HOOK_POINTS:
            raise HarnessConfigError(
                f"hook {name!r}: unknown point {self.point!r}; expected one of {HOOK_POINTS}",
            )
        if self.kind not in KINDS:
            raise HarnessConfigError(
                f"hook {name!r}: unknown kind {self.kind!r}; expected one of {KINDS}",
            )
        if self.kind == "safety" and self.escape_key is not None:
            raise HarnessConfigError(
                f"hook {name!r}: a safety gate judges an exact fact and must never "
                "declare an escape_key",
            )
        if self.fail_closed is None:  # the kind's default, as declared
            object.__setattr__(self, "fail_closed", self.kind == "safety")
        if not isinstance(self.fail_closed, bool):
            raise HarnessConfigError(f"hook {name!r}: fail_closed must be True, False or None (the kind's default)")
        if self.kind == "safety" and not self.fail_closed:
            raise HarnessConfigError(
                f"hook {name!r}: a safety hook fails closed (fail_closed=False would let the call "
                "run when the check could not); use kind='observer' for a check that may fail open",
            )
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise HarnessConfigError(f"hook {name!r}: priority must be an int")
        if self.when is not None and self.point not in TOOL_POINTS:
            raise HarnessConfigError(
                f"hook {name!r}: when= applies to the tool points {TOOL_POINTS} only",
            )
        if self.when is not None and (not callable(self.when) or inspect.iscoroutinefunction(self.when)):
            raise HarnessConfigError(
                f"hook {name!r}: when= is a plain function (policy, config) -> bool, asked once per tool "
                f"(an async one would never be awaited), not {self.when!r}",
            )
        if self.kind == "efficiency" and self.point not in TOOL_POINTS:
            raise HarnessConfigError(
                f"hook {name!r}: an efficiency gate latches open for a call; at {self.point!r} there is "
                "none, and a refusal there stops the run: use it at the tool points "
                f"{TOOL_POINTS}, or kind='observer' with ctx.hint",
            )
        if self.kind == "efficiency" and self.escape_key is None:
            object.__setattr__(self, "escape_key", name)  # frozen: its default, set once, as declared
        # a callable object: its method (``inspect`` sees through a partial itself)
        fn = self.fn
        call = fn if inspect.isroutine(fn) or isinstance(fn, functools.partial) else type(fn).__call__
        if inspect.isasyncgenfunction(call) or inspect.isgeneratorfunction(call):
            raise HarnessConfigError(
                f"hook {name!r}: a hook is a function or a coroutine function, not a generator "
                "(its body would never run)",
            )
        if not self.module:  # left out (built by hand): the function's own, a partial's wrapped one
            inner = fn.func if isinstance(fn, functools.partial) else call
            object.__setattr__(self, "module", getattr(inner, "__module__", "") or "")
        if self.is_async is None:
            object.__setattr__(self, "is_async", inspect.iscoroutinefunction(call))

    @functools.cached_property
    def builtin(self) -> bool:
        """One of the harness's own hooks: trusted to write only what it may
        (a hook of yours is checked, put back and shaped after); asked of
        every hook on every call: computed once. The built-in function
        itself, by identity: never a name that can be copied (``module`` is
        free text; a ``functools.wraps`` wrapper carries ``__module__``), an
        attribute a proxy hands on (``__code__``), a file path, nor a new
        function made of a built-in's code with globals of yours."""
        return type(self.fn) is FunctionType and self.fn in _OWN_HOOKS

    @property
    def sort_key(self) -> tuple[int, str]:
        """Ascending priority, then name."""
        return (self.priority, self.name)


_OWN_HOOKS: set[Callable[..., Any]] = set()
"""The harness's own hook functions (``own_hooks``; ``HookSpec.builtin``)."""


def own_hooks(functions: Iterable[Callable[..., Any]]) -> None:
    """Mark ``functions`` (the built-in hooks, as their package defines
    them) as the harness's own."""
    _OWN_HOOKS.update(fn for fn in functions if type(fn) is FunctionType)


def make_spec(
    fn: Callable[..., Any],
    point: str,
    priority: int = 50,
    name: str | None = None,
    kind: str = "observer",
    escape_key: str | None = None,
    fail_closed: bool | None = None,
    when: Callable[[Any, Any], bool] | None = None,
) -> HookSpec:
    """Validate and build a :class:`HookSpec` (errors name the hook)."""
    if name is None:  # a name given (blank, 0, b"") is judged as given, never replaced
        name = getattr(fn, "__name__", None) or repr(fn)
    return HookSpec(
        fn=fn, point=point, priority=priority, name=name, kind=kind, escape_key=escape_key,
        fail_closed=fail_closed, when=when,
    )


def harness_hook(
    point: str,
    priority: int = 50,
    name: str | None = None,
    kind: HookKind = "observer",
    escape_key: str | None = None,
    fail_closed: bool | None = None,
    when: Callable[[Any, Any], bool] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a function as a harness hook.

    ``kind="safety"`` hooks fail closed (a crash refuses the call, withholds
    the result or the answer); others fail open unless ``fail_closed=True``.

    ``when=(policy, config) -> bool`` (tool points only) declares for which
    tools the hook can act at all; it is skipped for the others (a saving on
    every tool call, decided once per tool).

    The function stays callable as before; its :class:`HookSpec` is attached
    as ``fn.__harness_hook__`` and the Harness picks it up from ``hooks=[...]``
    or from the ``agentscope_harness.hooks`` entry-point group.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        declared = getattr(fn, "__harness_hook__", None)
        # one attribute holds one spec: the first would be lost (a wrapper's copy of it, ``functools.wraps``, is not)
        if isinstance(declared, HookSpec) and declared.fn is fn:
            raise HarnessConfigError(
                f"hook {declared.name!r} is declared already (at {declared.point}): one function is "
                "one hook; declare a second hook on a function of its own that calls it",
            )
        first: Any = declared.fn if isinstance(declared, HookSpec) else None
        before = getattr(first, "__harness_hook__", None)
        fn.__harness_hook__ = make_spec(  # type: ignore[attr-defined]
            fn, point, priority, name, kind, escape_key, fail_closed, when,
        )
        if before is not None and getattr(first, "__harness_hook__", None) is not before:
            # the write went through to the hook declared before (``fn`` a
            # proxy of it, ``wrapt``'s): put back, or every later Harness would lose it
            first.__harness_hook__ = before
            raise HarnessConfigError(
                f"hook {before.name!r}: {fn!r} passes attributes on to it, so declaring it would "
                "replace that hook; declare a function of its own that calls it",
            )
        return fn

    return decorate


def spec_of(hook: Any) -> HookSpec:
    """The :class:`HookSpec` of a decorated function (or a spec itself)."""
    if isinstance(hook, HookSpec):
        return hook
    spec = getattr(hook, "__harness_hook__", None)
    if not isinstance(spec, HookSpec):
        raise HarnessConfigError(
            f"{hook!r} is not a harness hook: decorate it with @harness_hook",
        )
    # a decorated method (a wrapper of one too), given bound: it runs bound
    bound = inspect.ismethod(hook) and getattr(hook.__func__, "__harness_hook__", None) is spec
    return replace(spec, fn=hook) if bound else spec


def collect(hooks: Iterable[Any]) -> list[HookSpec]:
    """Specs of ``hooks``; hook packs may be modules or lists of hooks."""
    specs: list[HookSpec] = []
    for hook in hooks:
        if isinstance(hook, (list, tuple)):
            specs.extend(collect(hook))
        elif inspect.ismodule(hook):  # its declared hooks and its specs built by hand
            specs.extend(
                spec_of(v) for v in vars(hook).values() if hasattr(v, "__harness_hook__") or isinstance(v, HookSpec)
            )
        else:
            specs.append(spec_of(hook))
    return specs
