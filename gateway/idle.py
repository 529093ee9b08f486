"""Models loaded on first use and released after they sat idle (issue 44: a small machine runs the
whole stack in a few hundred MB while nobody talks to it).

An `IdleModel` wraps what loads a model. Code that needs the model, on a worker thread (never on
the event loop: loading takes seconds), writes `with holder.using() as model: ...`: the first use
loads it, later uses share it, and once no use has run for `[core] model_idle_seconds` (600 by
default; 0 keeps a model until the process ends) one reaper thread per process drops it and hands
the freed memory back to the system: the heap it freed (malloc_trim), and the resident pages of
the libraries its load mapped (CTranslate2, ONNX Runtime) that no loaded model's load mapped. A
use that arrives while the model is being loaded or released waits for that and then runs as
usual: nothing fails because of a release, the first use after one is only slower (the load
again)."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import threading
import time
import weakref
from typing import Callable, Generic, Iterator, TypeVar

log = logging.getLogger("gateway.idle")

DEFAULT_IDLE_SECONDS = 600.0
# glibc gives each thread that allocates an arena of its own (up to 8 per core); memory a model
# freed on an executor thread stayed with that thread's arena, fragmented, out of malloc_trim's
# reach: 186 MB left in the voice service after its models' release, 150 with 2 arenas, 125 with 1.
DEFAULT_MALLOC_ARENAS = 2
M_ARENA_MAX = -8   # mallopt's parameter (malloc.h)
# madvise's advice (Linux 5.4+): reclaim these pages now. A library stays mapped once imported (a
# process cannot unload it), and the pages of it a model's use read stayed resident, counted
# against the process: 62 MB of the voice service's 180 after its models' release (bench/footprint).
MADV_PAGEOUT = 21
Model = TypeVar("Model")

_idle_seconds = DEFAULT_IDLE_SECONDS
_holders: "weakref.WeakSet[IdleModel]" = weakref.WeakSet()
_wake = threading.Event()
_reaper: threading.Thread | None = None
_reaper_lock = threading.Lock()
_reaper_waits_for_nothing = True


def configure(idle_seconds: float) -> None:
    """The process's idle time (`[core] model_idle_seconds`), read when a service is built."""
    global _idle_seconds
    _idle_seconds = max(0.0, float(idle_seconds))
    _wake.set()


def idle_seconds() -> float:
    return _idle_seconds


