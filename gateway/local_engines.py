"""The engine a service opens itself (not through a shared parent): a Qdrant server when
`QDRANT_URL` is set, else the embedded engine in the service's own directory."""
from __future__ import annotations

from pathlib import Path

from .config import Config
from .edge_engine import EdgeEngine
from .qdrant_engine import QdrantClientEngine
from .vector_store import Engine


def vectors_directory(config: Config, service_id: str) -> Path:
    """`[vectors] path`, else `DATA_DIR/vectors/<service id>`: one directory per service."""
    configured = str(config.get("vectors.path") or "")
    return Path(configured).expanduser().resolve() if configured else config.data_dir / "vectors" / service_id




def create_local_engine(config: Config, service_id: str) -> Engine:
    settings = config.section("vectors")
    url = str(settings.get("qdrant_url") or "")
    if url:
        return QdrantClientEngine(url=url, api_key=str(settings.get("qdrant_api_key") or ""),
                                  timeout=float(settings.get("timeout") or 10))
    engine = str(settings.get("engine") or "edge")
    directory = vectors_directory(config, service_id)
    if engine == "edge":
        return EdgeEngine(directory)
    if engine == "qdrant-local":
        return QdrantClientEngine(path=directory)
    raise ValueError(f"[vectors] engine: {engine!r} is not one of edge, qdrant-local")

