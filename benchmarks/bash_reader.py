"""`python -m benchmarks bash_reader`: commands per second through the shell reader, beside `bash -n`.

The commands: `bash_history.txt` (a developer's shell history, a few hundred lines) and commands
generated around every form the reader must see through (wrappers, groups, keywords, substitutions,
`bash -c`, here-documents), deterministic from a seed. Each command goes through what a Bash call
costs: `read_command` (uncached), `file_uses` and one deny check (`could_run`). The reader's
figures are CPU time of this process (other jobs on the machine do not skew them); `bash -n`'s are
wall clock: one `bash -n -c COMMAND` per command (what checking each call with bash would cost),
and one `bash -n` over all the commands bash accepts (its parser alone, without process starts).

`bash_reader_understood_fraction_corpus` is the share of the history an allow rule can match at
all (the rest fails closed: loops, substitutions, here-documents, …); `bash_reader_agreement_corpus`
the share where the reader and `bash -n` agree on whether the command parses.
"""

from __future__ import annotations

import random
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import Figure, ratio
from lamina.shell import could_run, file_uses, read_command

_CORPUS = Path(__file__).with_name("bash_history.txt")
_PROGRAMS = ("git status", "rm -rf build", "python -m pytest -q", "npm test", "ls -la", "cat README.md")
_SIMPLE_FORMS = (
    "command {}",
    "env A=1 {}",
    "sudo {}",
    "nohup {} &",
    "time {}",
    "nice -n 5 {}",
    "timeout 30 {}",
    "echo x | xargs {}",
    "find . -maxdepth 1 -exec {} \\;",
)
_FORMS = (
    "{{ {}; }}",
    "({})",
    "if true; then {}; fi",
    "for f in a b; do {}; done",
    "f() {{ {}; }}; f",
    "echo $({})",
    "x=$({})",
    "true && {}",
    "{} 2>/dev/null | head -n 5",
    "{} > out.log 2>&1",
)
_QUOTED_FORMS = ("bash -c {}", "sh -c {}", "eval {}", "bash <<< {}")


def corpus() -> list[str]:
    """The history's commands: one a line, a line starting with two spaces continuing the one above."""
    commands: list[str] = []
    for line in _CORPUS.read_text(encoding="utf-8").splitlines():
        if line.startswith("  ") and commands:
            commands[-1] += "\n" + line[2:]
        elif line.strip() and not line.startswith("#"):
            commands.append(line)
    return commands


def generated(count: int, *, seed: int = 42) -> list[str]:
    """`count` commands, each a program behind up to three forms."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(count):
        command = rng.choice(_PROGRAMS)
        if rng.random() < 0.5:
            command = rng.choice(_SIMPLE_FORMS).format(command)
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.3:
                command = rng.choice(_QUOTED_FORMS).format(shlex.quote(command))
            else:
                command = rng.choice(_FORMS).format(command)
        out.append(command)
    return out


def _through_reader(commands: list[str], rounds: int) -> float:
    """Commands per second of CPU time: read (uncached), files, one deny check."""
    started = time.process_time()
    for _ in range(rounds):
        read_command.cache_clear()
        for command in commands:
            reading = read_command(command)
            file_uses(reading)
            could_run(reading, ("rm",))
    return rounds * len(commands) / max(time.process_time() - started, 1e-9)


def _bash_accepts(bash: str, command: str) -> bool:
    done = subprocess.run([bash, "-n", "-c", command], capture_output=True, check=False, stdin=subprocess.DEVNULL)
    return done.returncode == 0


def _bash_per_command(bash: str, commands: list[str]) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    accepted = [_bash_accepts(bash, command) for command in commands]
    return len(commands) / (time.perf_counter() - started), accepted


def _bash_batch(bash: str, commands: list[str], rounds: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "all.sh"
        script.write_text("\n".join(commands) + "\n", encoding="utf-8")
        started = time.perf_counter()
        for _ in range(rounds):
            subprocess.run([bash, "-n", str(script)], capture_output=True, check=True, stdin=subprocess.DEVNULL)
        return rounds * len(commands) / (time.perf_counter() - started)


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    """The figures: the reader's speed on the history and on generated commands, `bash -n`'s beside it."""
    history = corpus()
    made = generated(300 if quick else 2_000)
    rounds = 2 if quick else 10
    progress(f"the reader over {len(history)} history and {len(made)} generated commands, {rounds} rounds")
    both = history + made
    reader = _through_reader(both, rounds)
    reader_history = _through_reader(history, rounds)
    reader_made = _through_reader(made, rounds)
    readings = [read_command(command) for command in history]
    figures = [
        Figure("bash_reader_commands_per_s", reader, "commands/s", note="CPU time; read, files, one deny check"),
        Figure("bash_reader_corpus_commands_per_s", reader_history, "commands/s"),
        Figure("bash_reader_generated_commands_per_s", reader_made, "commands/s"),
        Figure(
            "bash_reader_understood_fraction_corpus",
            sum(reading.understood for reading in readings) / len(readings),
            "fraction",
            note="an allow rule can match only these",
        ),
    ]
    bash = shutil.which("bash")
    if bash is None:
        progress("bash is not installed: no bash -n figures")
        return figures
    sample = both if not quick else history + made[:100]
    progress(f"bash -n once per command over {len(sample)} commands")
    per_command, accepted = _bash_per_command(bash, sample)
    batch = _bash_batch(bash, [c for c, ok in zip(sample, accepted, strict=True) if ok], rounds)
    agree = sum(
        (not reading.parse_error) == ok for reading, ok in zip(readings, accepted[: len(history)], strict=True)
    ) / len(history)
    figures[0] = Figure(
        figures[0].name, reader, figures[0].unit, ratio(reader, per_command, "bash_n_commands_per_s"), figures[0].note
    )
    figures += [
        Figure("bash_n_commands_per_s", per_command, "commands/s", note="wall clock; one bash -n -c per command"),
        Figure(
            "bash_n_batch_commands_per_s",
            batch,
            "commands/s",
            ratio(batch, reader, "bash_reader_commands_per_s"),
            note="wall clock; one bash -n over every command it accepts",
        ),
        Figure("bash_reader_agreement_corpus", agree, "fraction", note="reader and bash -n agree it parses"),
    ]
    return figures
