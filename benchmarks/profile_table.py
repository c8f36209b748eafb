"""Where a py-spy profile's samples went: a table from ``py-spy record --format raw`` (collapsed stacks).

    python benchmarks/profile_table.py PROFILE.raw [--top 40]

Per process (with ``--subprocesses`` the first frame names it), then per function: the share of that
process's samples in which the function was on the stack (inclusive) and at its top (self). Frames are
shown as ``function (file)`` with the line number dropped, so a function's lines count together.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def _frame(text: str) -> str:
    return _LINE.sub(")", text.strip()).replace("/work/main/.venv/lib/python3.11/site-packages/", "")


def table(path: Path, top: int = 40) -> str:
    per_process: dict[str, tuple[Counter[str], Counter[str], list[int]]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        process = "process"
        if frames[0].startswith("process "):
            # The process's frame holds its command line, which may itself hold ';' (python -c "a; b").
            end = next((i for i, f in enumerate(frames) if f.endswith('"')), 0)
            process, frames = ";".join(frames[:end + 1]), frames[end + 1:]
        frames = [_frame(f) for f in frames]
        inclusive, own, total = per_process.setdefault(process, (Counter(), Counter(), [0]))
        n = int(count)
        total[0] += n
        for f in set(frames):
            inclusive[f] += n
        if frames:
            own[frames[-1]] += n
    out = []
    for process, (inclusive, own, total) in sorted(per_process.items(), key=lambda kv: -kv[1][2][0]):
        out.append(f"{process[:150]}: {total[0]} samples")
        out.append(f"{'incl %':>7} {'self %':>7}  function")
        for f, n in inclusive.most_common(top):
            out.append(f"{100 * n / total[0]:7.1f} {100 * own[f] / total[0]:7.1f}  {f[:160]}")
        out.append("  top of the stack:")
        for f, n in own.most_common(top // 2):
            out.append(f"  {100 * n / total[0]:7.1f}  {f[:160]}")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    print(table(args.profile, args.top))


if __name__ == "__main__":
    main()
