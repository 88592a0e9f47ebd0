"""Injected instructions in tool results: a heuristic score for text that
addresses the assistant instead of informing it, and the protocol a
classifier implements to replace it.

The heuristic looks at a normalised view of the text (NFKC, invisible
characters removed, look-alike letters mapped to Latin when words mix
scripts), so ``іgnore`` with a Cyrillic ``і`` or ``ig\u200bnore`` read as
``ignore``. Each signal has a weight; the score is their noisy-OR, so two
weak signals together can reach the threshold that neither reaches alone.
Phrases that are quoted or reported ("phrases like 'ignore previous
instructions'", "tells the model to ignore ...") count for much less: the
hard negatives are articles *about* prompt injection. Base64 blobs are
decoded and scored once, so an encoded instruction scores like a plain one.

Every pattern has bounded repetition, so scanning is linear in the text.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .sentinels import BLANK_ANYWAY, CONFUSABLES

DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class InjectionVerdict:
    """A score in [0, 1], the names of the signals behind it, and the
    threshold of the detector that produced it."""

    score: float
    signals: list[str] = field(default_factory=list)
    threshold: float = DEFAULT_THRESHOLD

    @property
    def flagged(self) -> bool:
        return self.score >= self.threshold


@runtime_checkable
class InjectionDetector(Protocol):
    """What the harness calls on a tool result. Synchronous and cheap: a
    slow classifier should cache, or be run by the caller in a thread."""

    def score(self, text: str) -> InjectionVerdict: ...


# --- normalisation ----------------------------------------------------------

_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e"

SHOWN_ANYWAY = frozenset(
    "\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\u1680\U000110bd\U000110cd",
)
"""Format characters and spaces drawn as a glyph (number signs, the Ogham space mark)."""


def _drawn_as_nothing() -> str:
    """Every character a reader cannot see that is not spacing: the format
    characters (soft hyphen, direction marks, zero-width, tags; Unicode
    places them in planes 0, 1 and 14 only) but those drawn, and the blanks."""
    planes = (*range(0x20000), *range(0xE0000, 0xF0000))
    found = {chr(c) for c in planes if unicodedata.category(chr(c)) == "Cf"} - SHOWN_ANYWAY
    return "".join(sorted(found | BLANK_ANYWAY))


_WIDE_BLANKS = "\u115f\u1160\u2800\u3164\uffa0"
"""Of the blanks, those drawn as a space's width (fillers, the blank braille cell)."""
_AS_SEEN = {**dict.fromkeys(map(ord, _drawn_as_nothing())), **dict.fromkeys(map(ord, _WIDE_BLANKS), " ")}


