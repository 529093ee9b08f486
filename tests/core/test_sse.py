"""The SSE reader takes the body in whatever pieces the network delivers."""
import random

import pytest

from gateway.sse import SseDecoder

STREAM = ("event: delta\r\ndata: {\"content\": \"héllo 紫色\"}\r\n\r\n"
          ": a comment\n"
          "data: first line\ndata: second line\n\n"
          "id: 7\nretry: 10\ndata:no space\n\n"
          "data: cut off at the end").encode()
EVENTS = ['{"content": "héllo 紫色"}', "first line\nsecond line", "no space"]


def test_the_whole_body_at_once():
    assert SseDecoder().feed(STREAM) == EVENTS


@pytest.mark.parametrize("seed", range(20))
def test_any_split_of_the_body_gives_the_same_events(seed):
    chooser = random.Random(seed)
    cuts = sorted(chooser.sample(range(1, len(STREAM)), chooser.randint(1, 30)))
    decoder, events = SseDecoder(), []
    for start, end in zip([0, *cuts], [*cuts, len(STREAM)]):
        events.extend(decoder.feed(STREAM[start:end]))  # pieces may split a UTF-8 character
    assert events == EVENTS


def test_a_line_that_never_ends_is_refused():
    decoder = SseDecoder(max_line=1024)
    decoder.feed(b"data: " + b"x" * 1000)
    with pytest.raises(ValueError, match="longer than 1024 bytes"):
        decoder.feed(b"x" * 100)


def test_the_end_of_the_stream_completes_an_event_without_its_blank_line():
    """What a model provider that closes right after its last `data:` line sends."""
    decoder = SseDecoder()
    assert decoder.feed(b"data: one\n\ndata: [DO") == ["one"]
    assert decoder.feed(b"NE]") == []
    assert decoder.finish() == "[DONE]"
    assert decoder.finish() is None


def test_a_long_line_in_small_pieces_is_read_once():
    """The unfinished line is kept in pieces, not joined again for every chunk."""
    decoder = SseDecoder()
    line = b"data: " + b"x" * (4 * 2**20)
    for start in range(0, len(line), 4096):
        assert decoder.feed(line[start:start + 4096]) == []
    assert decoder.feed(b"\n\n") == ["x" * (4 * 2**20)]
