"""Embeddings of passages kept on disk, keyed by model id and the text's hash: the 4-bit
multilingual-e5-small takes about half a second per 300-token passage on one core of the
development machine, so embedding both corpora costs tens of minutes once and nothing after."""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache"


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


class EmbeddingCache:
    """Vectors of one model; new ones are written in shards as they come, so an interrupted run
    keeps what it computed."""

    def __init__(self, model_id: str, kind: str = "passage", root: Path | None = None) -> None:
        """`kind` is "passage" or "query": e5 embeds the same text differently as either."""
        self.model_id = model_id
        self.directory = (
            (root or Path(os.environ.get("BENCH_CACHE_DIR", DEFAULT_DIR)))
            / re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)
            / kind
        )
        self.vectors: dict[str, np.ndarray] = {}
        self.seconds_per_passage: list[float] = []
        if self.directory.is_dir():
            for shard in sorted(self.directory.glob("*.npz")):
                data = np.load(shard)
                for key, vector in zip(data["keys"], data["vectors"]):
                    self.vectors[str(key)] = vector

    def missing(self, texts: Sequence[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for text in texts:
            key = text_key(text)
            if key not in self.vectors and key not in seen:
                seen.add(key)
                out.append(text)
        return out

    def embed(
        self,
        texts: Sequence[str],
        compute: Callable[[list[str]], np.ndarray],
        batch: int = 16,
        progress: str = "",
    ) -> np.ndarray:
        """The vectors of `texts` in order, computing (and storing) the ones not cached."""
        todo = self.missing(texts)
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            began = time.perf_counter()
            vectors = np.asarray(compute(chunk), dtype=np.float32)
            self.seconds_per_passage.append((time.perf_counter() - began) / len(chunk))
            self._store(chunk, vectors)
            if progress:
                print(f"  {progress}: embedded {min(start + batch, len(todo))}/{len(todo)}", flush=True)
        return (
            np.stack([self.vectors[text_key(text)] for text in texts])
            if texts
            else np.zeros((0, 0), np.float32)
        )

    def _store(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        keys = [text_key(text) for text in texts]
        for key, vector in zip(keys, vectors):
            self.vectors[key] = vector
        self.directory.mkdir(parents=True, exist_ok=True)
        shard = self.directory / f"{time.time_ns()}-{uuid.uuid4().hex[:6]}.npz"
        tmp = shard.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=vectors)
        tmp.rename(shard)
