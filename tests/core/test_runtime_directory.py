"""Where the workers' parent keeps its sockets and the embedded bus's pid file (gateway/workers.py
`runtime_directory`, gateway/embedded_bus.py): one directory for both, the same at every start,
so an embedded bus that a killed parent left behind is stopped by the next start, also when
DATA_DIR is too deep for a unix socket's path and they go under the system's temporary directory.
(The whole process tree: tests/chat/test_workers.py.)"""
from __future__ import annotations

import asyncio
import os
import shutil
import stat

import pytest

from gateway.embedded_bus import EmbeddedBus, redis_server_binary
from gateway.workers import MAX_SOCKET_PATH, runtime_directory
from tests.support.servers import NO_REDIS_SERVER


@pytest.fixture
def deep_config(make_config, tmp_path):
    """DATA_DIR too deep for `DATA_DIR/run/<service>-vectors.sock`; what the test made for it
    outside tmp_path is removed afterwards."""
    config = make_config({"core.data_dir": str(tmp_path / ("deep" * 30) / "data")})
    made = []
    yield config, made
    for path in made:
        if path.is_symlink():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def owner_only_directory(path) -> bool:
    found = os.lstat(path)
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) == 0o700


def test_a_deep_data_dirs_runtime_directory_is_private_and_the_same_at_every_start(deep_config, tmp_path):
    config, made = deep_config
    directory = runtime_directory(config, "gateway")
    made.append(directory)
    assert not directory.is_relative_to(config.data_dir)
    assert len(str(directory / "gateway-vectors.sock")) <= MAX_SOCKET_PATH
    assert owner_only_directory(directory)
    directory.chmod(0o755)  # as a lax umask or another tool may leave it
    assert runtime_directory(config, "gateway") == directory and owner_only_directory(directory)
    elsewhere = runtime_directory(config, "other")  # another service of this DATA_DIR: its own
    made.append(elsewhere)
    assert elsewhere != directory

    # Not this user's directory (here a link to elsewhere, which another user could have made
    # first): not used, the sockets go to a fresh private directory instead.
    directory.rmdir()
    target = tmp_path / "someone-elses"
    target.mkdir(mode=0o755)
    directory.symlink_to(target)
    fallback = runtime_directory(config, "gateway")
    made.append(fallback)
    assert fallback != directory and owner_only_directory(fallback)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and list(target.iterdir()) == []


async def test_the_bus_pid_file_is_beside_its_socket_and_a_leftover_is_stopped_at_the_next_start(deep_config):
    """The parent killed: its bus runs on. The next start looks in the same directory, finds
    the pid file there and stops that bus before it starts its own."""
    if redis_server_binary() is None:
        pytest.skip(f"the workers' embedded bus: {NO_REDIS_SERVER}")
    config, made = deep_config
    directory = runtime_directory(config, "gateway")
    made.append(directory)
    left = EmbeddedBus(directory, "gateway")
    await left.start()
    try:
        assert left.pid_file == directory / "gateway-bus.pid" and left.socket_path.parent == directory
        assert left.pid_file.read_text() == str(left.process.pid)
        assert not (config.data_dir / "run").exists()  # nothing made under the deep DATA_DIR

        again = EmbeddedBus(runtime_directory(config, "gateway"), "gateway")
        await again.start()
        try:
            assert await asyncio.to_thread(left.process.wait, 5) is not None  # the leftover stopped
            assert again.pid_file.read_text() == str(again.process.pid)
        finally:
            await again.stop()
        assert not again.pid_file.exists() and not again.socket_path.exists()
    finally:
        if left.process.poll() is None:
            left.process.kill()
            await asyncio.to_thread(left.process.wait, 5)
