"""Halves of surrogate pairs in incoming JSON become U+FFFD; everything else is left alone."""
import json

import pytest

from gateway.text import loads_utf8_safe, may_hold_lone_surrogates, without_lone_surrogates


def test_halves_become_replacement_characters_in_values_and_keys_and_pairs_stay():
    value = json.loads('{"a\\udc00": ["x\\ud800y", {"n": 1, "pair": "\\ud83d\\ude00"}], "ok": "名字"}')
    assert without_lone_surrogates(value) == {"a\ufffd": ["x\ufffdy", {"n": 1, "pair": "\U0001F600"}], "ok": "名字"}
    json.dumps(without_lone_surrogates(value), ensure_ascii=False).encode("utf-8")  # encodable now


@pytest.mark.parametrize("raw, may", [('{"a": "\\ud800"}', True), ('{"a": "\\uDFFF"}', True),
                                      (b'{"a": "\\ud83d\\ude00"}', True), ('{"a": "\\u00e9 plain"}', False),
                                      ('{"a": "😀"}'.encode(), False)])
def test_only_an_escaped_surrogate_can_make_one(raw, may):
    assert may_hold_lone_surrogates(raw) is may
    assert loads_utf8_safe(raw) == without_lone_surrogates(json.loads(raw))


def test_utf16_bytes_are_read_as_the_parser_reads_them():
    raw = '{"a": "x\\ud800y"}'.encode("utf-16")
    assert loads_utf8_safe(raw) == {"a": "x\ufffdy"}


def test_a_half_pair_encoded_raw_in_utf8_is_refused_as_undecodable():
    with pytest.raises(UnicodeDecodeError):
        loads_utf8_safe(b'{"a": "\xed\xa0\x80"}')
