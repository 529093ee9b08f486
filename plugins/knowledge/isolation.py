"""Extraction of PDF, Word and HTML in a child process with CPU-time and memory limits.

The parsers are third-party code fed with a stranger's bytes: whatever `extraction.Limits` does
not foresee (a structure that is cheap to send and dear to parse) must cost at most the child's
`cpu_seconds` and `memory_bytes`, never the service's own memory or a core for minutes. Each
document gets a process of its own, forked from multiprocessing's fork server, which imported
the parsers once (a fresh interpreter would spend seconds importing them per document, and a
fork of the service itself would carry its threads and its memory). A child that goes over a
limit dies alone: nothing is shared to break, and the next document gets a new child.

Blocking: the plugin calls `extract_isolated` in its executor."""
from __future__ import annotations

import multiprocessing
import resource
import signal
from multiprocessing.connection import Connection
from typing import Any, cast

from . import extraction

# The fork server (one per service process, started at the first document) imports these once;
# its children start with them loaded. "__main__" (multiprocessing's name for the script that
# started the service, when one did, e.g. the `gateway` console script) spares each child from
# importing that script again.
PRELOAD = ["__main__", "plugins.knowledge.extraction", "pypdf", "docx", "trafilatura"]
# A child that neither finishes nor uses its CPU time (waiting for a core on a busy machine counts
# here, not there) is stopped after this many times its CPU seconds.
WALL_FACTOR = 4
MIN_WALL_SECONDS = 30.0

_context: Any = None


def _fork_server() -> Any:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def extract_isolated(data: bytes, content_type: str, charset: str | None, limits: extraction.Limits,
                     cpu_seconds: float, memory_bytes: int) -> extraction.Extracted:
    """`extraction.extract` in a child process; raises what it raises, and DocumentTooComplex
    when the child goes over its CPU time or memory or does not finish."""
    context = _fork_server()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, name="knowledge-extraction", daemon=True,
                            args=(sender, data, content_type, charset, limits, cpu_seconds, memory_bytes))
    try:
        child.start()
        sender.close()
        wall_seconds = max(MIN_WALL_SECONDS, cpu_seconds * WALL_FACTOR)
        if not receiver.poll(wall_seconds):
            raise extraction.DocumentTooComplex(f"reading it took longer than {wall_seconds:g} seconds")
        try:
            outcome = receiver.recv()
        except EOFError:  # the child died before it answered
            child.join(5)
            raise extraction.DocumentTooComplex(_death(child.exitcode, cpu_seconds, memory_bytes)) from None
    finally:
        receiver.close()
        sender.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:
            child.join()
        child.close()
    kind, value = outcome
    if kind == "ok":
        return cast(extraction.Extracted, value)
    raise {"unsupported": extraction.UnsupportedDocumentType, "unreadable": extraction.UnreadableDocument,
           "too_complex": extraction.DocumentTooComplex}[kind](value)


def _death(exitcode: int | None, cpu_seconds: float, memory_bytes: int) -> str:
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"reading it took more than {cpu_seconds:g} seconds of CPU time"
    return f"reading it needed more than {_mib(memory_bytes)} MiB of memory (the reader stopped: {exitcode})"


def _mib(size: int) -> int:
    return size // (1024 * 1024)


def _child(connection: Connection, data: bytes, content_type: str, charset: str | None,
           limits: extraction.Limits, cpu_seconds: float, memory_bytes: int) -> None:
    _limit(cpu_seconds, memory_bytes)
    outcome: tuple[str, Any]
    try:
        outcome = ("ok", extraction.extract(data, content_type, charset=charset, limits=limits))
    except extraction.UnsupportedDocumentType as error:
        outcome = ("unsupported", str(error))
    except extraction.UnreadableDocument as error:
        # A parser that runs out of memory may say so as its own error (lxml: "unknown error").
        outcome = (("too_complex", f"reading it needed more than {_mib(memory_bytes)} MiB of memory")
                   if _near_memory_limit() else ("unreadable", str(error)))
    except extraction.DocumentTooComplex as error:
        outcome = ("too_complex", str(error))
    except MemoryError:
        outcome = ("too_complex", f"reading it needed more than {_mib(memory_bytes)} MiB of memory")
    connection.send(outcome)
    connection.close()


def _near_memory_limit() -> bool:
    """Whether this process's address space came within a tenth of its limit."""
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY:
        return False
    try:
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:"))
    except (OSError, StopIteration, ValueError):
        return False
    return peak >= limit * 0.9


def _limit(cpu_seconds: float, memory_bytes: int) -> None:
    """CPU seconds from now (the child's count starts at its fork) and address space beyond what
    the child already maps (the fork server's interpreter and parsers)."""
    seconds = max(1, int(cpu_seconds + 0.999))
    _set_limit(resource.RLIMIT_CPU, seconds, seconds + 5)
    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
    except OSError:  # not Linux: no /proc; the CPU limit still holds
        return
    _set_limit(resource.RLIMIT_AS, mapped + memory_bytes, mapped + memory_bytes)


def _set_limit(which: int, soft: int, hard: int) -> None:
    """Never above a hard limit the service was started under (which may not be raised)."""
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))