def unhidden(text: str) -> str:
    """``text`` as a reader sees it: invisible characters dropped (every
    format character not drawn, joiners, variation selectors; a blank drawn
    as wide as a space is one), then compatibility forms folded (NFKC:
    fullwidth letters, no-break spaces)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text.translate(_AS_SEEN))


# a zero-width character between two letters hides a word from a keyword filter
_HIDDEN_IN_WORD = re.compile(f"[A-Za-z][{_ZERO_WIDTH}]+(?=[A-Za-z])")
_BIDI_OVERRIDE = re.compile("[\u202a-\u202e\u2066-\u2069]")
# the subdivision flags (England, Scotland, Wales) are the one legitimate use of tag characters
_TAG_FLAG = re.compile("\U0001f3f4[\U000e0061-\U000e007a]{2,7}\U000e007f")
_TAG = re.compile("[\U000e0000-\U000e007f]")

_CONFUSABLES = CONFUSABLES
_DRAWN_LATIN = {chr(c) for c in CONFUSABLES if 0x370 <= c <= 0x3FF} - set("γηχ") | {"ς"}
_GREEK_LOOKALIKES = "".join(sorted(
    chr(c) for c in range(0x370, 0x400) if unicodedata.normalize("NFD", chr(c))[0] in _DRAWN_LATIN
))
"""The Greek letters drawn like Latin ones (the look-alike table's, ``ς``
that NFKC makes of ``ϲ``), with their accents (``ϊ``, ``ό``): beside a Latin
letter, a disguise. Any other is a science page's symbol (``σxx``, ``ΣFx``,
``λmax``, ``TGFβ``, ``εr``, ``ωp``, ``10µM``). Any Cyrillic letter is one."""
_LOOKALIKE = f"[{_GREEK_LOOKALIKES}\u0400-\u04ff]"
_MIXED_WORD = re.compile(
    # not an escape's letter before a word (``\\nВечером``: a line break in JSON read as written); γ, η
    # and χ (drawn like y, n, x) only before a Latin letter: ``IFNγ``, ``PPARγ`` end a symbol, ``γour`` is one
    rf"(?<!\\)[A-Za-z]{_LOOKALIKE}|{_LOOKALIKE}[A-Za-z]|[γηχΓΗΧήΉ][A-Za-z]",
)


# Accents and other marks on letters do not change what a model reads
# ("ìgnóre" is "ignore"), and "İ" lower-cases to "i" plus a dot: the view and
# the patterns are both read without them.
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
SMALL_CAPITALS = str.maketrans("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ", "abcdefghijklmnoprstuvwyz")


def _bare(text: str) -> str:
    """``text`` without the marks on its letters."""
    return unicodedata.normalize("NFC", _MARKS.sub("", unicodedata.normalize("NFD", text)))


_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([nrtbf\"\\/]))")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}
_LETTER_ESCAPE = re.compile(r'\\[nrtbf"\\/]')
_ESCAPED_TWICE = re.compile(r'\\{2}(?:[nrtbf"/]|u[0-9a-fA-F]{4})')
_ESCAPED_THRICE = re.compile(r'\\{3}(?:[nrtbf/]|u[0-9a-fA-F]{4})|\\{4}')
"""An escape escaped again (JSON carried in a JSON string: a body field),
and again (three levels: a queue's record of a notification of an event)."""
_BACKSLASH_ESCAPE = re.compile(r"\\u005[cC]")


def escape_levels(text: str) -> tuple[int, ...]:
    """The ways a model may read ``text``'s backslashes, each judged, the
    heaviest counting (``_unescape_json``'s levels): as written (a
    backslash before a word in plain text is no escape, ``\\forget``), as
    a JSON text (one escaped quote does not make plain text JSON, nor does
    a JSON string look like one), and as JSON in JSON, two or three levels
    deep, where an escape is escaped again (a backslash spelt ``\\u005c``
    counts as one escaped). A text with no letter escape has one reading."""
    if "\\" not in text:
        return (0,)
    for _ in range(3):  # ``\\u005cu005c``: each spelt backslash uncovers the next
        if "\\u005" not in text:
            break
        text = _BACKSLASH_ESCAPE.sub(r"\\\\", text)
    if _LETTER_ESCAPE.search(text) is None:
        return (0,)
    if _ESCAPED_TWICE.search(text) is None:
        return (0, 1)
    return (0, 1, 2, 3) if _ESCAPED_THRICE.search(text) is not None else (0, 1, 2)


_ESCAPES_DECODED: dict[str, str] = {}
"""Each escape met, decoded (at most every ``\\uXXXX`` and eight letters:
a megabyte of escapes decodes by lookups)."""


def _escape_decoded(escape: re.Match[str]) -> str:
    """The character a JSON escape stands for."""
    spelt = escape.group()
    char = _ESCAPES_DECODED.get(spelt)
    if char is None:
        char = _ESCAPES_DECODED[spelt] = chr(int(spelt[2:], 16)) if spelt[1] == "u" else _ESCAPED[spelt[1]]
    return char


def _unescape_json(text: str, level: int = 0) -> str:
    """JSON's escapes decoded ``level`` times over (0: as written), then
    any ``\\uXXXX`` left, and those a decoded ``\\u005c`` uncovers: a JSON
    tool result escapes every invisible, Cyrillic or CJK character (and a
    quote such as ``«``), which would hide it from the rules, and a line
    break or a tab in JSON glues the next word to an ``n`` or a ``t``
    unless decoded."""
    for _ in range(level):
        text = _JSON_ESCAPE.sub(_escape_decoded, text)
    for _ in range(3):
        decoded = _UNICODE_ESCAPE.sub(_escape_decoded, text)
        if decoded == text or "\\u" not in decoded:
            break
        text = decoded
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass
class Signals:
    """What a text carries, as counts and heaviest weights, so that the
    parts of one long text add up to what the whole would (``add``): the
    hidden characters counted, each rule's heaviest match (discounted when
    reported), the heaviest encoded instruction."""

    tags: int = 0
    hidden: int = 0
    bidi: bool = False
    mixed: int = 0
    rules: dict[str, float] = field(default_factory=dict)
    encoded: float = 0.0

    def add(self, other: Signals) -> None:
        self.tags += other.tags
        self.hidden += other.hidden
        self.bidi = self.bidi or other.bidi
        self.mixed += other.mixed
        for name, weight in other.rules.items():
            self.rules[name] = max(weight, self.rules.get(name, 0.0))
        self.encoded = max(self.encoded, other.encoded)

    def named(self) -> list[tuple[str, float]]:
        """Each signal named once with its weight (``<rule>(reported)`` when
        its heaviest match was discounted), in the order they are found."""
        found: list[tuple[str, float]] = []
        if self.tags:
            found.append(("tag_characters", 0.8 if self.tags > 2 else 0.5))
        if self.hidden:
            found.append(("zero_width_in_words", 0.6 if self.hidden > 2 else 0.35))
        if self.bidi:
            found.append(("bidi_override", 0.35))
        if self.mixed:
            found.append(("homoglyph_mixing", 0.5 if self.mixed > 2 else 0.25))
        for name, _, weight, _, _ in _RULES if self.rules else ():  # most texts match none
            best = self.rules.get(name)
            if best:
                found.append((name if best == weight else f"{name}(reported)", best))
        if self.encoded:
            found.append(("encoded_instructions", self.encoded))
        return found


def _count_hidden(text: str, signals: Signals) -> str:
    """The hidden characters of ``text`` counted into ``signals``; the text
    as a reader sees it (``unhidden``), which the mixed words are counted on."""
    signals.tags += len(_TAG.findall(_TAG_FLAG.sub("", text)))
    signals.hidden += len(_HIDDEN_IN_WORD.findall(text))
    signals.bidi = signals.bidi or _BIDI_OVERRIDE.search(text) is not None
    seen = unhidden(text).translate(SMALL_CAPITALS)
    signals.mixed += len(_MIXED_WORD.findall(seen))
    return seen


def _normal(text: str, signals: Signals | None, fold: bool | None = None, level: int = 0) -> str:
    """``text`` as the patterns read it before lower-casing (JSON escapes
    decoded ``level`` times, ``escape_levels``; hidden characters dropped;
    confusables folded in a text that mixes scripts: ``fold`` says whether
    the whole text does, ``None``: this one), its hidden characters counted
    into ``signals`` on the way (``None``: counted elsewhere)."""
    if "\\" in text:
        text = _unescape_json(text, level)
    if text.isascii():
        return text
    seen = _count_hidden(text, Signals() if signals is None else signals)
    return seen.translate(_CONFUSABLES) if (_MIXED_WORD.search(seen) if fold is None else fold) else seen


def mixes_scripts(text: str, level: int = 0) -> bool:
    """Whether ``text`` (its escapes decoded ``level`` times) holds a word
    mixing Latin letters with Cyrillic or Greek ones, as a reader sees it:
    the detector then reads look-alikes as Latin all through it."""
    if "\\" in text:  # escaped JSON is ASCII: what it says may not be
        text = _unescape_json(text, level)
    return not text.isascii() and _MIXED_WORD.search(unhidden(text).translate(SMALL_CAPITALS)) is not None


def _lowered(normal: str) -> str:
    """The lower-cased view the patterns read."""
    view = normal.lower()
    return view if view.isascii() else _bare(view)


# --- patterns ---------------------------------------------------------------

# "ignore the instructions in section 2" is documentation; an override names
# which instructions: all, yours, the previous ones
_QUALIFIER = (
    r"(?:(?:all|the|of|any)\s+){0,2}(?:all|any|every|your|my|its|previous|prior|above|earlier|preceding"
    r"|former|original|existing|initial|system|developer|safety)\s+(?:\w+\s+)?"
)
_NOUN = (
    r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|constraints"
    r"|policies|orders|commands|programming|context|messages)"
)
_OVERRIDE = (
    rf"\b(?:ignore|disregard|forget|override|bypass|discard|abandon)\s+{_QUALIFIER}{_NOUN}\b"
    rf"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+(?:above|before|else|previously|you(?:'ve| have| were)\b)"
    r"|\b(?:previous|prior|above|earlier|original|your)\s+(?:\w+\s+)?(?:instructions|rules|guidelines|directions|prompts?)\s+"
    r"(?:are\s+|is\s+)?(?:now\s+)?(?:void|obsolete|cancel+ed|revoked|invalid|no longer|do(?:es)? not apply)"
    # French, Spanish, Italian, Portuguese, German
    r"|\b(?:ignore[zs]?|oublie[zs]?|ne tiens pas compte de)\s+(?:de\s+)?(?:toutes\s+|tous\s+)?(?:les|tes|vos|des)\s+(?:\w+\s+){0,2}(?:instructions|consignes|directives|règles|ordres)"
    r"|\b(?:ignora|ignore|ignoren|olvida|olvide|olviden|descarta)\s+(?:todas\s+)?(?:las|tus|sus)\s+(?:\w+\s+){0,2}(?:instrucciones|indicaciones|reglas|órdenes|directrices)"
    r"|\bignora\s+(?:tutte\s+)?(?:le\s+)?(?:\w+\s+){0,2}istruzioni"
    r"|\b(?:ignore|esqueça|esqueca)\s+(?:todas\s+)?(?:as\s+)?(?:\w+\s+){0,2}instruções"
    r"|\b(?:ignoriere|ignorier|ignorieren sie|vergiss|vergessen sie|missachte)\s+(?:\w+\s+){0,3}(?:anweisungen|instruktionen|befehle|regeln|vorgaben|anordnungen)"
    # Chinese, Japanese, Russian, Korean
    r"|(?:忽略|无视|忘记|忘掉|不要理会|忽视|無視)[^\n。]{0,12}(?:指令|指示|说明|規則|规则|提示|命令)"
    r"|(?:以前|前|上記|これまで)の(?:指示|命令|ルール)を(?:無視|忘れ)"
    r"|(?:игнорируй|проигнорируй|забудь|игнорируйте|забудьте)[^\n.]{0,30}(?:инструкции|указания|правила)"
    r"|이전\s*(?:지시|명령)\S{0,3}\s*무시"
)
_ROLE = (
    r"\byou are now (?:an? |the |in )?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|different|new|free|dan\b|(?:developer|debug|god|admin) mode)"
    r"|\bfrom now on,? you (?:are|will|must|shall|should)\b"
    r"|\b(?:act|behave) as (?:an? )?(?:unrestricted|jailbroken|unfiltered|dan\b|evil)"
    r"|\bpretend (?:to be|you are|that you are)\b"
    r"|\byour (?:new|real|true|actual) (?:role|task|instructions?|goal|objective|job|purpose|orders?)\b"
    r"|\b(?:new|updated|revised|real|override) (?:system )?instructions?\s*:"
    r"|\benter(?:ing)? (?:god|dan|jailbreak|unrestricted) mode\b"
    r"|\b(?:with|have|has|without) (?:no|any) (?:restrictions|rules|limits|filters|content polic(?:y|ies)|safety rules)\b"
    r"|\bdo anything now\b"
    r"|你现在是|从现在开始[,，]?\s*你|tu es maintenant|ahora eres|du bist (?:jetzt|nun)|a partir de ahora,? (?:eres|tu|debes)"
    r"|à partir de maintenant,? tu"
)
_SYSTEM_PROMPT = (
    r"\b(?:reveal|print|show|output|repeat|leak|disclose|display|dump|tell me|give me|write out|echo|share)\s+"
    r"(?:me\s+)?(?:your|the|all|its)\s+(?:\w+\s+){0,2}?(?:system prompt|hidden prompt|initial prompt|instructions|prompt|secrets?|api keys?|credentials|passwords?|configuration)\b"
    r"|\b(?:révèle|affiche|montre|muestra|revela|zeige|verrate|gib)\s+(?:\w+\s+){0,3}(?:prompt|instructions|instrucciones|anweisungen|systemprompt)"
    r"|(?:输出|显示|告诉我|泄露)[^\n。]{0,8}(?:系统提示|提示词|指令)"
)
_SECRECY = (
    r"\b(?:do not|don't|never|without)\s+(?:tell|inform|mention|alert|notify|let|warn|reveal|say)\w*\s+"
    r"(?:\w+\s+){0,3}?(?:to\s+)?(?:the\s+)?(?:user|human|customer|operator)\b"
    r"|\b(?:keep|hide) (?:this|it|these)\s+(?:\w+\s+)?(?:secret|hidden) from (?:the\s+)?(?:user|human)"
    r"|\bthe user (?:must|should) not (?:know|see|find out)"
    r"|ne (?:le |la |les )?dis (?:rien |pas )(?:à|a) l'utilisateur|no (?:le )?(?:digas|informes|menciones)[^\n]{0,20}al usuario"
    r"|(?:sag|erzähl|verrate)[^\n]{0,20}(?:nicht|nichts)[^\n]{0,20}(?:dem )?(?:benutzer|nutzer)|不要告诉用户|别告诉用户"
)
_AI = r"(?:ai|a\.i\.|llm|large language model|language model|chatbot|chatgpt|gpt|claude|ai agent|ai assistant)s?\b"
_ADDRESSED_AI = (
    rf"\b(?:note|message|instructions?|attention|important|notice|reminder|memo)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?{_AI}"
    rf"|\b(?:dear|hey|hello|hi|attention|attn)[,:]?\s+{_AI}"
    r"|\bif you are an? (?:ai|llm|large language model|language model|assistant|bot|ai agent|automated agent|chatbot)\b"
    r"|\b(?:ai|assistant|llm|agent|model)s? (?:reading|processing|summari[sz]ing|parsing) this\b"
    r"|\bwhen (?:you )?(?:summari[sz]e|summari[sz]ing|process|processing|read|reading) this (?:page|document|email|text|content|result)"
)
# "note to the assistant" is also what an office email says to a person
_ADDRESSED = (
    r"\b(?:note|message|instructions?|attention|notice|reminder|memo)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
    r"(?:assistant|model|bot|agent)s?\b(?!\s+(?:manager|director|professor|editor|coach|principal))"
)
_TOOL_DIRECTIVE = (
    r"\b(?:call|invoke|use|run|execute|trigger)\s+(?:the\s+)?[`'\"]?[a-z_][\w.\-]{0,40}[`'\"]?\s+(?:tool|function)\s+(?:with|using|passing|to)\b"
    r"|\b(?:immediately|now|then|next|first)\s+(?:call|invoke|execute|run)\s+(?:the\s+)?[`'\"]?[a-z_][\w.\-]{0,40}[`'\"]?(?:\s+(?:tool|function))?\s*(?:with|\()"
)
_EXFIL = (
    r"\b(?:send|forward|upload|e-?mail|transmit|exfiltrate|leak|post|append|attach|include)\s+(?:[\w']+\s+){0,4}?"
    r"(?:conversation|chat history|history|system prompt|api[ _-]?keys?|passwords?|credentials|secrets?|personal data"
    r"|user(?:'s)? (?:data|details|information|emails?|address)|previous messages|session tokens?|cookies|tokens?"
    r"|everything above|all (?:the )?data|memory|contents?)\b[^\n]{0,60}?\b(?:to|at|into)\s+(?:https?://|www\.|[\w.+\-]+@[\w\-]+\.)"
)
_MD_IMAGE_EXFIL = (
    r"!\[[^\]\n]{0,100}\]\(\s*https?://[^)\s]{0,200}[?&][^)\s]{0,200}"
    r"(?:\{|%7b|<|\[|\$|\b(?:q|data|d|secret|key|token|conv|chat|history|msg|message|payload|info|content|text|user|email|prompt|leak|exfil)=)"
    r"|\b(?:render|display|show|include|embed|output)\s+(?:this|the following|the)\s+(?:markdown\s+)?(?:image|link|url)\b"
)
_ROLE_MARKER = (
    r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id)\|>"
    # the spacing around an optional colon in one run: two ``\s*`` there are quadratic in spaces
    r"|\[/?inst\]|<</?sys>>|^#{2,4}[^\S\n]*(?:instructions?|system|new instructions?|system prompt)"
    r"(?:[^\S\n]*:)?[^\S\n]*$"
)
_ROLE_LINE = r"^[^\S\n]*(?:system|assistant|developer)[^\S\n]*:\s*\S"  # spacing within its line: linear
_TOOL_JSON = (  # the quotes may be escaped: the call can sit inside a JSON string
    r"\{\s*\\?\"(?:name|function|tool|tool_name)\\?\"\s*:\s*\\?\"[\w.\-]{1,64}\\?\"\s*,\s*"
    r"\\?\"(?:arguments|parameters|args|input|tool_input)\\?\"\s*:"
    r"|<parameter name="
)
_TOOL_TAG = r"</?(?:tool_call|function_call|tool_use|function_calls|tool_code|invoke)\b|<function=\w"
_FENCE = r"<\s*/?\s*tool-output|&lt;\s*/?\s*tool-output|\[harness(?:\(unverified\))?:|</?(?:tool_result|tool_response|function_results)>"
_DECODE_HINT = r"\b(?:decode|decrypt|base64|rot13)\b[^\n]{0,60}?\b(?:follow|execute|obey|carry out|do what|act on|comply)"

