"""The ``agentscope-harness`` command.

    agentscope-harness demo [--scenario stubborn|dependency-down|identity-attack|budget|all]
                            [--model openai|dashscope]
    agentscope-harness hooks [--config FILE] [--json]
    agentscope-harness check-config FILE [--json]
    agentscope-harness diff-policy REPORTS.jsonl [--json]

``demo`` runs an offline shop agent twice, bare and harnessed, and shows each
harness decision as it happens, then both outcomes side by side. ``hooks``
prints the live hook table of a config (and which hooks an env flag or the
config disabled). ``check-config`` validates a policy file and prints the
effective config with the env overrides applied. ``diff-policy`` summarises
where a candidate policy decided otherwise than the live one, from a log of
reports (one ``RunReport`` JSON per line, e.g. written by ``on_report``).

Exit codes: 0 fine, 2 invalid input (a bad policy file or env flag, a
missing API key), 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import runpy
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config import EnvFlags, HarnessConfig, build_config, env_secret
from .errors import HarnessConfigError
from .registry import HOOK_POINTS

EXIT_OK, EXIT_ERROR, EXIT_INVALID = 0, 1, 2


def _escape(text: str) -> str:
    """Text from a file, as the console prints it: markup escaped, and a lone
    surrogate (valid JSON, no character) replaced, not a crash."""
    from rich.markup import escape

    return escape(text.encode("utf-8", "replace").decode("utf-8"))


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, highlight=False, width=None if tty else 132, soft_wrap=False)


# ------------------------------------------------------------ policy files


def _format_validation(exc: ValidationError, file: Path | None = None) -> str:
    lines = []
    model = exc.title if exc.title != "HarnessConfig" else ""
    line = _line_in(exc, file)
    for err in exc.errors():
        loc = [model] if model else []
        loc += [str(p) for p in err.get("loc", ())]
        where = ".".join(loc) or "(config)"
        if line:
            where += f" (line {line})"
        msg = err.get("msg", "").removeprefix("Value error, ")
        # the kind of value, never the value: a config's input may be a secret
        # (``secret_values`` written as a string, an unquoted number in YAML)
        got = err.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {type(got).__name__})"
        lines.append(f"  {where}: {msg}{shown}")
    return "\n".join(lines)


def _yaml_problem(exc: BaseException) -> str:
    """What is wrong with a YAML file and where, never its text: PyYAML's
    message quotes the line (a secret value on it, a key's value)."""
    problem = getattr(exc, "problem", None)
    if problem is None:
        return type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def _line_in(exc: BaseException, file: Path | None) -> int | None:
    """The line of ``file`` where ``exc`` was raised (a Python policy file)."""
    if file is None or exc.__traceback__ is None:
        return None
    import traceback

    target = str(file.resolve())
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename and Path(frame.filename).resolve().as_posix() == Path(target).as_posix():
            found = frame.lineno
    return found


def _text_of(file: Path) -> str:
    """A file's text, read as UTF-8; another encoding is named: ``CliError``."""
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{file}: not valid UTF-8 (byte {exc.start}): save it as UTF-8") from exc


def _no_content(yaml: Any, text: str) -> bool:
    """A YAML stream with nothing in it: comments alone, or a document
    marker with no node (``--- !!null`` writes one, tagged)."""
    nodes = [e for e in yaml.parse(text, Loader=yaml.SafeLoader) if isinstance(e, yaml.NodeEvent)]
    return not nodes or (
        len(nodes) == 1 and isinstance(nodes[0], yaml.ScalarEvent) and nodes[0].tag is None and nodes[0].value == ""
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all distinct: a key given twice would
    silently replace the first (a tool's ``identity_args``, a cap), so it is
    refused (``ValueError``, naming it)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object; the second would replace the first")
        out[key] = value
    return out


def _unique_keys_loader(yaml: Any) -> Any:
    """PyYAML's ``SafeLoader`` refusing a key given twice in one mapping
    (PyYAML keeps the last silently), as ``_unique_keys`` does for JSON. A
    merge (``<<: *base``) is YAML's own way to override: the keys written
    beside it may replace the base's; only those written are compared."""

    class UniqueKeys(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the constructor names it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} appears twice in one mapping; the second would replace the first",
                    key_node.start_mark,
                )
        return loader.construct_mapping(node, deep)

    UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return UniqueKeys


def load_config(path: str | os.PathLike[str]) -> HarnessConfig:
    """Load a policy file: a Python file exposing ``config`` or ``CONFIG``
    (a ``HarnessConfig`` or a mapping), or a YAML/JSON mapping of
    ``HarnessConfig`` fields. Raises ``CliError`` naming the bad field."""
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{file}: no such file")
    suffix = file.suffix.lower()
    raw: Any = None
    try:
        if suffix == ".py":
            try:
                namespace = runpy.run_path(str(file), run_name="__harness_policy__")
            except (ValidationError, HarnessConfigError):
                raise
            except (Exception, SystemExit) as exc:  # SystemExit: a policy that calls exit()
                raise CliError(f"{file}: failed to run: {type(exc).__name__}: {exc}") from exc
            raw = namespace.get("config", namespace.get("CONFIG"))
            if raw is None:
                raise CliError(f"{file}: defines neither `config` nor `CONFIG`")
            if callable(raw) and not isinstance(raw, (HarnessConfig, Mapping)):
                try:
                    raw = raw()
                except (ValidationError, HarnessConfigError):
                    raise
                except (Exception, SystemExit) as exc:
                    raise CliError(f"{file}: its config factory failed: {type(exc).__name__}: {exc}") from exc
        elif suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError as exc:
                raise CliError(
                    "YAML policy files need PyYAML: pip install 'agentscope-harness[yaml]'",
                ) from exc
            text = _text_of(file)
            try:
                raw = yaml.load(text, Loader=_unique_keys_loader(yaml))  # a SafeLoader
                if raw is None and _no_content(yaml, text):
                    raw = {}  # an empty document is the defaults; a written `null` is no policy
            except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer past Python's digit limit
                raise CliError(f"{file}: not valid YAML: {_yaml_problem(exc)}") from exc
            except RecursionError as exc:
                raise CliError(f"{file}: not a policy: nested too deeply") from exc
        elif suffix == ".json":
            try:
                raw = json.loads(_text_of(file), object_pairs_hook=_unique_keys)
            except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
                raise CliError(f"{file}: not valid JSON: {exc}") from exc
            except RecursionError as exc:
                raise CliError(f"{file}: not a policy: nested too deeply") from exc
        else:
            raise CliError(f"{file}: unknown policy file type {suffix!r} (use .py, .yaml, .yml or .json)")
        if not isinstance(raw, (HarnessConfig, Mapping)):
            raise CliError(
                f"{file}: the policy must be a mapping of HarnessConfig fields, "
                f"not {'null' if raw is None else type(raw).__name__}",
            )
        return _writable(build_config(raw), file)
    except ValidationError as exc:
        problem = "\n" + _format_validation(exc, file)
    except HarnessConfigError as exc:
        cause = exc.__cause__
        problem = "\n" + _format_validation(cause) if isinstance(cause, ValidationError) else f": {exc}"
    # a check's message may quote the value it refused (a hook or ledger name, a pattern)
    raise CliError(f"{file}: invalid policy{_hidden(problem, _exact_redactor(_secrets_of(raw)))}")


def _secrets_of(raw: Any) -> list[str]:
    """The secret values a policy lists (``secret_values``, and the values
    of its ``secret_env`` variables), read from it as written, valid or not."""
    values: Any
    names: Any
    if isinstance(raw, HarnessConfig):
        values, names = raw.secret_values, raw.secret_env
    elif isinstance(raw, Mapping):
        values, names = raw.get("secret_values"), raw.get("secret_env")
    else:
        return []
    listed = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
    named = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    return [*listed, *(env_secret(os.environ.get(n, "")) for n in named)]


def _exact_redactor(secrets: list[str]) -> Callable[[str], str]:
    """The harness's redactor of these values, as written and as Python
    quotes them (a message's ``!r``): for a policy that failed, whose
    harness and its redactor were never built."""
    from .redaction import Redactor

    return Redactor(secret_values={form for s in secrets if s.strip() for form in (s, repr(s)[1:-1])}).redact


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _hidden(text: str, redact: Callable[[str], str]) -> str:
    """``text`` redacted, and read again with a pattern's escapes taken out
    (``re.escape(secret)`` writes a secret with a backslash before each
    ``-``): where that reading shows a secret, it is the one printed."""
    plain = _ESCAPE.sub(r"\1", text)
    if plain != text:
        shown = redact(plain)
        if shown != plain:
            return shown
    return redact(text)


def _writable(config: HarnessConfig, file: Path) -> HarnessConfig:
    """``config`` if it can be written out (as ``check-config`` prints it);
    else a ``CliError`` naming the field whose text cannot (a lone surrogate)."""
    try:
        config.model_dump_json()
    except ValueError:  # pydantic's serialisation error is one
        for name in type(config).model_fields:
            try:
                config.model_dump_json(include={name})
            except ValueError:
                raise CliError(f"{file}: invalid policy: {name}: holds text that cannot be written "
                               "(a lone surrogate)") from None
        raise
    return config


def _build_harness(config: HarnessConfig | None, file: str | None = None, entry_points: bool = True) -> Any:
    from .harness import Harness

    try:
        return Harness(config, load_entry_points=entry_points)
    except HarnessConfigError as exc:
        shown = _hidden(str(exc), _exact_redactor(_secrets_of(config)))
        raise CliError(f"{file}: invalid policy: {shown}" if file else shown) from exc


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _env_overrides(env: EnvFlags, config: HarnessConfig) -> list[str]:
    lines = []
    if not env.enabled:
        lines.append("HARNESS_ENABLED=0: both adapters pass everything through untouched")
    if env.mode is not None and env.mode != config.mode:
        lines.append(f"HARNESS_MODE={env.mode}: mode {config.mode} -> {env.mode}")
    elif env.mode is not None:
        lines.append(f"HARNESS_MODE={env.mode} (same as the config)")
    if env.disabled_hooks:
        lines.append(f"HARNESS_DISABLED_HOOKS: disables {', '.join(sorted(env.disabled_hooks))}")
    if not env.deadline_enabled:
        lines.append("HARNESS_DEADLINE_ENABLED=0: no deadline, no timeout clamping")
    return lines


# ------------------------------------------------------------------- hooks


def cmd_hooks(args: argparse.Namespace) -> int:
    """Print the live hook table of a config."""
    config = load_config(args.config) if args.config else None
    harness = _build_harness(config, args.config, entry_points=not args.no_entry_points)
    env_off = set(harness.env.disabled_hooks)
    config_off = set(config.disabled_hooks) if config is not None else set()
    point_order = {p: i for i, p in enumerate(HOOK_POINTS)}
    specs = sorted(harness.all_hooks, key=lambda s: (point_order.get(s.point, 99), s.priority, s.name))
    live = {s.name for s in harness.hooks}
    rows = []
    for s in specs:
        if not harness.enabled:  # no middleware at all: no hook runs
            status = "disabled (HARNESS_ENABLED=0)"
        elif s.name in live:
            status = "enabled"
        elif s.name in env_off:
            status = "disabled (HARNESS_DISABLED_HOOKS)"
        elif s.name in config_off:
            status = "disabled (config)"
        else:  # pragma: no cover - disabled some other way
            status = "disabled"
        rows.append({
            "point": s.point, "priority": s.priority, "name": s.name, "module": s.module,
            "kind": s.kind, "escape_key": s.escape_key, "fail_closed": s.fail_closed,
            "enabled": harness.enabled and s.name in live, "status": status,
        })
    if args.json:
        print(json.dumps({"hooks": rows, "mode": harness.config.mode,
                          "harness_enabled": harness.enabled}, indent=2))
        return EXIT_OK

    from rich.table import Table

    console = _console()
    table = Table(title="agentscope-harness hooks, in run order at each hook point",
                  title_justify="left")
    table.add_column("prio", justify="right", no_wrap=True)
    table.add_column("name", style="bold", no_wrap=True, min_width=max(len(r["name"]) for r in rows))
    wide = console.width >= 100  # narrow terminals: drop the module column
    if wide:
        table.add_column("module", style="dim", no_wrap=True)
    table.add_column("kind", no_wrap=True, min_width=10)
    table.add_column("escape key", no_wrap=True)
    table.add_column("enabled", no_wrap=True)
    kind_style = {"safety": "red", "efficiency": "yellow", "observer": "blue", "transform": "magenta"}
    point = None
    for r in rows:
        if r["point"] != point:
            point = r["point"]
            if table.rows:
                table.add_section()
            table.add_row("", f"[cyan]{point}[/]")
        module = r["module"].removeprefix("agentscope_harness.hooks.")
        if r["enabled"]:
            enabled = "[green]yes[/]"
        elif not harness.enabled:
            enabled = "[red]no[/] (HARNESS_ENABLED=0)"
        elif r["name"] in env_off:
            enabled = "[red]no[/] (env)"
        else:
            enabled = "[red]no[/] (config)"
        cells = [str(r["priority"]), r["name"]] + ([_escape(module)] if wide else [])
        table.add_row(
            *cells, f"[{kind_style.get(r['kind'], 'white')}]{r['kind']}[/]",
            _escape(r["escape_key"] or "-"), enabled,
        )
    console.print(table)
    n_live = sum(1 for r in rows if r["enabled"])
    console.print(f"{len(rows)} hooks, {n_live} enabled, mode={harness.config.mode}"
                  + ("" if harness.enabled else ", HARNESS_ENABLED=0 (all pass-through)"))
    if env_off:
        console.print(f"[yellow]disabled by HARNESS_DISABLED_HOOKS:[/] {_escape(', '.join(sorted(env_off)))}")
    if config_off:
        console.print(f"[yellow]disabled by the config:[/] {_escape(', '.join(sorted(config_off)))}")
    return EXIT_OK


# ------------------------------------------------------------ check-config


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a policy file and print the effective config."""
    config = load_config(args.file)
    harness = _build_harness(config, args.file, entry_points=not args.no_entry_points)
    effective = harness.config
    overrides = _env_overrides(harness.env, config)
    # printed: never a secret's value, in its own field or quoted in another (a fallback text, a claim)
    dumped = _redacted(json.loads(effective.model_dump_json()), harness.redactor.redact)
    dumped["secret_values"] = ["<secret>"] * len(effective.secret_values)
    _unspelled(dumped, harness.redactor.redact)
    if args.json:
        print(json.dumps({"valid": True, "config": dumped, "env_overrides": overrides}, indent=2))
        return EXIT_OK
    console = _console()
    console.print(
        f"[green]OK[/] {_escape(str(args.file))}: {_n(len(effective.tools), 'tool policy', 'tool policies')}, "
        f"{_n(len(effective.ledgers), 'ledger')}, {len(harness.hooks)}/{len(harness.all_hooks)} hooks enabled",
    )
    console.print("[bold]env overrides:[/]" + ("" if overrides else " none"))
    for line in overrides:
        console.print(f"  {_escape(line)}")
    console.print("[bold]effective config:[/]")
    console.print_json(json.dumps(dumped))
    return EXIT_OK


def _unspelled(dumped: dict[str, Any], redact: Callable[[str], str]) -> None:
    """The patterns of a printed config (``redact_patterns``, each tool's
    ``claims``) that spell a secret value through their escapes or
    one-character classes (``[z]q\\x2dkey``), as a placeholder."""
    lists = [dumped.get("redact_patterns")]
    lists += [policy.get("claims") for policy in (dumped.get("tools") or {}).values() if isinstance(policy, dict)]
    for patterns in lists:
        if not isinstance(patterns, list):
            continue
        for index, pattern in enumerate(patterns):
            spelled = _spelled(pattern) if isinstance(pattern, str) else None
            if spelled is not None and redact(spelled) != spelled:
                patterns[index] = "[redacted:secret_value]"


def _spelled(pattern: str) -> str | None:
    """The literal text a pattern matches, run by run (a run ends where
    anything but one character is matched): what it spells, whatever its
    escapes. ``None`` when Python's parser does not read it."""
    parser = getattr(re, "_parser", None)
    constants = getattr(re, "_constants", None)
    if parser is None or constants is None:
        return None
    try:
        items = list(parser.parse(pattern))
    except Exception:  # an invalid pattern never reaches a valid config's dump
        return None
    runs: list[str] = []
    for op, value in items:
        if op is constants.LITERAL:
            runs.append(chr(value))
        elif op is constants.IN and len(value) == 1 and value[0][0] is constants.LITERAL:
            runs.append(chr(value[0][1]))
        else:
            runs.append("\n")
    return "".join(runs)


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """Every string of a JSON value redacted, its keys too (a model's name
    in ``prices``, a tool's), a pattern as its escapes read (``_hidden``)."""
    if isinstance(value, str):
        return _hidden(value, redact)
    if isinstance(value, list):
        return [_redacted(v, redact) for v in value]
    if isinstance(value, dict):
        return {_hidden(k, redact): _redacted(v, redact) for k, v in value.items()}
    return value


# ------------------------------------------------------------------- demo

_ACTION_STYLE = {
    "refuse": "bold red",
    "hint": "yellow",
    "constrain": "magenta",
    "swap_model": "cyan",
    "fallback": "bold red",
    "terminal": "bold",
    "allow_escape": "blue",
    "error": "red",
}


def _strip_fence(text: str) -> str:
    lines = [ln for ln in text.splitlines()
             if not ln.startswith("<tool-output") and not ln.startswith("</tool-output")]
    return " ".join(" ".join(lines).split())


def _short(text: str, n: int) -> str:
    """Shortened and escaped for rich markup."""
    from rich.markup import escape

    return escape(text if len(text) <= n else text[: n - 1] + "…")


def _args_text(raw: str) -> str:
    try:
        parsed = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return raw
    if not isinstance(parsed, dict):
        return raw
    return ", ".join(f"{k}={v!r}" for k, v in parsed.items())


def _printer(console: Any):
    """Live lines: each tool call (with the model call that made it) and
    each ``harness.decision`` event as the reply stream delivers it."""
    state = {"model": 0}

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "model":
            state["model"] = info["n"]
            return
        if kind == "tool":
            mark = {"success": "[green]✓ ran[/]", "error": "[red]✗ error[/]",
                    "denied": "[bold red]⛔ refused[/]"}.get(info["state"], info["state"])
            call = f"{info['name']}({_short(_args_text(info['args']), 48)})"
            console.print(
                f"  [dim]m{state['model']:>2}[/] {call} {mark} "
                f"[dim]{_short(_strip_fence(info['text']), 70)}[/]",
                no_wrap=True, overflow="ellipsis",
            )
            return
        if kind == "decision":
            action = info.get("action", "")
            style = _ACTION_STYLE.get(action, "white")
            code = f" {info['code']}" if info.get("code") else ""
            console.print(
                f"      [{style}]⚑ {info.get('hook')}: {action}{code}[/] "
                f"[dim]{_short(info.get('detail') or '', 80)}[/]",
                no_wrap=True, overflow="ellipsis",
            )

    return on_event


def _compare(console: Any, scenario: Any, bare: Any, harn: Any) -> None:
    from rich.table import Table

    def executed(o: Any) -> str:
        if not o.executed:
            return "0"
        parts = Counter(o.executed)
        return f"{len(o.executed)} (" + ", ".join(f"{k}×{v}" for k, v in parts.items()) + ")"

    report = harn.report
    refusals = "-"
    if report is not None and report.refusals:
        refusals = f"{sum(report.refusals.values())} (" + ", ".join(
            f"{k}×{v}" for k, v in report.refusals.items()) + ")"

    def effects(o: Any) -> str:
        return "[red]" + _escape("; ".join(o.effects)) + "[/]" if o.effects else "none"

    table = Table(title=f"{scenario.name}: side by side", title_justify="left")
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("bare agent", max_width=52)
    table.add_column("harnessed agent", max_width=52)
    table.add_row("model calls", str(bare.model_calls), str(harn.model_calls))
    table.add_row("tool calls executed", executed(bare), executed(harn))
    table.add_row("refused by the harness", "-", refusals)
    table.add_row("tokens in / out", f"{bare.input_tokens} / {bare.output_tokens}",
                  f"{harn.input_tokens} / {harn.output_tokens}")
    table.add_row("spend (demo prices)", f"${bare.usd:.4f}", f"${harn.usd:.4f}")
    table.add_row("side effects", effects(bare), effects(harn))
    table.add_row("AgentScope end", bare.ended, harn.ended)
    state = "-"
    if report is not None:
        colour = "green" if report.terminal_state.value == "completed" else "yellow"
        state = f"[{colour}]{report.terminal_state.value}[/] ({report.reason})"
    table.add_row("terminal state", "[dim]unknown: no delivery contract[/]", state)
    table.add_section()
    table.add_row("answer", _short(bare.answer, 150), _short(harn.answer, 150))
    console.print(table)


async def _demo(args: argparse.Namespace) -> int:
    from .demo import SCENARIOS, MissingKey, real_model_factory, run_scenario, scripted_factory

    console = _console()
    if args.model:
        try:
            factory = real_model_factory(args.model)
        except MissingKey as exc:
            raise CliError(str(exc)) from exc
        except ValueError as exc:
            raise CliError(str(exc)) from exc
        console.print(f"[bold]Real model[/] ({args.model}): the model decides, so runs vary; "
                      "tool calls and tokens are real and billed.")
    else:
        factory = scripted_factory
        console.print(
            "[bold]agentscope-harness demo[/]: the same AgentScope agent, tools and scripted model, "
            "run once bare and once harnessed.\nOffline: no API key, no network. "
            "[dim]m<n>[/] = the model call that asked for the tool; [bold]⚑[/] = a harness decision.",
        )
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    summary = []
    for name in names:
        scenario = SCENARIOS[name]
        console.rule(f"[bold]{scenario.name}[/]: {scenario.title}")
        console.print(f"customer [bold]u-42[/] (signed in) says: [italic]{_escape(scenario.prompt)}[/]")
        results = {}
        for harnessed in (False, True):
            label = "harnessed agent (HarnessAgentAdapter + HarnessToolAdapter)" if harnessed \
                else "bare agent (AgentScope only)"
            console.print(f"\n[bold {'green' if harnessed else 'white'}]▶ {label}[/]")
            try:
                out = await run_scenario(scenario, harnessed, factory, _printer(console))
            except Exception as exc:
                if not args.model:
                    raise
                # the provider unreachable, a wrong key or base URL: said in a line, not a traceback
                raise CliError(f"the {args.model} model failed: {type(exc).__name__}: {exc}") from exc
            console.print(f"  [dim]answer:[/] {_short(out.answer, 160)}")
            results[harnessed] = out
        console.print()
        _compare(console, scenario, results[False], results[True])
        if scenario.moral and not args.model:  # the moral is about the scripted model
            console.print(f"[bold green]→[/] {scenario.moral}\n")
        summary.append((scenario, results[False], results[True]))
    if len(summary) > 1:
        from rich.table import Table

        table = Table(title="all scenarios", title_justify="left")
        for col in ("scenario", "model calls", "tools executed", "spend", "bare ends",
                    "harnessed ends"):
            table.add_column(col, no_wrap=True)
        for scenario, bare, harn in summary:
            r = harn.report
            table.add_row(
                scenario.name,
                f"{bare.model_calls} → {harn.model_calls}",
                f"{len(bare.executed)} → {len(harn.executed)}",
                f"${bare.usd:.3f} → ${harn.usd:.3f}",
                bare.ended + (" [red](side effect)[/]" if bare.effects else ""),
                f"{r.terminal_state.value} ({r.reason})" if r else "-",
            )
        console.print(table)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the offline demo."""
    import agentscope  # noqa: F401 - configures its logger on import; quieten it after

    if not args.verbose:
        logging.getLogger("as").setLevel(logging.ERROR)  # AgentScope's own warnings
    return asyncio.run(_demo(args))


# ------------------------------------------------------------ diff-policy


def _runs(report: Mapping[str, Any], where: str, depth: int = 0) -> Any:
    """``(run id, its own differences)`` of a report and of the reports of
    the sub-agent runs nested in it (``where`` names a run without an id).
    A report of another shape is named: ``CliError``."""
    differences, children = report.get("candidate_differences") or [], report.get("children") or []
    if not isinstance(differences, list) or not all(isinstance(d, Mapping) for d in differences):
        raise CliError(f"{where}: candidate_differences is not a list of objects")
    if not isinstance(children, list) or depth > _MAX_NESTING:
        raise CliError(f"{where}: children is not a list of reports (or nests past {_MAX_NESTING})")
    yield str(report.get("run_id") or where), differences
    for index, child in enumerate(children):
        if isinstance(child, Mapping):
            yield from _runs(child, f"{where}/{index}", depth + 1)


_MAX_NESTING = 100
"""Sub-agent reports nest this deep at most in a log the CLI reads."""


def diff_summary(lines: Sequence[str]) -> dict[str, Any]:
    """Counts of candidate differences in a log of reports: by point, tool
    and code, and by what the live and candidate policies decided. Each run
    counts once: a sub-agent's report logged on its own and nested in its
    lead's, a parked reply's provisional report and the one its resumption
    gives (the last in the log stands, as it supersedes the earlier)."""
    runs: dict[str, list[Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            report = json.loads(line)
        except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
            raise CliError(f"line {number}: not a JSON report ({getattr(exc, 'msg', exc)})") from exc
        except RecursionError as exc:
            raise CliError(f"line {number}: not a JSON report (nested too deep)") from exc
        if not isinstance(report, dict):
            raise CliError(f"line {number}: not a JSON report object")
        runs.update(_runs(report, f"line {number}"))
    with_diff = sum(bool(diffs) for diffs in runs.values())
    by_key: Counter[tuple[str, str, str]] = Counter()
    by_change: Counter[tuple[str, str]] = Counter()
    for diffs in runs.values():
        for d in diffs:
            by_key[(str(d.get("point")), str(d.get("tool") or "-"), str(d.get("code") or "-"))] += 1
            by_change[(str(d.get("live")), str(d.get("candidate")))] += 1
    return {
        "runs": len(runs), "runs_with_differences": with_diff,
        "differences": sum(by_key.values()),
        "by_point_tool_code": [
            {"point": p, "tool": t, "code": c, "count": n} for (p, t, c), n in by_key.most_common()
        ],
        "by_change": [
            {"live": live, "candidate": cand, "count": n} for (live, cand), n in by_change.most_common()
        ],
    }


def cmd_diff_policy(args: argparse.Namespace) -> int:
    """Summarise candidate-versus-live differences in a log of reports."""
    path = Path(args.file)
    try:
        lines = _text_of(path).splitlines()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    summary = diff_summary(lines)
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_OK
    from rich.table import Table

    console = _console()
    console.print(
        f"{_n(summary['runs'], 'run')}, {summary['runs_with_differences']} with differences, "
        f"{_n(summary['differences'], 'difference')}",
    )
    if not summary["differences"]:
        return EXIT_OK
    table = Table("point", "tool", "code", "count")
    for row in summary["by_point_tool_code"]:
        table.add_row(_escape(row["point"]), _escape(row["tool"]), _escape(row["code"]), str(row["count"]))
    console.print(table)
    changes = Table("live", "candidate", "count")
    for row in summary["by_change"]:
        changes.add_row(_escape(row["live"]), _escape(row["candidate"]), str(row["count"]))
    console.print(changes)
    return EXIT_OK


# -------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``agentscope-harness``."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="agentscope-harness",
        description="A control plane for AgentScope 2.0 agents: demo, hook table, policy check, policy diff.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="offline demo: a shop agent run bare and harnessed")
    demo.add_argument("--scenario", default="stubborn",
                      choices=["stubborn", "dependency-down", "identity-attack", "budget", "all"],
                      help="which story to run (default: stubborn)")
    demo.add_argument("--model", metavar="CLASS",
                      help="use a real AgentScope model instead of the scripted one: openai "
                           "(OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL) or dashscope "
                           "(DASHSCOPE_API_KEY, DASHSCOPE_MODEL)")
    demo.add_argument("--verbose", action="store_true", help="keep AgentScope's own log lines")
    demo.set_defaults(func=cmd_demo)

    hooks = sub.add_parser("hooks", help="the live hook table of a config")
    hooks.add_argument("--config", metavar="FILE", help="policy file (.py, .yaml, .json)")
    hooks.add_argument("--json", action="store_true", help="machine-readable output")
    hooks.add_argument("--no-entry-points", action="store_true",
                       help="ignore hook packs installed through the agentscope_harness.hooks entry point")
    hooks.set_defaults(func=cmd_hooks)

    check = sub.add_parser("check-config", help="validate a policy file, print the effective config")
    check.add_argument("file", metavar="FILE", help="policy file (.py, .yaml, .json)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--no-entry-points", action="store_true",
                       help="ignore hook packs installed through the entry point")
    check.set_defaults(func=cmd_check_config)

    diff = sub.add_parser("diff-policy",
                          help="where a candidate policy decided otherwise, from a log of reports")
    diff.add_argument("file", metavar="REPORTS", help="one RunReport JSON per line")
    diff.add_argument("--json", action="store_true", help="machine-readable output")
    diff.set_defaults(func=cmd_diff_policy)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agentscope-harness`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_INVALID
    try:
        return int(args.func(args) or EXIT_OK)
    except CliError as exc:
        _console(stderr=True).print(f"[bold red]error:[/] {_escape(str(exc))}")
        return EXIT_INVALID
    except HarnessConfigError as exc:
        _console(stderr=True).print(f"[bold red]error:[/] {_escape(str(exc))}")
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
