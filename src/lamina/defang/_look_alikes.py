"""Look-alike characters and how they read as ASCII, generated from Unicode's own data (pure).

`look_alikes.txt` beside this module is the compact table `lamina.defang._readings` reads. It is generated
by `generate` from `confusables.txt` of Unicode Technical Standard #39 (Unicode Security
Mechanisms), the version recorded in the file's header, and regenerated with

    python -m lamina.defang._look_alikes path/to/confusables.txt > src/lamina/defang/look_alikes.txt

How a character reads (first rule that gives a printable ASCII reading):

1. Its UTS #39 prototype is the prototype of ASCII characters: the reading is that character
   (`а` reads `a`, `＜` reads `<`). The ASCII characters `l`, `I`, `1` and `|` share the prototype
   `l`, so a look-alike of any of them reads `l`, and `lamina.defang._readings` takes such an `l` for any of
   them; `m`'s prototype is `rn`, so a look-alike of `rn` reads `m`.
2. Its prototype, decomposed (NFKD) and without combining marks, is printable ASCII: that text.
3. Its name (from `confusables.txt`, else Python's Unicode database) says what it is: a Latin
   letter in any form (`LATIN LETTER SMALL CAPITAL B` reads `b`), a left or right angle bracket
   (`<`, `>`), a left or right square bracket (`[`, `]`), a vertical bar or line (`|`); or its
   general category is dash punctuation (`-`). The same for its prototype, when that is one
   character (`в`'s prototype is `ʙ`, a small capital B, so `в` reads `b`).

Characters whose decomposition (NFKD, without combining marks) is printable ASCII are left out:
they read as that decomposition (`ſ` reads `s`, though its prototype is `f`). `lamina.defang._readings` looks
a character up in this table first, and decomposes only characters the table does not hold.
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("look_alikes.txt")

_LATIN_LETTER_RE = re.compile(
    r"LATIN (?:CAPITAL |SMALL )?(?:LETTER )?(?:SMALL CAPITAL |CAPITAL |SMALL )?(?:LETTER )?([A-Z])(?: WITH .+)?"
)
_SIDE_RE = re.compile(r"\b(LEFT|RIGHT)\b")
_BRACKETS = {
    ("ANGLE BRACKET", "LEFT"): "<",
    ("ANGLE BRACKET", "RIGHT"): ">",
    ("ANGLE QUOTATION MARK", "LEFT"): "<",
    ("ANGLE QUOTATION MARK", "RIGHT"): ">",
    ("SQUARE BRACKET", "LEFT"): "[",
    ("SQUARE BRACKET", "RIGHT"): "]",
}
_BAR_RE = re.compile(r"\bVERTICAL (?:BAR|LINE)\b")


@dataclass(frozen=True, slots=True)
class Source:
    """What a `confusables.txt` says: its version line, date line, hash, prototypes and names."""

    version: str
    date: str
    sha256: str
    prototypes: dict[str, str]
    names: dict[str, str]


def parse_confusables(text: str) -> Source:
    """The prototypes (source character to prototype string) and names of a `confusables.txt`."""
    version = date = ""
    prototypes: dict[str, str] = {}
    names: dict[str, str] = {}
    for line in text.lstrip("\ufeff").splitlines():
        if line.startswith("# Version:"):
            version = line.removeprefix("# Version:").strip()
        elif line.startswith("# Date:"):
            date = line.removeprefix("# Date:").strip()
        data, _, comment = line.partition("#")
        if not data.strip():
            continue
        fields = [f.strip() for f in data.split(";")]
        source = "".join(chr(int(h, 16)) for h in fields[0].split())
        target = "".join(chr(int(h, 16)) for h in fields[1].split())
        if len(source) != 1:
            continue
        prototypes[source] = target
        # The comment reads `( s → t ) SOURCE NAME → TARGET NAME`.
        described = comment.partition(")")[2].split("#")[0].split("→")
        if len(described) == 2:
            names[source] = described[0].strip()
            if len(target) == 1:
                names[target] = described[1].strip()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Source(version=version, date=date, sha256=digest, prototypes=prototypes, names=names)


def _plain(text: str) -> str:
    """`text` decomposed (NFKD) with combining marks dropped."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) not in ("Mn", "Me"))