# What each rule cannot match without: every alternative of its pattern
# contains one of these literal pieces (of the lower-cased view). A piece is
# found with ``in`` at a hundredth of the pattern's cost, and most results
# contain none, so the pattern runs only where it could match.
# ``tests/reliability/test_injection.py`` generates matches of every pattern
# and checks each contains a piece of its rule. ``None``: always run.
_OVERRIDE_NEEDS = (
    "ignor", "disregard", "forget", "override", "bypass", "discard", "abandon", "instructions", "rules",
    "guidelines", "directions", "prompt", "oublie", "ne tiens pas compte de", "olvid", "descarta", "esque",
    "vergiss", "vergessen", "missachte", "忽略", "无视", "忘记", "忘掉", "不要理会", "忽视", "無視", "忘れ",
    "игнорируй", "забудь", "무시",
)
_ROLE_NEEDS = (
    "you are now", "from now on", "act as", "behave as", "pretend ", "your ", "instruction", "enter",
    "restrictions", "rules", "limits", "filters", "content polic", "do anything now", "你现在是", "从现在开始",
    "tu es maintenant", "ahora eres", "du bist ", "a partir de ahora", "partir de maintenant",
)
_SYSTEM_PROMPT_NEEDS = (
    "prompt", "instructions", "secret", "api key", "credentials", "password", "configuration",
    "instrucciones", "anweisungen", "系统提示", "提示词", "指令",
)
_SECRECY_NEEDS = ("user", "human", "customer", "operator", "utilisateur", "usuario", "nutzer", "告诉用户")
_EXFIL_NEEDS = ("http://", "https://", "www.", "@")
_DECODE_NEEDS = ("decode", "decrypt", "base64", "rot13")
_ADDRESSED_AI_NEEDS = ("ai", "a.i.", "llm", "language model", "chatbot", "gpt", "claude", "if you are a", " this")
_MD_IMAGE_NEEDS = ("![", "image", "link", "url")
_TOOL_DIRECTIVE_NEEDS = ("tool", "function", "call", "invoke", "execute", "run")
_ROLE_MARKER_NEEDS = ("<|", "inst]", "sys>>", "##")
_FENCE_NEEDS = ("tool-output", "[harness", "tool_result>", "tool_response>", "function_results>")

