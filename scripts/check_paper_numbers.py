"""Check the bundled paper numbers (src/anchor/data/paper) against the paper's .tex, by hand.

    PYTHONPATH=src python scripts/check_paper_numbers.py PATH/TO/anchor-paper.tex

For every cell: its printed value occurs on its source_line (a Table 3 subscript as \\dropv{x} or
\\risev{x} with the cell's sign; a percentage followed by \\%) and its std on its std_line. For every
table with cells: every decimal number on a line inside its tabular is a recorded value or std
(nothing left out). For every setting: its text occurs on its line; for every claim with a stated
number: that number occurs on one of its lines; every source's label lies within its lines; the
file's sha256 is the one recorded. Not part of the test suite: the package never reads the paper.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

from anchor.reproduce.published import load_published

NUMBER = re.compile(r"(?<![\w.\-])[+-]?\d+\.\d+(?![\w.])")


def numbers(line: str) -> list[str]:
    return NUMBER.findall(line)


def stands_alone(text: str, line: str) -> bool:
    """``text`` occurs in ``line`` as a whole number (not inside a longer one)."""
    return re.search(r"(?<![\d.,])" + re.escape(text) + r"(?![\d]|[.,]\d)", line) is not None


def main(tex_path: str) -> int:
    raw = Path(tex_path).read_bytes()
    lines = raw.decode("utf-8").splitlines()
    published = load_published()
    folder = resources.files("anchor").joinpath("data").joinpath("paper")
    rows = list(csv.DictReader(io.StringIO(folder.joinpath("published.csv").read_text(encoding="utf-8"))))
    problems: list[str] = []

    sha = hashlib.sha256(raw).hexdigest()
    if sha != published.paper_sha256:
        problems.append(f"sha256 {sha} is not the recorded {published.paper_sha256}")

    found: Counter[tuple[int, str]] = Counter()  # (line, text) of every value/std accounted for
    for row in rows:
        n, text = int(row["source_line"]), row["value"]
        line = lines[n - 1]
        where = f"line {n}: {row['table']} {row['method']} {row['variant']} {row['dataset']} {row['metric']}"
        if row["metric"] == "f1_micro_delta":
            macro = "dropv" if text.startswith("-") else "risev"
            ok = f"\\{macro}{{{text.lstrip('+-')}}}" in line
        elif row["unit"] == "percent" and row["table"] != "tab:llm-calib-performance":
            ok = f"{text}\\%" in line
        else:
            ok = text in numbers(line) or text in line.replace("$", " ").split()
        if not ok:
            problems.append(f"{where}: value {text!r} not found")
        found[(n, text.lstrip("+-") if row["metric"] == "f1_micro_delta" else text)] += 1
        if row["std"]:
            s = int(row["std_line"])
            if row["std"] not in numbers(lines[s - 1]):
                problems.append(f"{where}: std {row['std']!r} not on line {s}")
            found[(s, row["std"])] += 1

    # Completeness: every decimal number inside the tabulars of the tables with cells is recorded.
    tables = {c.table for c in published.cells if c.table.startswith("tab:")}
    checked_lines = 0
    for source in published.sources:
        if source.id not in tables:
            continue
        first, last = source.lines
        inside = False
        for n in range(first, last + 1):
            line = lines[n - 1]
            if "\\begin{tabular}" in line:
                inside = True
                continue
            if "\\end{tabular}" in line:
                inside = False
            if not inside:
                continue
            checked_lines += 1
            for text, count in Counter(numbers(line)).items():
                if found[(n, text.lstrip("+-"))] + found[(n, text)] < count:
                    problems.append(f"line {n}: {text} in {source.id} is not a recorded cell")

    for s in published.settings:
        if not stands_alone(s.text, lines[s.source_line - 1]):
            problems.append(f"setting {s.key}: {s.text!r} not on line {s.source_line}")
    for c in published.claims:
        if c.stated and not any(stands_alone(c.stated, lines[n - 1]) for n in c.source_lines):
            problems.append(f"claim {c.id}: {c.stated!r} not on lines {list(c.source_lines)}")
    for source in published.sources:
        first, last = source.lines
        if not any(f"\\label{{{source.id}}}" in lines[n - 1] for n in range(first, last + 1)):
            problems.append(f"source {source.id}: its label is not within lines {first}-{last}")

    for p in problems:
        print("PROBLEM", p)
    n_std = sum(1 for r in rows if r["std"])
    print(f"{len(rows)} cells ({n_std} with std), {checked_lines} tabular lines scanned, "
          f"{len(published.settings)} settings, {len(published.claims)} claims, "
          f"{len(published.sources)} sources: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: check_paper_numbers.py PATH/TO/anchor-paper.tex", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
