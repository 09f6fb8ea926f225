"""Lamina's benchmarks: `python -m benchmarks NAME [--quick] [--json]`.

Each benchmark is a module `benchmarks/<name>.py` with a function
`run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]`. Figures print as a table,
or with `--json` as one JSON object `{"benchmark": NAME, "quick": bool, "figures": [...]}` where each
figure has `name`, `value`, `unit` and, when a peer ran side by side, `ratio_vs`:
`{"figure": <peer figure name>, "ratio": <this value / peer value>}`, and when it is one of a set given
per scenario and target, `scenario` and `target` (the name then ends `_<scenario>_<target>`).
Figure names are a contract: later checks read them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RatioVs:
    """This figure divided by a peer's figure measured in the same run."""

    figure: str
    ratio: float


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured number."""

    name: str
    value: float
    unit: str
    ratio_vs: RatioVs | None = None
    note: str = ""
    scenario: str = ""
    """For a figure given per scenario and target: the scenario (its name ends `_<scenario>_<target>`)."""
    target: str = ""
    """For a figure given per scenario and target: the wire format (`anthropic`, `responses`)."""

    @property
    def base(self) -> str:
        """The name without its `_<scenario>_<target>` ending (the name itself when it has none)."""
        suffix = f"_{self.scenario}_{self.target}"
        return self.name.removesuffix(suffix) if self.scenario and self.target else self.name


def ratio(ours: float, peer: float, peer_name: str) -> RatioVs:
    """`ours / peer`, guarded against a zero peer value."""
    return RatioVs(figure=peer_name, ratio=ours / peer if peer else float("inf"))