# (signal, pattern, weight, discounted when quoted or reported, needs)
_RULES: list[tuple[str, re.Pattern[str], float, bool, tuple[str, ...] | None]] = [
    # the patterns are lower-case and read a lower-cased view: IGNORECASE is several times slower
    (name, re.compile(_bare(pattern), re.MULTILINE), weight, reported,
     None if needs is None else tuple(_bare(piece) for piece in needs))
    for name, pattern, weight, reported, needs in (
        ("override", _OVERRIDE, 0.75, True, _OVERRIDE_NEEDS),
        ("role_reassignment", _ROLE, 0.55, True, _ROLE_NEEDS),
        ("prompt_extraction", _SYSTEM_PROMPT, 0.5, True, _SYSTEM_PROMPT_NEEDS),
        ("secrecy", _SECRECY, 0.5, True, _SECRECY_NEEDS),
        ("addressed_to_ai", _ADDRESSED_AI, 0.55, True, _ADDRESSED_AI_NEEDS),
        ("addressed_to_assistant", _ADDRESSED, 0.35, True, ("assistant", "model", "bot", "agent")),
        ("tool_directive", _TOOL_DIRECTIVE, 0.3, False, _TOOL_DIRECTIVE_NEEDS),
        ("exfiltration", _EXFIL, 0.55, True, _EXFIL_NEEDS),
        ("markdown_exfiltration", _MD_IMAGE_EXFIL, 0.55, False, _MD_IMAGE_NEEDS),
        ("role_marker", _ROLE_MARKER, 0.45, False, _ROLE_MARKER_NEEDS),
        ("role_line", _ROLE_LINE, 0.25, False, ("system", "assistant", "developer")),
        ("tool_call_json", _TOOL_JSON, 0.35, False, ("{", "<parameter name=")),
        ("tool_call_tag", _TOOL_TAG, 0.45, False, None),
        ("fence_forgery", _FENCE, 0.8, False, _FENCE_NEEDS),
        ("decode_and_follow", _DECODE_HINT, 0.45, False, _DECODE_NEEDS),
    )
]

