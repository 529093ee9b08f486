"""What grew between two tracemalloc snapshots of one service process (MEMORY_SNAPSHOTS,
gateway/memory_snapshots.py), largest first:

    python -m bench.soak.snapshots OLD.tracemalloc NEW.tracemalloc [--by traceback|lineno|filename]
                                   [--top 15] [--frames 6]

Each line: the growth in KiB and in blocks, then where the memory was allocated (by traceback:
its `--frames` innermost frames, the innermost last). Memory that grew between two snapshots late in a run and again
between the next two is what keeps growing; one that grew once and stays is a cache filling."""
from __future__ import annotations

import argparse
import tracemalloc

IGNORED = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>", "<unknown>",
           tracemalloc.__file__)


def growth(old_path: str, new_path: str, by: str, top: int, frames: int = 6) -> list[str]:
    filters = [tracemalloc.Filter(False, pattern) for pattern in IGNORED]
    old = tracemalloc.Snapshot.load(old_path).filter_traces(filters)
    new = tracemalloc.Snapshot.load(new_path).filter_traces(filters)
    total = (sum(stat.size for stat in new.statistics("filename"))
             - sum(stat.size for stat in old.statistics("filename")))
    lines = [f"traced memory {total / 1024:+,.0f} KiB from {old_path} to {new_path}"]
    for stat in new.compare_to(old, by)[:top]:
        lines.append(f"{stat.size_diff / 1024:+10,.1f} KiB {stat.count_diff:+8,d} blocks "
                     f"(now {stat.size / 1024:,.0f} KiB in {stat.count:,d})")
        where = stat.traceback.format(limit=frames) if by == "traceback" else [f"  {stat.traceback[0]}"]
        lines += ["    " + line for line in where]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--by", choices=("traceback", "lineno", "filename"), default="traceback")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--frames", type=int, default=6)
    args = parser.parse_args()
    print("\n".join(growth(args.old, args.new, args.by, args.top, args.frames)))


if __name__ == "__main__":
    main()
