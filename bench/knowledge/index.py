"""What the speed run and each side of its `--base` comparison (side.py, another checkout's
process) build alike: the index's configuration and collection, the passages' windows, the modes
searched, and the percentile their timings report."""
from __future__ import annotations

import uuid
from pathlib import Path

from gateway.config import Config
from gateway.vectors import VectorIndex

from . import data

MODES = ("lexical", "dense", "hybrid")
NAMESPACE = uuid.UUID("6f0b8f44-5c1e-4c55-9f43-4a1c6c3f1a18")
K = 10
KEYWORD_FIELDS = ("user_id", "kb_id", "document_id")  # the knowledge plugin's


def rank_percentile(values: list[float], q: float) -> float:
    """The knowledge bench's own rank (not bench.support's): kept so that its tables stay
    comparable with the figures already in bench/README.md."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered))) - 1))]


def index_config(directory: Path) -> Config:
    return Config.load(
        overrides={"core.data_dir": str(directory), "vectors.path": str(directory / "vectors")},
        generate_secrets=False,
    )


async def drop_collection(index: VectorIndex, collection: str) -> None:
    drop = getattr(index.engine, "drop", None)
    if drop is not None:
        await drop(index.physical_name(collection))


def passage_windows(evalset: data.EvalSet, size: int, stride: int) -> list[tuple[int, str]]:
    """Overlapping windows of each passage (words for English, characters for Chinese), with
    the index of the passage each came from."""
    out = []
    for number, passage in enumerate(evalset.passages):
        if evalset.language == "en":
            words = passage.split()
            for start in range(0, max(1, len(words) - size + stride), stride):
                out.append((number, " ".join(words[start:start + size])))
        else:
            for start in range(0, max(1, len(passage) - size + stride), stride):
                out.append((number, passage[start:start + size]))
    return out
