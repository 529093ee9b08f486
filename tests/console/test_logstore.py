"""Service logs on disk: rotation by size, paging from the end across rotated files, clearing."""
from __future__ import annotations

from console.logstore import LogStore


async def test_pages_cross_rotated_files_and_clear_removes_them(tmp_path):
    store = LogStore(tmp_path / "logs", max_bytes=1024, backups=2)
    service_log = store.get("alpha")
    for number in range(1, 401):  # 10 bytes a line: rotates three times, the oldest fall off
        await service_log.append(f"line {number:04d}\n".encode())
    files = sorted(path.name for path in (tmp_path / "logs").iterdir())
    assert files == ["alpha.log", "alpha.log.1", "alpha.log.2"]
    assert all(path.stat().st_size <= 1024 for path in (tmp_path / "logs").iterdir())

    page = await service_log.tail(5)
    assert page.lines == [f"line {n:04d}" for n in range(396, 401)] and page.has_more
    everything = await service_log.tail(1000)
    assert everything.lines[-1] == "line 0400" and not everything.has_more
    numbers = [int(line.split()[1]) for line in everything.lines]
    assert numbers == list(range(numbers[0], 401))  # contiguous across the three files
    assert numbers[0] > 1  # the oldest lines were rotated out
    older = await service_log.tail(3, offset=len(numbers) - 3)
    assert older.lines == everything.lines[:3] and not older.has_more

    await service_log.clear()
    assert list((tmp_path / "logs").iterdir()) == []
    assert (await service_log.tail()).lines == []


async def test_a_partial_last_line_and_long_lines_are_read_whole(tmp_path):
    service_log = LogStore(tmp_path, max_bytes=10 * 1024 * 1024).get("beta")
    long_line = "x" * 200_000
    await service_log.append(f"first\n{long_line}\nno newline yet".encode())
    page = await service_log.tail(2)
    assert page.lines == [long_line, "no newline yet"] and page.has_more
    assert service_log.tail_blocking(10).lines == ["first", long_line, "no newline yet"]