class IdleModel(Generic[Model]):
    """One model of a process: loaded by `load` on first use, dropped when idle. `unload`, when
    given, is called with the model being dropped (to close what it holds)."""

    def __init__(self, name: str, load: Callable[[], Model], unload: Callable[[Model], None] | None = None):
        self.name = name
        self._load = load
        self._unload = unload
        self._model: Model | None = None
        self._users = 0
        self._last_used = 0.0
        self._lock = threading.Lock()
        self.loads = 0   # how many times it was loaded (tests, the status)
        self.libraries: frozenset[str] = frozenset()   # files its loads mapped (paged out when released)
        _holders.add(self)
        _start_reaper()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory now (read without waiting for a load under way)."""
        return self._model is not None

    @contextlib.contextmanager
    def using(self) -> Iterator[Model]:
        """The model, loaded first when it is not (on this thread: call from an executor)."""
        with self._lock:
            if self._model is None:
                started = time.perf_counter()
                before = mapped_files()
                self._model = self._load()
                self.libraries |= mapped_files() - before
                self.loads += 1
                log.info("%s loaded in %.1fs", self.name, time.perf_counter() - started)
            self._users += 1
            model = self._model
        try:
            yield model
        finally:
            with self._lock:
                self._users -= 1
                self._last_used = time.monotonic()
            if _reaper_waits_for_nothing:   # a later due never comes sooner: no wake-up needed
                _wake.set()

    def load(self) -> Model:
        """Load it now (when a caller wants the model ready), counting as a use."""
        with self.using() as model:
            return model

    def due(self) -> float | None:
        """When (time.monotonic) it may be released; None while in use, unloaded, or kept."""
        if self._model is None or self._users or not _idle_seconds:
            return None
        return self._last_used + _idle_seconds

    def release(self, *, only_if_idle: bool = True) -> bool:
        """Drop the model (when idle, unless told otherwise and no use runs); whether it did."""
        with self._lock:
            if self._model is None or self._users:
                return False
            due = self.due()
            if only_if_idle and (due is None or due > time.monotonic()):
                return False
            model, self._model = self._model, None
            if self._unload is not None:
                self._unload(model)
            del model
        log.info("%s released after %gs idle", self.name, _idle_seconds)
        return True


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def limit_malloc_arenas(arenas: int) -> bool:
    """At a service's start, before its threads allocate (`[core] malloc_arenas`; 0 leaves glibc's
    default; MALLOC_ARENA_MAX in the environment wins). Whether it was applied (glibc only)."""
    libc = _libc()
    if arenas <= 0 or libc is None or os.environ.get("MALLOC_ARENA_MAX") or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))


def give_memory_back() -> None:
    """Collect what the released model left, and ask glibc to return its free heap to the system
    (without it, freed arenas stay counted against the process)."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def mapped_files() -> set[str]:
    """The files mapped into this process now (/proc/self/maps; none where there is none)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return {fields[5].rstrip("\n") for fields in (line.split(maxsplit=5) for line in maps)
                    if len(fields) == 6 and fields[5].startswith("/")}
    except OSError:
        return set()


def unused_libraries() -> set[str]:
    """Files the loads of models now released mapped, which no loaded model's load mapped. (A
    model loaded while a library was already mapped does not count it: paged out with the model
    that mapped it, its pages are read again by the next use, slower, never failing.)"""
    holders = list(_holders)
    released = set().union(*(holder.libraries for holder in holders if not holder.loaded))
    return released - set().union(*(holder.libraries for holder in holders if holder.loaded))


def page_out(files: set[str]) -> int:
    """Ask the kernel to reclaim the resident pages of these files' read-only mappings (code,
    constants): the next use reads them again. Pages another process maps too are left. How
    many mappings it took (0 before Linux 5.4 or off Linux)."""
    libc = _libc()
    if not files or libc is None or not hasattr(libc, "madvise"):
        return 0
    madvise = libc.madvise
    madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    taken = 0
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for fields in (line.split(maxsplit=5) for line in maps):
                if len(fields) == 6 and "w" not in fields[1] and fields[5].rstrip("\n") in files:
                    start, end = (int(address, 16) for address in fields[0].split("-"))
                    taken += madvise(start, end - start, MADV_PAGEOUT) == 0
    except OSError:
        return taken
    return taken


def _released(names: list[str]) -> list[str]:
    if names:
        give_memory_back()
        page_out(unused_libraries())
    return names


def release_idle() -> list[str]:
    """Release every model whose idle time has passed; their names."""
    return _released([holder.name for holder in list(_holders) if holder.release()])


def release_now(*holders: IdleModel) -> list[str]:
    """Drop these models now unless a use runs (after a start that needed them once); blocking."""
    return _released([holder.name for holder in holders if holder.release(only_if_idle=False)])


def _next_due() -> float | None:
    dues = [due for holder in list(_holders) if (due := holder.due()) is not None]
    return min(dues) if dues else None


def _reap_forever() -> None:
    global _reaper_waits_for_nothing
    while True:
        _reaper_waits_for_nothing = True   # first: a use ending from here on wakes the reaper
        due = _next_due()
        _reaper_waits_for_nothing = due is None
        _wake.wait(None if due is None else max(0.05, due - time.monotonic()))
        _wake.clear()
        try:
            release_idle()
        except Exception:  # noqa: BLE001 - the reaper must outlive a model whose unload failed
            log.exception("releasing idle models failed")


def _start_reaper() -> None:
    global _reaper
    with _reaper_lock:
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap_forever, name="idle-models", daemon=True)
            _reaper.start()
