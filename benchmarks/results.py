"""One benchmark figure's result, the printed table, and `bench-results.json`."""
from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

# What `target` bounds: the ratio value/floor, the value itself, or the value's excess over the floor.
TargetOn = Literal["ratio", "value", "excess"]


@dataclass(frozen=True)
class Result:
    figure: str
    unit: str
    value: float
    floor: float | None = None
    ratio: float | None = None
    target: float | None = None
    target_on: TargetOn | None = None
    met: bool | None = None
    note: str = ""

    @classmethod
    def against_floor(cls, figure: str, unit: str, value: float, floor: float, *, target: float | None,
                      target_on: TargetOn = "ratio", note: str = "") -> Result:
        ratio = value / floor if floor > 0 else None
        checked = {"ratio": ratio, "value": value, "excess": value - floor}[target_on]
        met = None if target is None or checked is None else checked <= target
        return cls(figure, unit, value, floor, ratio, target, target_on if target is not None else None, met, note)

    @classmethod
    def alone(cls, figure: str, unit: str, value: float, *, target: float | None = None, note: str = "") -> Result:
        met = None if target is None else value <= target
        return cls(figure, unit, value, None, None, target, "value" if target is not None else None, met, note)

    def json_entry(self) -> dict[str, object]:
        entry = asdict(self)
        if not entry["note"]:
            del entry["note"]
        return entry


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


def describe_samples(samples: Sequence[float]) -> str:
    if len(samples) == 1:
        return "1 run"
    return f"median of {len(samples)}: " + ", ".join(f"{s:.2f}" for s in samples)


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _target(result: Result) -> str:
    if result.target is None:
        return "-"
    if result.target_on == "ratio":
        return f"ratio <= {result.target:g}"
    if result.target_on == "excess":
        return f"<= floor + {result.target:g}"
    return f"<= {result.target:g}"


def table(results: Sequence[Result]) -> str:
    rows = [("figure", "unit", "value", "floor", "ratio", "target", "met?")]
    for r in results:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        digits = 3 if r.unit.startswith("req/s") else 2
        rows.append((r.figure, r.unit, _number(r.value, digits), _number(r.floor, digits), _number(r.ratio),
                     _target(r), met))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    notes = [f"  {r.figure}: {r.note}" for r in results if r.note]
    return "\n".join(lines + (["", "notes:", *notes] if notes else []))


def write_json(results: Sequence[Result], path: Path) -> None:
    path.write_text(json.dumps([r.json_entry() for r in results], indent=2) + "\n")
