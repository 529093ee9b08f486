"""Service logs on disk: one file per service in DATA_DIR/logs, rotated by size, read back
from the end in pages. Every file operation runs in an executor, serialised per service, so
the event loop never waits on the disk and lines keep their order."""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

READ_BLOCK = 64 * 1024


@dataclass(frozen=True)
class LogPage:
    lines: list[str]
    has_more: bool


class ServiceLog:
    """The log of one service: `<id>.log`, then `<id>.log.1` ... `<id>.log.N` (older)."""

    def __init__(self, directory: Path, service_id: str, max_bytes: int, backups: int):
        self.path = directory / f"{service_id}.log"
        self.max_bytes = max(int(max_bytes), 1024)
        self.backups = max(int(backups), 0)
        self._lock = asyncio.Lock()

    # -- blocking parts, run in the executor

    def _files_newest_first(self) -> list[Path]:
        candidates = [self.path] + [self.path.with_name(f"{self.path.name}.{n}")
                                    for n in range(1, self.backups + 1)]
        return [path for path in candidates if path.exists()]

    def _rotate(self) -> None:
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
            return
        for number in range(self.backups, 0, -1):
            source = self.path if number == 1 else self.path.with_name(f"{self.path.name}.{number - 1}")
            if source.exists():
                os.replace(source, self.path.with_name(f"{self.path.name}.{number}"))

    def _append(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(data) > self.max_bytes:
            self._rotate()
        with open(self.path, "ab") as handle:
            handle.write(data)

    def _tail(self, lines: int, offset: int) -> LogPage:
        """The `lines` lines before the newest `offset` ones, oldest first."""
        wanted = lines + offset + 1  # one more tells whether older lines exist
        collected: list[bytes] = []  # newest first
        for path in self._files_newest_first():
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                position = handle.tell()
                remainder = b""
                at_file_end = True  # a file ending in "\n" yields one empty element there: not a line
                while position > 0 and len(collected) < wanted:
                    step = min(READ_BLOCK, position)
                    position -= step
                    handle.seek(position)
                    block = handle.read(step) + remainder
                    parts = block.split(b"\n")
                    remainder = parts.pop(0)  # may be cut; completed by the next block
                    for part in reversed(parts):
                        if at_file_end and part == b"":
                            at_file_end = False
                            continue
                        at_file_end = False
                        collected.append(part)
                if remainder and len(collected) < wanted:
                    collected.append(remainder)
            if len(collected) >= wanted:
                break
        page = collected[offset:offset + lines]
        page.reverse()
        return LogPage([line.decode("utf-8", "replace") for line in page], len(collected) > offset + lines)

    def _clear(self) -> None:
        for path in self._files_newest_first():
            path.unlink(missing_ok=True)

    # -- the async interface

    async def append(self, data: bytes) -> None:
        async with self._lock:
            await asyncio.get_running_loop().run_in_executor(None, self._append, data)

    async def tail(self, lines: int = 200, offset: int = 0) -> LogPage:
        async with self._lock:
            return await asyncio.get_running_loop().run_in_executor(None, self._tail, lines, offset)

    async def clear(self) -> None:
        async with self._lock:
            await asyncio.get_running_loop().run_in_executor(None, self._clear)

    def tail_blocking(self, lines: int = 200, offset: int = 0) -> LogPage:
        """For the command line, which reads logs with no event loop and no console running."""
        return self._tail(lines, offset)


class LogStore:
    def __init__(self, directory: Path, max_bytes: int = 5 * 1024 * 1024, backups: int = 3):
        self.directory = directory
        self.max_bytes = max_bytes
        self.backups = backups
        self._logs: dict[str, ServiceLog] = {}

    def get(self, service_id: str) -> ServiceLog:
        if service_id not in self._logs:
            self._logs[service_id] = ServiceLog(self.directory, service_id, self.max_bytes, self.backups)
        return self._logs[service_id]
