"""A service process's side of being one of several workers or being replaced: the signal that
tells it a replacement already serves its port, and stopping once its parent is gone. The
parent's side is gateway/workers.py."""
from __future__ import annotations

import asyncio
import logging
import os
import signal

log = logging.getLogger("gateway.workers")


# Sent to a service process by whoever starts its replacement (a rolling restart: the workers'
# parent, or the console for a service of one process): drain and stop as on SIGTERM, but close
# the WebSockets with 1012 "service restart", since the replacement already serves the port.
REPLACED_SIGNAL = getattr(signal, "SIGUSR2", None)


def watch_parent(loop: asyncio.AbstractEventLoop) -> None:
    """In a worker: drain and stop (SIGTERM to itself) once the parent is gone, so a parent
    killed with SIGKILL leaves no worker serving on."""
    parent = os.getppid()

    def check() -> None:
        if os.getppid() != parent:
            log.warning("the parent process %s is gone; stopping", parent)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        loop.call_later(1.0, check)

    loop.call_later(1.0, check)