def _printable_ascii(text: str) -> bool:
    return bool(text) and all(" " <= c <= "~" for c in text)


def _by_name(ch: str, name: str) -> str | None:
    """The reading of `ch` that its name or general category gives, or None."""
    category = unicodedata.category(ch)
    if category[0] == "L" and (match := _LATIN_LETTER_RE.fullmatch(name)):
        return match.group(1).lower()
    if category[0] in "PS":
        side = _SIDE_RE.search(name)
        for (kind, direction), reading in _BRACKETS.items():
            if side and side.group(1) == direction and kind in name:
                return reading
        if _BAR_RE.search(name) and not re.search(r"\b(?:DOUBLE|TRIPLE|WITH|BROKEN)\b", name):
            return "|"
    if category == "Pd":
        return "-"
    return None


def readings(source: Source) -> Iterator[tuple[str, str]]:
    """Each character with an ASCII reading and that reading, in code point order (the rules above)."""
    ascii_for: dict[str, set[str]] = {}
    for code in range(0x20, 0x7F):
        a = chr(code)
        ascii_for.setdefault(source.prototypes.get(a, a), set()).add(a)

    def name_of(ch: str) -> str:
        return source.names.get(ch) or str(unicodedata.name(ch, ""))

    def reading_of(ch: str) -> str | None:
        prototype = source.prototypes.get(ch, ch)
        if prototype in ascii_for:
            same = ascii_for[prototype]
            if "l" in same:
                return "l"
            letters = sorted(a.lower() for a in same if a.isalpha())
            return letters[0] if letters else min(same)
        if ch in source.prototypes and _printable_ascii(plain := _plain(prototype)):
            return plain
        found = _by_name(ch, name_of(ch))
        if found is None and len(prototype) == 1 and prototype != ch:
            found = _by_name(prototype, name_of(prototype))
        return found

    candidates = set(source.prototypes) | set(source.names)
    candidates.update(chr(c) for c in range(0x80, 0x110000) if unicodedata.name(chr(c), ""))
    for ch in sorted(candidates):
        if ch.isascii():
            continue
        if _printable_ascii(_plain(ch)):
            continue  # its decomposition reads as ASCII already
        reading = reading_of(ch)
        if reading is not None:
            yield ch, reading


def generate(confusables_text: str) -> str:
    """The `look_alikes.txt` table for the `confusables.txt` text given."""
    source = parse_confusables(confusables_text)
    lines = [
        "# Look-alike characters and their ASCII reading, for lamina.defang. Generated, do not edit:",
        "#     python -m lamina.defang._look_alikes confusables.txt > look_alikes.txt",
        "# (rules in lamina/defang/_look_alikes.py) from Unicode's confusables.txt, UTS #39:",
        f"# Version: {source.version}",
        f"# Date: {source.date}",
        f"# sha256 of confusables.txt: {source.sha256}",
        f"# Character names and categories: confusables.txt, then Unicode {unicodedata.unidata_version}.",
        "# Format: code point of the character; code points of its reading.",
    ]
    for ch, reading in readings(source):
        lines.append(f"{ord(ch):04X};{' '.join(f'{ord(c):04X}' for c in reading)}")
    return "\n".join(lines) + "\n"


def load(path: Path = TABLE_PATH) -> tuple[dict[str, str], str]:
    """The table shipped with Lamina: each character's reading, and the Unicode version it is from."""
    table: dict[str, str] = {}
    version = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# Version:"):
            version = line.removeprefix("# Version:").strip()
        if not line or line.startswith("#"):
            continue
        code, _, reading = line.partition(";")
        table[chr(int(code, 16))] = "".join(chr(int(h, 16)) for h in reading.split())
    return table, version


def main(argv: list[str]) -> int:
    """`python -m lamina.defang._look_alikes confusables.txt`: print the generated table."""
    if len(argv) != 1:
        print("usage: python -m lamina.defang._look_alikes confusables.txt", file=sys.stderr)
        return 2
    sys.stdout.write(generate(Path(argv[0]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
