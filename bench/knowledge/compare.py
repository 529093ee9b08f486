"""`python -m bench.knowledge --only speed --base REV`: the speed part on revision REV and on this
checkout side by side (issue 44: nothing a person uses may get slower after its first use).

Each side is its own process (bench/knowledge/side.py with that checkout first on the path;
REV in a temporary `git worktree`) holding the same 20,000 chunks (+ a quarter as many of other
bases) in its own embedded index. After each side's first use, the rounds alternate between the
sides, the first side swapped each round, so the drift of a shared machine falls on both alike.
Passage vectors come from the embedding cache when it holds them, else from each text's hash
(the same on both sides; search latency does not depend on meaning)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.support import checkout

from . import data
from .index import MODES, rank_percentile

ROOT = Path(__file__).resolve().parents[2]


class Side:
    """A side.py process of one checkout, asked one JSON line at a time."""

    def __init__(self, name: str, root: Path, chunks: int, log_dir: Path) -> None:
        self.name = name
        self.log = open(log_dir / f"{name}.log", "w")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("side.py")), str(root), str(data.eval_dir()), str(chunks)],
            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "PYTHONPATH": str(root)})

    def answer(self) -> dict:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.log.flush()
            raise SystemExit(f"{self.name} side exited:\n{Path(self.log.name).read_text()[-3000:]}")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return self.answer()

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.write("quit\n")  # type: ignore[union-attr]
                self.process.stdin.flush()  # type: ignore[union-attr]
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def load_average() -> str:
    return " / ".join(f"{value:.1f}" for value in os.getloadavg())


def row(title: str, before: list[float], now: list[float]) -> str:
    b50, n50, b90, n90 = (rank_percentile(before, 50), rank_percentile(now, 50), rank_percentile(before, 90),
                          rank_percentile(now, 90))
    return (f"| {title} | {b50:.2f} ({min(before):.2f}–{max(before):.2f}) | {n50:.2f} ({min(now):.2f}–"
            f"{max(now):.2f}) | {n50 / b50:.2f} | {b90:.2f} | {n90:.2f} | {n90 / b90:.2f} |")


def compare(base: str, chunks: int, searches: int, rounds: int) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="bench-knowledge-compare-"))
    sides: dict[str, Side] = {}
    try:
        with checkout(base) as base_root:
            began = time.perf_counter()
            sides = {"before": Side("before", base_root, chunks, log_dir), "now": Side("now", ROOT, chunks, log_dir)}
            for side in sides.values():
                print(f"  {side.name}: {side.answer()}", flush=True)
            print(f"  both sides indexed and used once in {time.perf_counter() - began:.0f} s; load "
                  f"{load_average()}", flush=True)
            timings: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
            order = list(sides)
            for number in range(rounds):
                for name in order if number % 2 == 0 else order[::-1]:
                    answers = {**sides[name].ask(f"search {max(1, searches // rounds)}"),
                               **{f"embed {key}": value for key, value in sides[name].ask("embed").items()}}
                    for key, values in answers.items():
                        timings[name].setdefault(key, []).extend(values)
                print(f"  round {number + 1}: " + "; ".join(
                    f"{name} hybrid p50 {rank_percentile(timings[name]['hybrid'], 50):.2f} ms" for name in order),
                    flush=True)
        print(f"\n{chunks:,} chunks in the searched base, {searches} searches per mode a side in {rounds} "
              f"alternating rounds after one warm-up use; before = {base}, now = this checkout; load "
              f"{load_average()}\n")
        print("| ms | before p50 (range) | now p50 (range) | now / before | before p90 | now p90 | now / before p90 |")
        print("|---|---|---|---|---|---|---|")
        for mode in MODES:
            print(row(f"search, {mode}", timings["before"][mode], timings["now"][mode]))
        for key in timings["before"]:
            if key.startswith("embed "):
                print(row(f"query embedding, {key[6:]}", timings["before"][key], timings["now"][key]))
    finally:
        for side in sides.values():
            side.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
