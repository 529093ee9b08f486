"""The context plugins share: configuration, storage clients, the bus, the WebSocket hub,
the job scheduler, one HTTP client session, the embedding model and vector index and the contracts plugins provide each other.

Clients are opened when the service starts (see `core_resources.py`); touching one before that, or on a
service that did not ask for it, raises a clear error instead of an AttributeError."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Generic, TypeVar, overload

from aiohttp import web

from .clock import Clock, SystemClock
from .contracts import Contracts
from .hub import WebSocketHub
from .peer_location import peer_addresses

if TYPE_CHECKING:
    import aiojobs
    import aiohttp
    import aiopg

    from .blobs import BlobStore
    from .bus import Bus
    from .config import Config
    from .embeddings import Embedder
    from .vectors import VectorIndex

T = TypeVar("T")


class _Slot(Generic[T]):
    """A context attribute that exists only once the service has started. Reading it before then
    raises; once set it is an ordinary attribute of the instance (a descriptor without
    `__set__` is asked only while the instance has no such attribute): `context.bus` and the
    like are read several times for every frame a reply sends."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> "_Slot[T]": ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> "_Slot[T] | T":
        if instance is None:
            return self
        raise RuntimeError(f"context.{self.name} is not available: the service has not "
                           f"started yet, or it was not configured")


class Context:
    db: _Slot[aiopg.Pool] = _Slot()
    bus: _Slot[Bus] = _Slot()
    http: _Slot[aiohttp.ClientSession] = _Slot()
    scheduler: _Slot[aiojobs.Scheduler] = _Slot()
    blobs: _Slot[BlobStore] = _Slot()
    embeddings: _Slot[Embedder] = _Slot()
    vectors: _Slot[VectorIndex] = _Slot()

    def __init__(self, service_id: str, config: "Config", service_name: str = ""):
        self.service_id = service_id
        self.service_name = service_name or service_id
        self.config = config
        self.contracts = Contracts()
        # Where the other services answer, read once (gateway/peers.py).
        self.peer_addresses = peer_addresses(config)
        self.hub: WebSocketHub = WebSocketHub(self)
        self.app: web.Application | None = None
        self.embedded_database = None  # the embedded PostgreSQL handle, when one is used
        self._clock: Clock = SystemClock()
        self._clock_listeners: list[Callable[[], None]] = []

    @property
    def clock(self) -> "Clock":
        """What "now" is for scheduled work (gateway.schedule): the real time, or a test's
        `ManualClock`, which may be put here while the service runs."""
        return self._clock

    @clock.setter
    def clock(self, clock: "Clock") -> None:
        self._clock = clock
        for listener in list(self._clock_listeners):
            listener()  # a due loop sleeping on the old clock wakes and reads the new one

    def on_clock_change(self, listener: Callable[[], None]) -> None:
        self._clock_listeners.append(listener)

    def has(self, name: str) -> bool:
        return self.__dict__.get(name) is not None

    def peer_url(self, peer: str) -> str:
        """Where another service answers (e.g. "ai_core"), no trailing slash: its `*_URL`
        variable, else its port of the service table (gateway/peers.py)."""
        if peer in self.peer_addresses:
            return self.peer_addresses[peer]
        return self.config.settings.peers.url_of(peer)

    def peer_headers(self) -> dict[str, str]:
        """The credential this service presents to its peers (`SERVICE_TOKEN`)."""
        return {"Authorization": f"Bearer {self.config.settings.auth.service_token}"}


CONTEXT = web.AppKey("context", Context)


def get_context(request_or_app: web.Request | web.Application) -> Context:
    app = request_or_app.config_dict if isinstance(request_or_app, web.Request) else request_or_app
    try:
        return app[CONTEXT]
    except KeyError:
        raise RuntimeError("the gateway context is missing: build the app with gateway.create_app") from None
