"""Figures, printed as a ratio with the goal beside it, and the markdown table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    """One measured figure: harnessed vs bare in the same run."""

    bench: str
    name: str
    harnessed: float | None
    bare: float | None
    unit: str = ""
    goal: str = ""
    met: bool | None = None
    note: str = ""
    ratio: float | None = None
    show_ratio: bool = True
    """False for counts whose goal is absolute (0 breaks, 0 retries)."""

    def __post_init__(self) -> None:
        if self.show_ratio and self.ratio is None and self.harnessed is not None and self.bare:
            self.ratio = self.harnessed / self.bare


@dataclass
class Section:
    """What one benchmark produced: its figures, an optional extra table
    (rows of cells) and free-form details for the console."""

    title: str
    figures: list[Figure] = field(default_factory=list)
    table_head: list[str] = field(default_factory=list)
    table: list[list[str]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "us":
        return f"{value:,.0f} µs" if value >= 100 else f"{value:.1f} µs"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}{(' ' + unit) if unit else ''}"
    return f"{int(value):,}{(' ' + unit) if unit else ''}"


def verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "MISSED")


def console_line(f: Figure) -> str:
    ratio = f"{f.ratio:.3f}x" if f.ratio is not None else ""
    both = f"harnessed {fmt(f.harnessed, f.unit)}"
    if f.bare is not None:
        both += f" / bare {fmt(f.bare, f.unit)}"
    if ratio:
        both += f" = {ratio}"
    goal = f"   goal {f.goal}   {verdict(f.met)}" if f.goal else ""
    tail = f"\n      {f.note}" if f.note else ""
    return f"  {f.bench:<12} {f.name:<52} {both}{goal}{tail}"


def markdown(sections: list[Section], header: str, footer: str = "") -> str:
    out = [header, "", "| benchmark | figure | harnessed | bare | ratio | goal | met | note |",
           "|---|---|---|---|---|---|---|---|"]
    for s in sections:
        for f in s.figures:
            ratio = f"{f.ratio:.3f}x" if f.ratio is not None else "-"
            out.append(
                f"| {f.bench} | {f.name} | {fmt(f.harnessed, f.unit)} | {fmt(f.bare, f.unit)} "
                f"| {ratio} | {f.goal or '-'} | {verdict(f.met)} | {f.note} |",
            )
    for s in sections:
        if s.table:
            out += ["", f"### {s.title}", "",
                    "| " + " | ".join(s.table_head) + " |",
                    "|" + "---|" * len(s.table_head)]
            out += ["| " + " | ".join(row) + " |" for row in s.table]
    if footer:
        out += ["", footer.strip()]
    return "\n".join(out) + "\n"
