"""The engine a service opens itself (not through a shared parent): a Qdrant server when
`QDRANT_URL` is set, else the embedded engine in the service's own directory."""
from __future__ import annotations

from pathlib import Path

from .config import Config
from .edge_engine import EdgeEngine
from .qdrant_engine import QdrantClientEngine
from .vector_store import Engine
from .worker_pool import STOP_GRACE


# Seconds beyond the replaced process's longest stop that a replacement waits for the embedded
# store: what is left of its own start-up after the engine opens, before the old one is told to stop.
TAKE_OVER_MARGIN = 30.0


def take_over_within(config: Config) -> float:
    """How long a replacement waits for the embedded store: the old process is gone within its
    drain (`core.shutdown_timeout`) and the parent's `STOP_GRACE`, or the console's `stop_timeout`."""
    settings = config.settings
    return max(settings.core.shutdown_timeout + STOP_GRACE, settings.console.stop_timeout) + TAKE_OVER_MARGIN


def vectors_directory(config: Config, service_id: str) -> Path:
    """`[vectors] path`, else `DATA_DIR/vectors/<service id>`: one directory per service."""
    configured = config.settings.vectors.path
    return Path(configured).expanduser().resolve() if configured else config.data_dir / "vectors" / service_id


def create_local_engine(config: Config, service_id: str) -> Engine:
    settings = config.settings.vectors
    if settings.qdrant_url:
        return QdrantClientEngine(url=settings.qdrant_url, api_key=settings.qdrant_api_key,
                                  timeout=settings.timeout)
    directory = vectors_directory(config, service_id)
    if settings.engine == "edge":
        return EdgeEngine(directory, take_over_within=take_over_within(config) if settings.take_over else 0.0)
    if settings.engine == "qdrant-local":
        return QdrantClientEngine(path=directory)
    raise ValueError(f"[vectors] engine: {settings.engine!r} is not one of edge, qdrant-local")