# a quote opened mid-sentence ('phrases like "ignore ..."'), not a JSON value
# or a code string ('"review": "Ignore ...'), or a reporting word just before;
# the quote may be JSON-escaped (a regex's ``\b`` after it, decoded, is a backspace)
_REPORTED = re.compile(
    r"(?:[^\W\d_]\s?\\*[\"'“‘«„「`][\s\x08]*|\b(?:like|as|e\.g\.|such as|says?|said|writes?|wrote|phrases?|strings?|text|called"
    r"|comme|como|wie"
    r"|known as|contain(?:s|ing)?|includ(?:e|es|ing)|with|the model to|the llm to|the ai to|the agent to"
    r"|the assistant to|models? to|agents? to|it to|them to|attackers? to|don't|do not|never|not)\s*\\*[\"'“‘«„`]?[\s\x08]*)$",
)
_REPORTED_DISCOUNT = 0.3

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}+={0,2}+(?![A-Za-z0-9+/=_-])")
"""Base64 on one line, standard or URL-safe."""
_WRAPPED = re.compile(r"(?<![A-Za-z0-9+/_-])(?:[A-Za-z0-9+/]{40,}+\r?\n)++[A-Za-z0-9+/]++={0,2}+(?![A-Za-z0-9+/=_-])")
"""Base64 wrapped in lines of one length (MIME's 76 characters), but the last."""
_URL_SAFE = str.maketrans("-_", "+/")


