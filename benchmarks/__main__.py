"""Run one benchmark, or all of them: `python -m benchmarks NAME|all [--quick] [--json] [OPTIONS]` (see `--help`)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks import Figure


def _available() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def _progress(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


def _run_one(name: str, *, quick: bool, options: Mapping[str, bool] | None = None) -> list[Figure]:
    module = importlib.import_module(f"benchmarks.{name}")
    accepted = inspect.signature(module.run).parameters  # an option goes to the benchmarks that take it
    chosen = {key: value for key, value in (options or {}).items() if key in accepted}
    figures: list[Figure] = module.run(quick=quick, progress=_progress, **chosen)
    return figures


def _as_json(name: str, quick: bool, figures: list[Figure]) -> dict[str, object]:
    out: list[dict[str, object]] = []
    for f in figures:
        item: dict[str, object] = {"name": f.name, "value": f.value, "unit": f.unit}
        if f.ratio_vs is not None:
            item["ratio_vs"] = {"figure": f.ratio_vs.figure, "ratio": f.ratio_vs.ratio}
        if f.note:
            item["note"] = f.note
        if f.scenario:
            item["scenario"], item["target"] = f.scenario, f.target
        out.append(item)
    return {"benchmark": name, "quick": quick, "figures": out}


def _print_table(name: str, figures: list[Figure], seconds: float) -> None:
    print(f"\n{name} ({seconds:.1f} s)")
    width = max((len(f.name) for f in figures), default=10)
    for f in figures:
        line = f"  {f.name:<{width}}  {f.value:>14,.3f} {f.unit}"
        if f.ratio_vs is not None:
            line += f"   ({f.ratio_vs.ratio:.3g}x {f.ratio_vs.figure})"
        if f.note:
            line += f"   {f.note}"
        print(line)
    _print_matrix([f for f in figures if f.scenario])


def _print_matrix(figures: list[Figure]) -> None:
    """Figures given per scenario and target, again as one table per scenario: a row a figure, a column a target."""
    for scenario in dict.fromkeys(f.scenario for f in figures):
        mine = [f for f in figures if f.scenario == scenario]
        targets = list(dict.fromkeys(f.target for f in mine))
        cells = {(f.base, f.target): f.value for f in mine}
        places: dict[str, int] = {}
        for t in targets:
            for place, f in enumerate(x for x in mine if x.target == t):
                places[f.base] = min(place, places.get(f.base, place))
        rows = sorted(places, key=places.__getitem__)
        width = max(len(r) for r in rows)
        print(f"\n  {scenario + ':':<{width}}" + "".join(f"{t:>16}" for t in targets))
        for row in rows:
            values = (cells.get((row, t)) for t in targets)
            print(f"  {row:<{width}}" + "".join(f"{_cell(v):>16}" for v in values))


def _cell(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def main(argv: list[str] | None = None) -> int:
    names = _available()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("name", choices=[*names, "all"])
    parser.add_argument("--quick", action="store_true", help="small sizes; finishes in under a minute")
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument(
        "--deferred-tools",
        action="store_true",
        help="cache: add the seven-MCP-server scenario, schemas whole and deferred",
    )
    parser.add_argument(
        "--context-editing",
        action="store_true",
        help="cache: the Anthropic scenarios with context editing server and priced, against off",
    )
    parser.add_argument(
        "--server-compaction",
        action="store_true",
        help="cache: the session compacted by the provider's compaction and by Lamina's summariser; "
        "compaction: fidelity on both backends",
    )
    args = parser.parse_args(argv)
    options = {
        "deferred_tools": args.deferred_tools,
        "context_editing": args.context_editing,
        "server_compaction": args.server_compaction,
    }
    selected = names if args.name == "all" else [args.name]
    results = []
    for name in selected:
        started = time.perf_counter()
        figures = _run_one(name, quick=args.quick, options=options)
        elapsed = time.perf_counter() - started
        if args.json:
            results.append(_as_json(name, args.quick, figures))
        else:
            _print_table(name, figures, elapsed)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
