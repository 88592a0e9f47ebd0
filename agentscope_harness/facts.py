"""GuardState: the facts of one run that hooks read and write.

Facts, not phases: each field records something that happened (a call
succeeded, a ledger was charged, a fact was reached). There is no phase enum
to keep in sync; every decision is derived from these.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, deque
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from types import MappingProxyType
from typing import Any, NamedTuple

from .lazy import LazyFields, lazy, made

Batch = tuple[str, int, int]
"""The calls the model chose without reading each other's results: its
reply's id, AgentScope's round (``cur_iter``) and the harness's count of
the reply's model turns (``RunState.turns``; AgentScope's round does not
move when a client's answer resumes a reply, but the model has read it)."""

# Built once: ``json.dumps`` with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

# ``JSONEncoder.encode`` still builds its C encoder on every call; this one is
# built once with the same options (no circular-reference markers: arguments
# parsed from JSON cannot be circular). Same output as ``_CANONICAL.encode``.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = (
    _c_make_encoder(
        None, str, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, True,
    )
    if _c_make_encoder is not None else None
)


def frozen(value: Any) -> Any:
    """``value`` read-only all the way down: dicts as mapping proxies, lists
    as tuples (a hook reads a call's arguments; writing them, even a nested
    list, would change only what the gates judge, never what the tool gets)."""
    if isinstance(value, dict):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A fresh, writable copy of a ``frozen`` value, every key a string and
    every sequence a list: what JSON writes the same way compares the same
    (the canonical form of a call's arguments), and user callables such as
    ``ask_when`` may write what they are given. Strings are kept exactly as
    written: ``"A 1"`` and ``"A  1"`` may be different orders (or a
    differently indented program), so neither is a duplicate of the other."""
    if isinstance(value, (dict, MappingProxyType)):
        return {str(k): thawed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(v) for v in value]
    return value


def normalize_args(args: Any) -> str:
    """Canonical JSON of tool arguments: keys sorted, values exact."""
    try:
        if _C_CANONICAL is not None:
            return "".join(_C_CANONICAL(thawed(args), 0))
        return _CANONICAL.encode(thawed(args))
    except (TypeError, ValueError):
        return repr(args)


def call_digest(tool: str, args: Any) -> str:
    """Identity of a call for duplicate and failure tracking."""
    return f"{tool}:{normalize_args(args)}"


_WORD = re.compile(r"\w+")
def _failure_words(said: str) -> list[str]:
    """The words a failure says, as its streak compares them: lowercased,
    the drift tracker's volatile tokens left out (UUIDs, times, durations,
    named ids), a temporary file's name, a pod's random suffix
    (``build-kxzvq``) and a base64 id split at its ``+ / - _``, each split at
    ``_``, less the parts that change on every attempt: a number, digits
    mixed into letters (``x2k9p``, ``c7f3a9e``), a long id
    (``8mxbV2dPuPSfCU``), letters switching case at random (``kXzVqP``;
    ``shippingPostCode`` and ``XMLHttpRequest`` are words). Letters ending
    in a short number (``line2``, ``ipv4``) name a field, and so do words
    with no vowel (``lxml``, ``nltk``). *Limit*: an id made of words (a
    container's ``eager_turing``) is read as words: ``Failures.total``
    bounds that."""
    text = said[:SAID_CHARS]
    shuffled = {p.lower() for w in _WORD.findall(text) for p in w.split("_") if _random_case(p)}
    for run in _OPAQUE.findall(text):  # a base64 id (an S3 host id, a url-safe token) is split at + / - _
        if _random_case(_NOT_LETTER.sub("", run)) and any(c.isdigit() for c in run):
            shuffled.update(p.lower() for w in _WORD.findall(run) for p in w.split("_"))
    text = text.lower()
    if any(name in text for name in _ID_NAMES):
        text = _NAMED_ID.sub(" ", text)
    if "tmp" in text:
        text = _TEMP_NAME.sub(" ", text)
    if "-" in text:
        text = _POD_SUFFIX.sub(" ", text)
    parts = (p for w in _WORD.findall(_VOLATILE_SPAN.sub(" ", text)) for p in w.split("_"))
    return [p for p in parts if p and p not in shuffled and not _changing(p)]


_FIELD = re.compile(r"[^\W\d_]+\d{1,3}")
"""Letters ending in a short number: a field's name (``line2``), not an id."""
_TEMP_NAME = re.compile(
    r"(?<=[/\\]tmp[/\\])(?:php|cc|\.tmp)\w{6}\b"
    r"|\btmp(?:\w{8,10}\b|\.\w{10}\b|[0-9a-f]{1,4}\.tmp\b)"
)
"""A temporary file's name as a tool makes one: PHP's ``phpYzdqkD``, GCC's
``ccXXXXXX.s`` and Rust's ``.tmpXXXXXX`` right under ``/tmp``; Python's
``tmp`` and eight random characters (or so), ``mktemp``'s ``tmp.`` and ten,
.NET's ``tmp`` and up to four hex digits. Any other file's name is a word
(``/tmp/report_q1.csv`` is no ``report_q2.csv``)."""
_POD_SUFFIX = re.compile(r"(?<=[a-z0-9]-)[bcdfghjklmnpqrstvwxz2456789]{5}\b")
"""A Kubernetes pod's random suffix: five characters of its alphabet (no
vowels, no ``0``, ``1``, ``3``) after the name and a hyphen."""
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
_NOT_LETTER = re.compile(r"[^A-Za-z]+")
_CAMEL_WORD = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_VOWEL = re.compile("[aeiouy]")


def _changing(part: str) -> bool:
    """A part of a failure's words that is no word: a number, or digits in
    it other than a field's (``_FIELD``), or a long id."""
    if not any(c.isdigit() for c in part):
        return len(part) >= ID_MIN and _ID_WORD.fullmatch(part) is not None
    return part.isdigit() or _FIELD.fullmatch(part) is None


def _random_case(part: str) -> bool:
    """Letters whose case switches at random (``kXzVqP``): read as camelCase
    words (``taxIDs`` is ``tax``, ``IDs``), two or more of them with no
    vowel and not an acronym in capitals (``k``, ``Xz``, ``Vq``); a name's
    words hold vowels (``shipToId``, ``XMLHttpRequest``: ``Http`` is one)."""
    if part.islower() or part.isupper():
        return False
    unworded = 0
    for word in _CAMEL_WORD.findall(part):
        if _VOWEL.search(word.lower()) is None and not word.isupper():
            unworded += 1
    return unworded >= 2


# Volatile tokens: what changes on every call whatever the call learnt
# (request and trace ids, latencies, timestamps). Matched on lowercased text.
# Every pattern starts with a character class (``re`` then skips to its
# candidates in C) and has no unbounded backtracking: linear in the text.
_VOLATILE_SPAN = re.compile(
    # not inside a word or a number; a UUID may follow ``_``, ``:`` or ``-``
    # (``run_<uuid>``, ``urn:uuid:<uuid>``), a duration ``:`` (``latency:17ms``,
    # not ``iphone-6s``; nor a decade, ``1950s``), a date or time neither (a
    # MAC's digit triples are no time), but a time after a year and ``:`` (an
    # access log's ``03/Dec/2026:10:11:12``)
    r"[\da-f](?<![^\W_][\da-f])(?<!\.[\da-f])(?:"
    r"(?<=\d)(?<![_-]\d)(?!\d\d0s\b)\d*+(?:[.,]\d++)?+\x20?+"
    r"(?:[nuµm]?s|msecs?|secs?|(?:milli|micro|nano)?seconds?)\b"  # 12ms, 0.5 s, 17msec
    r"|(?<=\d)(?<![_-]\d)\d*+(?:h\d++)?+m\d++(?:[.,]\d++)?+s\b"  # 1m17s, 1h2m13s
    r"|(?<=\d)(?<![_:-]\d)\d{3}-\d\d-\d\d[t\x20]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:z|[+-]\d\d:?\d\d)?"  # ISO
    r"|(?<=\d)(?:(?<![_:-]\d)|(?<=\d{4}:\d))\d?:\d\d:\d\d(?:[.,]\d+)?"  # time of day
    r"|[\da-f]{7}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}\b"  # UUID
    r")"
)
_ID_NAMES = ("request", "trace", "span", "correlation")
_NAMED_ID = re.compile(rf"(?:{'|'.join(_ID_NAMES)})[\x20_-]?id[\"']?\x20?[:=]\x20?[\"']?[\w.:-]+")
_ID_WORD = re.compile(r"(?=\d*[a-f])(?=[a-f]*\d)[\da-f]{8,}|(?=[a-z_]*\d)(?=[\d_]*[a-z])[a-z\d_]{20,}")
r"""A word that is an id: 8+ hex digits with a letter and a digit among
them, or 20+ ASCII letters and digits mixed (base64, ``tok_…``). A number
(a population, an amount in cents) is data, and so is a word in another
script (a sentence of Chinese is one ``\w+`` word)."""
ID_MIN = 8
"""No shorter word is an id (most words are shorter: one length check)."""

SHINGLE_WORDS = 4
"""Words per shingle: one changed word touches at most this many."""
NOVEL_SHARE = 0.2
"""A result brings new information when at least this share of its distinct
shingles is new to the run..."""
NOVEL_SHINGLES = SHINGLE_WORDS + 1
"""...or at least this many, however long the result: more than one
changed word can make (a new name inside a long record, not a new counter).
A new phrase at the very start or end of a long result needs more words:
the words there are in fewer shingles."""
FINISHED = "finished"
"""The reason of a run its finishing tool completed."""
OUT_OF_TIME = "deadline"
"""The end reason of a run its deadline stopped: the one stop shadow mode
enforces too (time is not a refusal, and its decisions say they were enforced)."""
NOVELTY_CAP = 50_000
"""The most shingle hashes a run keeps (the oldest half is dropped first)."""
NOVELTY_RESULTS = 4_096
"""The most whole results a run remembers (the oldest is dropped first)."""
ECHO_CHECKS_PER_WORD = 1
"""The echo discount tries at most this many phrases per word of a result
(or ``ECHO_CHECKS_MIN``, when more): a result repeating an echoed word
thousands of times (``a a a …`` against ``a``, ``a a``, … ``a a a a a a a
a``) costs what any result of its length does; what is left once they are
spent counts as the result's own words."""
ECHO_CHECKS_MIN = 1_024


def _echo(value: Any) -> Iterator[str]:
    """Every string or number in a call's arguments, in order, as text."""
    if isinstance(value, (dict, MappingProxyType)):
        for v in value.values():
            yield from _echo(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _echo(v)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield str(value)


ECHO_PHRASES = 16
"""At most this many distinct argument phrases are discounted from a
result (the first ones), each of at most ``ECHO_WORDS`` words: the echo of a
query, not of a batch of thousands of ids, whose cost would grow with ids
times their occurrences."""
ECHO_WORDS = 8
ECHO_CHARS = 512
ECHO_VALUES = 256
"""At most this many argument values are read for phrases (the first ones):
a call writing a megabyte of lines costs no more than a query."""


def _without(words: list[str], phrases: list[tuple[str, ...]]) -> list[str]:
    """``words`` less every occurrence of each phrase (``words`` itself when
    none occurs), up to ``ECHO_CHECKS_PER_WORD`` lookups a word. The phrases
    are grouped by first word, whose occurrences are found with
    ``list.index`` (the scan runs in C); at each, one lookup per phrase
    length."""
    by_first: dict[str, dict[int, set[tuple[str, ...]]]] = {}
    for phrase in phrases:
        by_first.setdefault(phrase[0], {}).setdefault(len(phrase), set()).add(phrase)
    keep: list[bool] | None = None
    checks = max(ECHO_CHECKS_PER_WORD * len(words), ECHO_CHECKS_MIN)
    for first, by_length in by_first.items():
        at = -1
        while checks >= len(by_length):
            try:
                at = words.index(first, at + 1)
            except ValueError:
                break
            checks -= len(by_length)
            for m, same in by_length.items():
                if tuple(words[at:at + m]) in same:
                    if keep is None:
                        keep = [True] * len(words)
                    keep[at:at + m] = [False] * m
    return words if keep is None else [w for w, k in zip(words, keep, strict=True) if k]


def _words(text: str) -> list[str]:
    """The words of ``text`` that carry information: lowercased, volatile
    tokens left out (a result that differs from another only in them says
    the same)."""
    text = text.lower()
    for name in _ID_NAMES:  # four C searches spare a regex pass (a loop: no generator per result)
        if name in text:
            text = _NAMED_ID.sub(" ", text)
            break
    words = _WORD.findall(_VOLATILE_SPAN.sub(" ", text))
    # each distinct word judged once: a result repeats its words
    ids = {w for w in set(words) if len(w) >= ID_MIN and _ID_WORD.fullmatch(w)}
    return [w for w in words if w not in ids] if ids else words


def _echoed(args: Any) -> list[tuple[str, ...]]:
    """The phrases of a call's arguments discounted from its result (see
    ``ECHO_PHRASES``), read as result text is (volatile tokens left out)."""
    phrases: dict[tuple[str, ...], None] = {}
    for value in islice(_echo(args), ECHO_VALUES):
        if len(value) > ECHO_CHARS or len(value.split(maxsplit=ECHO_WORDS)) > ECHO_WORDS:
            continue  # longer than an echoed phrase is
        words = tuple(_words(value))
        if words and len(words) <= ECHO_WORDS:
            phrases[words] = None
            if len(phrases) == ECHO_PHRASES:
                break
    return list(phrases)


def _shingles(words: list[str]) -> set[int]:
    """The hashes of every run of ``SHINGLE_WORDS`` words (of all of them,
    when fewer), the tuples made and hashed in C."""
    k = min(SHINGLE_WORDS, len(words))
    return set(map(hash, zip(*(words[i:] for i in range(k)), strict=False)))  # the shorter tails end it


class Novelty:
    """What the run's results have said so far, as hashed word shingles, to
    tell new information from new arguments. Bounded: two generations of at
    most ``cap // 2`` hashes; the older one is dropped when the newer fills.
    A whole result is remembered too (one hash each, the last
    ``NOVELTY_RESULTS``): results too large for the generations, read in
    turn, would push each other out and each repeat read as news.
    O(result size) per result."""

    __slots__ = ("cap", "kept", "newer", "older", "results")

    def __init__(self, cap: int = NOVELTY_CAP) -> None:
        self.cap = cap
        self.older: set[int] = set()
        self.newer: set[int] = set()
        self.results: dict[int, None] = {}
        self.kept = 0
        """How many results were remembered (``keep``): a judgement made at
        another count is stale (another call's result was kept since)."""

    def __len__(self) -> int:
        return len(self.older) + len(self.newer)

    def _remember(self, said: int) -> bool:
        """Keep a whole result's hash (the last ``NOVELTY_RESULTS``); whether it is new."""
        if said in self.results:
            return False
        if len(self.results) >= NOVELTY_RESULTS:
            del self.results[next(iter(self.results))]
        self.results[said] = None
        return True

    def add(self, text: str, echo: Any = None, data: tuple[int, ...] = ()) -> bool:
        """Judge ``text`` (and ``data``) and remember it (``judge``,
        ``keep``); whether it brings new information."""
        heard = self.judge(text, echo, data)
        self.keep(heard)
        return heard.news

    def judge(self, text: str, echo: Any = None, data: tuple[int, ...] = ()) -> Heard:
        """Whether ``text`` brings new information, remembered only by
        ``keep`` (a result the harness withholds after this is not heard):
        of its distinct shingles, at least ``NOVEL_SHINGLES`` or
        ``NOVEL_SHARE`` unseen in this run, or a data block (``data``:
        ``outputs.data_digests``) the run has not seen. Volatile tokens are
        left out (``_words``), and so is what the call's arguments (``echo``)
        say: a result that repeats its query back says nothing new (the text
        is remembered as it is too, so an argument that happens to occur in
        it does not make the next result look new)."""
        words = _words(text)
        phrases = _echoed(echo) if echo else []
        kept = _without(words, phrases) if phrases else words
        said = [hash(tuple(kept)), *(hash(("data", digest)) for digest in data)]
        news = any(whole not in self.results for whole in said[1:])
        shingles: tuple[set[int], ...] = ()
        if said[0] not in self.results:  # a result repeated word for word brings nothing
            shingles = (_shingles(kept),)
            new = len(shingles[0].difference(self.newer, self.older))
            news = news or (new > 0 and (new >= NOVEL_SHINGLES or new >= NOVEL_SHARE * len(shingles[0])))
            if kept is not words and len(kept) < len(words):
                shingles += (_shingles(words),)
        return Heard(tuple(said), shingles, news, self.kept)

    def keep(self, heard: Heard) -> None:
        """Remember what ``judge`` read of a result the model reads."""
        self.kept += 1
        for whole in heard.said:
            self._remember(whole)
        for shingles in heard.shingles:
            self._record(shingles)

    def _record(self, shingles: set[int]) -> tuple[int, int]:
        """Remember ``shingles``; (how many were new, how many there were)."""
        fresh = shingles.difference(self.newer, self.older)
        half = max(self.cap // 2, 1)
        if len(self.newer) + len(fresh) <= half:  # the common case: set operations in C
            self.newer |= fresh
            return len(fresh), len(shingles)
        pending = list(fresh)
        while pending:
            if len(self.newer) >= half:
                self.older, self.newer = self.newer, set()
            room = half - len(self.newer)
            self.newer.update(pending[:room])
            pending = pending[room:]
        return len(fresh), len(shingles)


class Heard(NamedTuple):
    """What ``Novelty.judge`` read of a result, not yet remembered."""

    said: tuple[int, ...]
    """The hashes of the whole result: its text, then each data block."""
    shingles: tuple[set[int], ...]
    """Its shingles to remember (none for a text heard word for word before)."""
    news: bool
    at: int
    """``Novelty.kept`` when judged: the judgement holds while it is the same."""


class Failures(NamedTuple):
    """The streak of one exact call failing the same way, in a row, and its
    failures since it last succeeded, whatever came between."""

    error_class: str
    streak: int
    mutations: int
    """``GuardState.mutations`` at its last failure."""
    said: str
    """A fingerprint of what its last failure said."""
    total: int


@dataclass
class Success:
    """A call that succeeded: what ran, with which arguments (the tool's
    declared defaults filled in: what it ran with), and where its result is
    (the tool call id)."""

    tool: str
    args: Mapping[str, Any]
    ref: str


class _Missing:
    """The value of an argument a call left out and its tool declares no
    default for: distinct from every value, ``None`` included."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_ABSENT = ""
"""The exact key of ``MISSING``: no JSON text is empty."""


def _exact_value(value: Any) -> str:
    """One value as ``exact_key`` states it."""
    if value is MISSING:
        return _ABSENT
    return json.dumps(thawed(value), sort_keys=True, ensure_ascii=False, default=str)


SAID_CHARS = 2_048
"""The most of a failure's text compared to the last (its start says how it failed)."""
NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


DONE_INSIDE_KEY = "agentscope_harness.done_inside"
"""Where an agent's state keeps what its sub-agents did inside its calls."""
DONE_INSIDE_KEPT = 256
"""The most calls kept with their sub-agents' successes (the oldest go first)."""


def remember_done_inside(agent: Any, call_id: str, done: Mapping[str, list[Mapping[str, Any]]]) -> None:
    """Keep in ``agent``'s state the successes (tool -> arguments, their
    defaults filled in) of the sub-agents that ran inside its call
    ``call_id`` of this reply: its later replies' claims of them stand as
    claims of its own earlier calls do, while the call's result is in its
    context (``done_inside_earlier``)."""
    state = getattr(agent, "state", None)
    middle = getattr(state, "middle_context", None)
    if not isinstance(middle, dict):
        return
    kept = middle.get(DONE_INSIDE_KEY)
    if not isinstance(kept, dict):
        kept = middle[DONE_INSIDE_KEY] = {}
    kept[f"{getattr(state, 'reply_id', None)}/{call_id}"] = {
        tool: [dict(args) for args in calls] for tool, calls in done.items()
    }
    while len(kept) > DONE_INSIDE_KEPT:
        del kept[next(iter(kept))]


def done_inside_earlier(agent: Any) -> Mapping[str, Any]:
    """What ``remember_done_inside`` kept, by ``<reply id>/<call id>`` of
    the call its sub-agents ran inside (empty: nothing, or a state edited)."""
    middle = getattr(getattr(agent, "state", None), "middle_context", None)
    kept = middle.get(DONE_INSIDE_KEY) if isinstance(middle, dict) else None
    return kept if isinstance(kept, dict) else {}


@dataclass(frozen=True)
class Declared:
    """What a tool's JSON schema declares of its arguments: their names, and
    the default of each that has a JSON one (what the tool runs with for an
    argument the model left out: AgentScope's ``FunctionTool`` writes the
    function's defaults there)."""

    names: frozenset[str]
    defaults: Mapping[str, Any]


def tools_in(toolkit: Any) -> list[Any]:
    """The tools registered in an AgentScope ``toolkit``, every group's
    (none for ``None``)."""
    return [tool for group in getattr(toolkit, "tool_groups", ()) for tool in group.tools]


def owes_finish(run: Any, finish_tools: Collection[str]) -> bool:
    """Whether the run is held to its finishing tool: a root run always (an
    agent without it cannot complete, as its config says); a sub-agent's
    while its toolkit has one of its own (read each time: a toolkit may
    change in a run; a tool an MCP server serves is not known here), else
    it answers its lead."""
    if run.parent is None:
        return True
    toolkit = run.toolkit() if run.toolkit is not None else None
    return any(tool.name in finish_tools for tool in tools_in(toolkit))


def finish_required(run: Any, config: Any) -> bool:
    """A finishing tool must deliver this run's answer: the config requires
    one and the run owes it (``owes_finish``)."""
    if not config.finish_required():
        return False
    return run.parent is None or owes_finish(run, config.finish_tools())  # a root run's: no tool list made


def declared_in(schema: Any) -> Declared | None:
    """What ``schema`` declares (``None``: no schema with properties)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    defaults = {
        name: frozen(spec["default"]) for name, spec in properties.items()
        if isinstance(name, str) and isinstance(spec, dict) and "default" in spec and _json_like(spec["default"])
    }
    return Declared(frozenset(n for n in properties if isinstance(n, str)),
                    MappingProxyType(defaults) if defaults else NO_DEFAULTS)


def _json_like(value: Any, depth: int = 0) -> bool:
    """``value`` is a JSON value (finite numbers, string keys), as a schema
    states a default; anything else is not filled in."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > 32:
        return False
    if isinstance(value, (list, tuple)):
        return all(_json_like(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v, depth + 1) for k, v in value.items())
    return False


def exact_key(
    args: Mapping[str, Any], names: tuple[str, ...], defaults: Mapping[str, Any] = NO_DEFAULTS,
) -> tuple[str, ...]:
    """The exact values of ``names`` as the tool runs with them (JSON,
    type-preserving): ``args``, else the tool's declared ``defaults``, else
    ``_ABSENT``. ``" A1"``, ``"A 1"`` and ``"A\u20031"`` are different orders
    to a backend, so prerequisites compare values exactly, never normalised."""
    return tuple(
        _exact_value(args[name] if name in args else defaults.get(name, MISSING)) for name in names
    )


@dataclass
class Terminal:
    """The run reached an end state (for now: hooks may still downgrade it)."""

    state: str
    reason: str


@dataclass(frozen=True, slots=True)
class Found:
    """What one successful result brought (``GuardState.found_in``):
    credited once the model reads it, taken back when it is withheld."""

    edges: list[str]
    """The facts it reached that no result the model read had reached yet
    (the next-step notice names them: a twin of its batch reaching one too
    may be withheld)."""
    counts: str | None
    """``candidates``, ``picks`` or ``None``: what ``n`` counts."""
    n: int
    declared: bool
    """Whether the tool declared the count (progress), not a count read from its text."""


NOTHING_FOUND = Found([], None, 0, False)
_COUNTS = {"retrieval": "candidates", "selection": "picks"}
_REACHED = {"candidates": "retrieved", "picks": "selected"}


@dataclass
class GuardState(LazyFields):
    """The facts of a run. Ledgers are shared with nested runs (a sub-agent
    charges its parent's budget and cannot reset it)."""

    called_tools: Counter = lazy(Counter)
    succeeded: dict[str, Success] = lazy(dict)
    failures: dict[str, Failures] = lazy(dict)
    mutations: int = 0
    """Successful mutations so far: a failure streak goes on across one only
    when the call fails again word for word (else the model may have fixed
    what made it fail)."""
    news_from: set[str] = lazy(set)
    """Digests of calls whose last result brought news (a poll whose job
    advanced): the loop detector leaves such a call repeating."""
    progress_marks: set[str] = lazy(set)
    done_unread: set[str] = lazy(set)
    """The digests of the calls in ``unconfirmed``: the same call again is
    refused (made once; a mutation for good)."""
    unread_facts: dict[str, int] = lazy(dict)
    """Facts reached by results the model has not read yet, and how many
    such results reached each: one withheld takes its fact back only when
    no other did (``unreach``)."""
    fact_batches: dict[str, Batch] = lazy(dict)
    """The batch whose result reached each fact a tool's result brought:
    a call of that same batch was written before the model read it."""
    candidates: int = 0
    picks: int = 0
    force_conclude: bool = False
    constrained_for: str | None = None
    """The reason a run that ignores being constrained ends with."""
    terminal: Terminal | None = None
    gate_reject_counts: Counter = lazy(Counter)
    latched: set[str] = lazy(set)
    ledger_used: dict[str, int] = lazy(dict)
    spent_usd: float = 0.0
    rounds_without_progress: int = 0
    # What the current round produced (reset by the drift detector).
    new_fact_this_round: bool = False
    # Sliding window of tool names, executed or refused (loop detector).
    recent_tools: deque = field(default_factory=lambda: deque(maxlen=6))
    loop_hinted: set[str] = lazy(set)
    # Batches in which an escape key already counted a refusal.
    reject_batches: set[tuple[str, Batch]] = lazy(set)
    dependency_down: set[str] = lazy(set)
    enforce_retries: int = 0
    empty_selections: int = 0
    pool_emptied: bool = False
    last_hints: tuple[str, ...] = ()
    """The keys of the hints given before the latest model call that got
    any (``hinted_at``): none of them is given again before another hint
    is, so two ladders hinting in one round never take turns."""
    hinted_at: int = 0
    unsupported_claims: list[str] = lazy(list)
    claimed_steps: list[tuple[str, bool | None]] = lazy(list)
    """The steps the answer claimed of tools with an unsupported claim, in
    words, and whether each succeeded (``None``: made, not confirmed,
    ``unconfirmed``): the correction says which did not, which may have,
    and which did (a retry must not repeat those)."""
    done_otherwise: dict[str, list[Mapping[str, Any]]] = lazy(dict)
    """The calls that succeeded in runs nested in this one, their arguments
    by tool (a sub-agent's action is this conversation's: an answer
    claiming it is not made up)."""
    unconfirmed: dict[str, list[Mapping[str, Any]]] = lazy(dict)
    """The calls made whose result the harness withheld for what it says
    (``pii_blocked``, ``injection_blocked``: this run's or a nested run's),
    before the rest of its checks judged it, their arguments by tool:
    whether each did what it was asked is not known here, so an answer
    claiming one is corrected as unconfirmed (check before trying again),
    never as not done."""
    wrap_up_hinted: bool = False
    nudged: set[str] = lazy(set)
    # Model calls made (run-wide) when force_conclude was set: a later call
    # that still asks for other tools ignored it.
    forced_at: int | None = None
    rounds: int = 0
    tier: str = "full"
    recent_digests: deque = field(default_factory=lambda: deque(maxlen=6))
    batch_key: Batch | None = None
    batch_seen: dict[str, str] = lazy(dict)
    """Digest → id of the call of the current batch that owns it."""
    stop_text: str | None = None
    """What the user is told when a hook stopped the run."""
    success_index: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Batch] = lazy(dict)
    """``(tool, same_args names, exact values)`` of successful calls, for
    the prerequisite names the config declares, to the batch of the first
    such success: an O(1) check per call. The values are those the tool
    ran with (its declared default for a name the model left out)."""
    success_counts: Counter = lazy(Counter)
    """Distinct successful calls by tool (``successes_of`` without a scan)."""
    tool_answer: str | None = None
    """What the tool that ended the run delivered (a finishing tool's
    answer, an ``ask`` tool's question), given to the user if the model's
    last word is withheld or never comes."""
    delivered: bool = False
    """A finishing tool succeeded and passed ``verify``: the delivery
    contract ``require_finish_tool`` asks for (no hook's stop stands in)."""
    undelivered: int = 0
    """Finishing calls that failed (or failed ``verify``) once the run was
    constrained to conclude: ``stall_rounds`` of them stop it."""
    novelty: Novelty = lazy(Novelty)
    """What the run's results have said: progress is new information."""
    refused: list[tuple[str, str, str | None]] = lazy(list)
    """``(hook, code, tool)`` of each exact refusal (not an escapable
    presumption) since the last model call; the refusal ladder reads and
    empties it."""
    refusals_met: set[tuple[str, str]] = lazy(set)
    """``("hook", name)`` and ``("code", code)`` of refusals met in earlier
    rounds since the last progress: meeting one again escalates."""
    denied_turns: list[int] = lazy(list)
    """The turns of the last rounds that met a ``permission_denied`` (its
    sub-agents' too): progress forgets one only ``stall_rounds`` turns after
    the latest, and a third within ``DENIED_WINDOW`` turns of the first
    escalates, however far apart they are otherwise."""
    cycle_hinted: bool = False
    """The model was told it goes round in circles (reset by progress)."""
    stuck: str | None = None
    """The ladder made the run conclude because it made no progress
    (``stalled``, ``cycling``): it ends ``incomplete`` with this reason,
    whatever the model answers then."""
    refused_again: str | None = None
    """The refusal code whose second meeting made the run conclude: a model
    that ignores that is stopped with reason ``refused:<code>``; one that
    concludes ends as its conclusion earns."""

    def remember_hint(self, key: str, at: int) -> None:
        """A hint ``key`` given before this run's model turn ``at``: one more
        of that round's, or the first of a new one."""
        self.last_hints = (*self.last_hints, key) if at == self.hinted_at else (key,)
        self.hinted_at = at

    def mark(self, fact: str) -> bool:
        """Record a reached fact; True when it is new (a progress edge)."""
        if fact in self.progress_marks:
            return False
        self.progress_marks.add(fact)
        self.new_fact_this_round = True
        return True

    def _claimable(self, fact: str) -> bool:
        """No result the model read has reached ``fact`` yet."""
        return fact not in (made(self, "progress_marks") or ()) or fact in (made(self, "unread_facts") or ())

    def _claim(self, fact: str) -> bool:
        """A result not yet read reaches ``fact``; False when a result the
        model read already had."""
        if not self._claimable(fact):
            return False
        self.progress_marks.add(fact)
        self.unread_facts[fact] = self.unread_facts.get(fact, 0) + 1
        return True

    def unreach(self, found: Found) -> None:
        """Forget what a result reached that the model never read (the
        result was withheld): a fact no other result of its batch reached
        is unreached (a finish requiring it waits for another), and nothing
        of it is progress."""
        unread = made(self, "unread_facts") or {}
        for fact in found.edges:
            if fact not in unread:
                continue  # a result the model read reached it
            unread[fact] -= 1
            if not unread[fact]:
                del unread[fact]
                self.progress_marks.discard(fact)
                self.fact_batches.pop(fact, None)

    def lift_deadline(self) -> None:
        """A reply resuming the run gets its time again: an end the previous
        reply's deadline caused no longer holds (any other end does)."""
        if self.out_of_time():
            self.terminal, self.stop_text = None, None

    def out_of_time(self) -> bool:
        """Whether the run was stopped by its deadline."""
        return self.terminal is not None and self.terminal.reason == OUT_OF_TIME

    def time_is_up(self, shadow: bool) -> None:
        """The deadline ends the run. In shadow mode an end shadow mode did
        not enforce (a call limit, a stall, a budget) gives way to it: time is
        the one thing shadow mode enforces. What the run did (it completed,
        or its ``ask`` tool asked the user) stands, as in enforce mode."""
        terminal = self.terminal
        gives_way = (
            shadow and terminal is not None and terminal.reason not in (OUT_OF_TIME, "asked_user")
            and terminal.state != "completed"
        )
        if gives_way:
            self.stop_text = None
        self.conclude("incomplete", OUT_OF_TIME, override=gives_way)

    def ended_by_tool(self) -> str | None:
        """The answer of the tool that ended the run (it completed, or its
        ``ask`` tool asked the user), else ``None``: what the user gets when
        the model will not say it (a cut or refused call, past the deadline)."""
        terminal = self.terminal
        if terminal is None or terminal.state not in ("completed", "waiting_input"):
            return None
        return self.tool_answer

    def stop(self, reason: str, fallback: str) -> str:
        """End the run ``incomplete`` for ``reason`` from outside a hook
        (unless it has ended already) and return what the user is told: the
        answer of a tool that ended it, else the first stop text, else
        ``fallback``."""
        self.conclude("incomplete", reason)
        if self.stop_text is None:
            self.stop_text = self.ended_by_tool() or fallback
        return self.stop_text

    def conclude(self, state: Any, reason: str, override: bool = False) -> None:
        """Record that the run reached an end state (the first one wins unless
        ``override``: a later, worse fact may downgrade it)."""
        if self.terminal is None or override:
            self.terminal = Terminal(getattr(state, "value", state), reason)

    def record_outcome(
        self,
        tool: str,
        digest: str,
        args: Mapping[str, Any],
        ref: str,
        ok: bool,
        error_class: str | None,
        index_keys: tuple[tuple[str, ...], ...] = (),
        batch: Batch = ("", -1, -1),
        defaults: Mapping[str, Any] = NO_DEFAULTS,
        changed_state: bool = False,
        said: str = "",
    ) -> None:
        """What a finished call did: a success (with its ref, indexed by the
        exact values of each ``index_keys`` name tuple as it ran, ``defaults``
        filled in, with its ``batch``; one that ``changed_state``, a mutation,
        counted) or one more failure in the streak of this exact call: the
        same error class, and, across a mutation, the same words (``said``)."""
        if ok:
            if digest not in self.succeeded:
                self.success_counts[tool] += 1
            self.succeeded[digest] = Success(tool, {**defaults, **args} if defaults else args, ref)
            self.mutations += changed_state
            (made(self, "failures") or {}).pop(digest, None)
            for names in index_keys:
                self.success_index.setdefault((tool, names, exact_key(args, names, defaults)), batch)
            return
        if error_class is None:
            return
        words = " ".join(_failure_words(said)).encode(errors="replace")
        fingerprint = hashlib.blake2b(words, digest_size=8).hexdigest()
        last = self.failures.get(digest)
        again = last is not None and last.error_class == error_class and (
            last.mutations == self.mutations or last.said == fingerprint)
        streak = last.streak + 1 if again and last is not None else 1
        total = last.total + 1 if last is not None else 1
        self.failures[digest] = Failures(error_class, streak, self.mutations, fingerprint, total)

    def found_in(self, role: str, text: str, reported: dict[str, Any], counted: int | None) -> Found:
        """What a successful result brings: the facts it reaches that no
        result the model read had (progress edges, marked now: the next-step
        notice names them) and the candidates or picks it counts, credited by ``credit``
        once the ``post_tool_call`` chain let the model read it.

        ``count_results`` counts; else tools report ``{"candidates": n,
        "picks": n, "facts": [...]}`` in ``metadata["harness"]``; else a
        non-empty result is one. Only what the tool declared is progress: a
        count read from the text (``count_results``, or presumed) says how
        many hits, not whether they are new (the same three hits again count
        three), so whether the text is new is the drift tracker's to judge.
        """
        reached = [f for f in reported.get("facts", ()) if isinstance(f, str)]
        counts, n, declared = _COUNTS.get(role), 0, False
        if counts is not None:
            declared = reported.get(counts) is not None
            n = counted if counted is not None else reported[counts] if declared else int(bool(text.strip()))
            if n > 0:
                reached.append(_REACHED[counts])
        elif role == "planning" and self._claimable("planned"):
            reached.append("planned")
        elif "candidates" in reported and int(reported["candidates"]) > 0:
            counts, n, declared = "candidates", reported["candidates"], True
        return Found([fact for fact in dict.fromkeys(reached) if self._claim(fact)], counts, int(n), declared)

    def hear(self, digest: str, heard: Heard) -> None:
        """Remember what the drift tracker read of a result the model read
        (``Novelty.keep``), and whether the call ``digest`` brought news
        with it (the loop detector leaves a call whose results advance)."""
        self.novelty.keep(heard)
        if heard.news:
            self.news_from.add(digest)
        else:
            self.news_from.discard(digest)

    def credit(self, found: Found, news: bool) -> None:
        """Count what a result the model read brought: its facts (reached
        now, whichever result of its batch is withheld), its candidates or
        picks (an empty selection empties the pool), and the round's
        progress when it reached a fact, brought what its tool declared or
        was news (``news``: the drift tracker's verdict)."""
        unread = made(self, "unread_facts")
        if unread:
            for fact in found.edges:
                unread.pop(fact, None)
        if news or found.edges or (found.declared and found.n > 0):
            self.new_fact_this_round = True
        if found.counts == "candidates" and found.n > 0:
            self.candidates += found.n
        elif found.counts == "picks" and found.n > 0:
            self.picks += found.n
            self.empty_selections = 0
        elif found.counts == "picks":
            self.empty_selections += 1
            if self.candidates:
                self.candidates = 0
                self.pool_emptied = True

    def has_succeeded(
        self, tool: str, same: Mapping[str, Any] | None = None, before: Batch | None = None,
    ) -> bool:
        """Whether ``tool`` succeeded in this run with exactly these argument
        values (``same`` names must be indexed: see ``record_outcome``; a
        value may be ``MISSING``), in a batch other than ``before`` (the
        model had read its result)."""
        names = tuple(same or ())
        batch = self.success_index.get((tool, names, exact_key(same or {}, names)))
        return batch is not None and batch != before

    def successes_of(self, tools: set[str]) -> int:
        """How many successful calls of these tools the run made."""
        counts = self.success_counts
        return sum(counts[tool] for tool in tools)