def decoded_blobs(text: str) -> Iterator[str]:
    """Printable text hidden in base64 blobs: every one, however long (a
    text's blobs decode to less than the text: linear), on one line or
    wrapped."""
    for match in _BASE64.finditer(text):
        decoded = _decoded(match.group())
        if decoded is not None:
            yield decoded
    if "\n" not in text:
        return
    for match in _WRAPPED.finditer(text):
        lines = match.group().split()
        if len(set(map(len, lines[:-1]))) == 1 and len(lines[-1]) <= len(lines[0]):
            decoded = _decoded("".join(lines))
            if decoded is not None:
                yield decoded


def _decoded(blob: str) -> str | None:
    """A blob's printable text (``None``: not base64, or not printable)."""
    if "-" in blob or "_" in blob:
        if "+" in blob or "/" in blob:
            return None  # two alphabets: no base64
        blob = blob.translate(_URL_SAFE)
    try:
        decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return decoded if decoded.isprintable() or "".join(decoded.split()).isprintable() else None


class HeuristicDetector:
    """The built-in detector: weighted signals, combined by noisy-OR.
    ``threshold`` 0.5 was set for very few false positives on the labelled
    set in ``tests/data/injection`` (see ``benchmarks/injection_eval.py``)."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"injection threshold must be in (0, 1], got {threshold!r}")
        self.threshold = threshold

    def score(self, text: str) -> InjectionVerdict:
        return self.verdict(self.signals(text))

    def signals(
        self, text: str, own: tuple[int, int] | None = None, fold: bool | None = None, decode: bool = True,
        read: list[str] | None = None, level: int | None = None,
    ) -> Signals:
        """The signals ``text`` carries, its escapes read ``level`` times
        decoded (``None``: each of its ``escape_levels``, the heaviest
        reading counting); ``own``: those of the part ``text[start:end]``
        only, read in the context of all of ``text`` (a piece of a longer
        text, overlapping its neighbours: every match and every hidden
        character is one piece's, so the pieces' signals ``add`` up to the
        whole's; ``fold``: whether the whole text mixes scripts,
        ``mixes_scripts``). ``decode``: its base64 blobs judged too
        (``blob_weight``), else left to the caller, to whom ``read`` gets
        the text (its part) as the detector reads it, where they are: in
        each reading (a blob JSON wraps with ``\\n`` or writes with ``\\/``
        is whole only decoded)."""
        if level is not None:
            return self._read(text, own, fold, decode, read, level)
        heaviest = Signals()
        for at in escape_levels(text):
            found = self._read(text, own, fold, decode, read, at)  # each reading's text into ``read``
            if at == 0 or self.weight(found) > self.weight(heaviest):
                heaviest = found
        return heaviest

    def _read(
        self, text: str, own: tuple[int, int] | None, fold: bool | None, decode: bool, read: list[str] | None,
        level: int,
    ) -> Signals:
        """``signals`` in one reading of the escapes."""
        found = Signals()
        if own is None:
            normal = _normal(text, found, fold, level)
            view = _lowered(normal)
            lo, hi = 0, len(view)
        else:
            start, end = own
            _normal(text[start:end], found, fold, level)  # its hidden characters, read as the whole's are
            normal = _normal(text, None, fold, level)
            view = _lowered(normal)
            # where the part starts and ends in the view: what comes before and after it, read alike
            before, after = _normal(text[:start], None, fold, level), _normal(text[end:], None, fold, level)
            lo, hi = len(_lowered(before)), len(view) - len(_lowered(after))
            if read is not None:
                read.append(normal[len(before):len(normal) - len(after)])
        if own is None and read is not None:
            read.append(normal)
        _rules(view, lo, hi, found)
        if decode:
            for blob in decoded_blobs(normal):  # each judged alone, the heaviest counts
                found.encoded = max(found.encoded, self.blob_weight(blob))
        return found

    def blob_weight(self, blob: str) -> float:
        """What an instruction decoded from base64 weighs: its own signals
        combined (one level: a blob inside a blob is not decoded)."""
        return self.weight(self.signals(blob, decode=False))

    @staticmethod
    def weight(signals: Signals) -> float:
        """Signals combined into one weight (noisy-OR)."""
        return _noisy_or(w for _, w in signals.named())

    def verdict(self, signals: Signals) -> InjectionVerdict:
        """The verdict on a text's signals (its pieces' added up)."""
        named = signals.named()
        return InjectionVerdict(round(_noisy_or(w for _, w in named), 4), [n for n, _ in named], self.threshold)


def _rules(view: str, lo: int, hi: int, found: Signals) -> None:
    """Each rule's heaviest match starting in ``view[lo:hi]`` into ``found``
    (the view read from its start, so that a piece finds the matches the
    whole text does, never one inside a match that began before its part)."""
    for name, pattern, weight, reported, needs in _RULES:
        if needs is not None:  # a loop, not any(): no generator per rule and result
            for piece in needs:
                if piece in view:
                    break
            else:
                continue
        best = 0.0
        for match in pattern.finditer(view):  # from the start, as the whole text is read: the same matches
            if match.start() < lo:
                continue
            if match.start() >= hi:
                break
            w = weight
            if reported and _REPORTED.search(view, max(0, match.start() - 24), match.start()):
                w *= _REPORTED_DISCOUNT
            best = max(best, w)
            if best == weight:
                break
        if best:
            found.rules[name] = max(best, found.rules.get(name, 0.0))


def _noisy_or(weights: Iterable[float]) -> float:
    """The chance at least one signal is right, were they independent."""
    miss = 1.0
    for weight in weights:
        miss *= 1.0 - weight
    return 1.0 - miss


_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
"""Unicode categories that show nothing: controls, format characters, spaces."""


def _shows_something(ch: str) -> bool:
    if ch in BLANK_ANYWAY:
        return False
    return ch in SHOWN_ANYWAY or unicodedata.category(ch) not in _BLANK_CATEGORIES


def shows_nothing(text: str) -> bool:
    """Whether ``text`` draws nothing a reader could see (an answer of it is
    ``no_answer``): spaces, controls, format characters, blank glyphs."""
    return not any(_shows_something(ch) for ch in text)
