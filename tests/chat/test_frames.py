"""The `message` frame's quick reading agrees with its marshmallow schema on every frame."""
import itertools
import random

import marshmallow
import pytest

from plugins.chat.channel import MessageFrame, plain_message_frame

VALUES = {
    "content": ["hello", "", " ", "名字" * 3, None, 5, True, ["x"], {"a": 1}],
    "client_msg_id": ["m1", "", "x" * 128, "x" * 129, None, 7, 1.5, ["m"]],
    "timestamp": [1732200000000, 0, -1, None, True, "1732200000000", 1.0, 1.5, "soon"],
    "session_id": ["session_abcdef123456", "a.b:c-d_e", "", "has space", "x" * 129, "s\n", None, 3, "é"],
    "mode": ["text", "voice_msg", "voice_assistant", "TEXT", "", None, 1],
    "attachments": [[], None, [{"type": "image", "url": "data:image/png;base64,AA=="}], "x", {}, ()],
    "client_id": ["phone-1", "", "x" * 128, "x" * 129, None, 3],
    "device_name": ["Kitchen tablet", "", "x" * 129, None, ["d"]],
    "user_agent": ["Mozilla/5.0", "x" * 256, "x" * 257, None, 1.5],
    "extra": ["ignored", None, {"nested": True}],
}


def full_load(frame: dict):
    """What the schema alone makes of the frame, or None when it refuses it."""
    try:
        return marshmallow.Schema.load(MessageFrame(), frame, unknown=marshmallow.EXCLUDE)
    except marshmallow.ValidationError:
        return None


def frames():
    keys = list(VALUES)
    yield {}
    for key in keys:  # every value of every field alone
        for value in VALUES[key]:
            yield {"type": "message", key: value}
    for pair in itertools.combinations(keys, 2):  # every pair of fields, every combination of values
        for values in itertools.product(*(VALUES[key] for key in pair)):
            yield {"type": "message", **dict(zip(pair, values))}
    rng = random.Random(20261122)
    for _ in range(3000):  # random frames with several fields
        chosen = rng.sample(keys, rng.randint(3, len(keys)))
        yield {"type": "message", **{key: rng.choice(VALUES[key]) for key in chosen}}


def test_the_quick_reading_gives_what_the_schema_gives_or_leaves_the_frame_to_it():
    quick_frames = 0
    for frame in frames():
        quick = plain_message_frame(frame)
        if quick is None:
            continue
        quick_frames += 1
        assert quick == full_load(frame), frame
    assert quick_frames > 100  # the common frames are read the quick way


@pytest.mark.parametrize("frame", [
    {"type": "message", "content": "hello", "client_msg_id": "0123456789abcdef"},
    {"type": "message", "content": "hello"},
    {"type": "message", "content": "hi", "timestamp": 1732200000000, "mode": "voice_msg", "session_id": "s_1"},
    {"type": "message", "content": "hi", "client_id": "tablet-7", "device_name": "Tablet", "user_agent": "UA/1"},
])
def test_plain_text_frames_are_read_the_quick_way(frame):
    assert plain_message_frame(frame) is not None
    assert MessageFrame().load(frame, unknown=marshmallow.EXCLUDE) == full_load(frame)


@pytest.mark.parametrize("frame", [
    {"type": "message", "content": None},
    {"type": "message", "content": "x", "client_msg_id": ""},
    {"type": "message", "content": "x", "mode": "shout"},
    {"type": "message", "content": "x", "session_id": "no spaces allowed"},
    {"type": "message", "content": "x", "attachments": "not a list"},
])
def test_an_invalid_frame_is_still_refused_with_the_schemas_message(frame):
    with pytest.raises(marshmallow.ValidationError):
        MessageFrame().load(frame, unknown=marshmallow.EXCLUDE)


def test_the_schemas_own_reading_when_unknown_fields_are_not_excluded():
    with pytest.raises(marshmallow.ValidationError):
        MessageFrame().load({"type": "message", "content": "x"})


@pytest.mark.parametrize("session_id", ["abc\n", "x" * 128 + "\n"])
def test_a_session_id_with_a_trailing_newline_is_refused_both_ways(session_id):
    frame = {"type": "message", "content": "x", "session_id": session_id}
    assert plain_message_frame(frame) is None
    assert full_load(frame) is None


@pytest.mark.parametrize("schema", [MessageFrame(partial=True), MessageFrame(only=("content",)),
                                    MessageFrame(exclude=("timestamp",))])
def test_a_schema_made_with_other_settings_reads_frames_its_own_way(schema):
    frame = {"type": "message", "content": "x"}
    assert schema.load(frame, unknown=marshmallow.EXCLUDE) == \
        marshmallow.Schema.load(schema, frame, unknown=marshmallow.EXCLUDE)
