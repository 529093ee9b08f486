"""The Lua scripts of the Redis bus (redis_bus.py): each makes one step of what would otherwise
be several commands, atomic in Redis and one round trip; and how their arguments are built."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bus import Entry


INCR_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}
"""

DELETE_IF_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

RENEW_IF_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


# KEYS: the lock, the key to claim (when ARGV[3] is '1'), ARGV[6] keys that must exist, ARGV[7]
# keys that must not, then the sets to mark. ARGV: owner, ttl in ms, '1' with a claim, its value
# and ttl in ms, the two counts, then per set to mark its member and expiry (the score). Returns
# {taken, claimed}: claimed -1 when not taken or a condition failed.
ACQUIRE_SCRIPT = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, -1} end
local present = ARGV[3] == '1' and 3 or 2
local absent = present + tonumber(ARGV[6])
local marks = absent + tonumber(ARGV[7])
for i = marks, #KEYS do
  local at = 8 + 2 * (i - marks)
  redis.call('ZADD', KEYS[i], ARGV[at + 1], ARGV[at])
end
for i = present, absent - 1 do
  if redis.call('EXISTS', KEYS[i]) == 0 then return {1, -1} end
end
for i = absent, marks - 1 do
  if redis.call('EXISTS', KEYS[i]) == 1 then return {1, -1} end
end
if present == 2 or redis.call('SET', KEYS[2], ARGV[4], 'NX', 'PX', ARGV[5]) then return {1, 1} end
return {1, 0}
"""

# KEYS: the lock, the mark, the set to unmark (optional). ARGV: owner, the member to unmark.
RELEASE_UNLESS_SCRIPT = """
if redis.call('DEL', KEYS[2]) == 1 then return 0 end
if #KEYS > 2 then redis.call('ZREM', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# The old stream's entries come back only when its last entry lacks the `finished` mark.
STREAM_RESTART_SCRIPT = """
local previous = {}
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local fields, finished = last[1][2], false
  for i = 1, #fields, 2 do
    if fields[i] == ARGV[2] and fields[i + 1] == ARGV[3] then finished = true end
  end
  if not finished then previous = redis.call('XRANGE', KEYS[1], '-', '+') end
end
redis.call('DEL', KEYS[1])
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return previous
"""


MEMBERS_SCRIPT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

# Lua functions the scripts below share. `append`: add the fields entry[first], entry[first + 1]...
# to stream `key`, trimmed to about `max_len` entries ('' for no trimming); the entry's id.
APPEND_LUA = """
local function append(key, max_len, entry, first)
  if max_len == '' then
    return redis.call('XADD', key, '*', unpack(entry, first))
  end
  return redis.call('XADD', key, 'MAXLEN', '~', max_len, '*', unpack(entry, first))
end
"""

# `fan_out`: publish `message` on `channel_prefix .. holder` for every holder of `holders` not
# expired by `now` but `origin`; how many were sent.
FAN_OUT_LUA = """
local function fan_out(holders, now, origin, channel_prefix, message)
  local sent = 0
  for _, holder in ipairs(redis.call('ZRANGEBYSCORE', holders, now, '+inf')) do
    if holder ~= origin then
      redis.call('PUBLISH', channel_prefix .. holder, message)
      sent = sent + 1
    end
  end
  return sent
end
"""

# `Bus.hold_and_tell`: publish ARGV[5] on ARGV[4] .. holder for every holder of KEYS[1] not
# expired by ARGV[1] but ARGV[2], then mark ARGV[2] until ARGV[3] (unmark it when ARGV[3] is '');
# the holders told.
HOLD_SCRIPT = """
local told = {}
for _, holder in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  if holder ~= ARGV[2] then
    redis.call('PUBLISH', ARGV[4] .. holder, ARGV[5])
    told[#told + 1] = holder
  end
end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[2])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
end
return told
"""

# ARGV: ttl in ms, then the entry (`stream_args`).
STREAM_APPEND_EXPIRING_SCRIPT = APPEND_LUA + """
append(KEYS[1], ARGV[2], ARGV, 3)
return redis.call('PEXPIRE', KEYS[1], ARGV[1])
"""


# KEYS[1]: the holders (a sorted set scored by expiry), KEYS[2] (optional): the stream to append to.
# ARGV: now, origin, channel prefix, message, then with KEYS[2] the entry (`stream_args`).
FAN_OUT_SCRIPT = APPEND_LUA + FAN_OUT_LUA + """
if #KEYS > 1 then append(KEYS[2], ARGV[5], ARGV, 6) end
return fan_out(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""


# Many frames (fan_outs and plain appends, `redis_frames.fold_frames`) in one call: one command to
# pack and one reply to parse instead of one each, which was most of what a frame cost this
# process. ARGV[1]: a JSON list of items, each naming its keys by their position in KEYS (every
# key the call touches, once each):
#   ["fan_out", holders, stream (0: none), now, origin, channel prefix, message[, max_len, fields]]
#   ["append", stream, max_len, fields]
# Each item runs on its own (pcall): one that fails (a key of the wrong type) answers its error
# in its place among the results, and the others still run.
FRAMES_SCRIPT = APPEND_LUA + FAN_OUT_LUA + """
local function run(item)
  if item[1] == 'append' then return append(KEYS[item[2]], item[3], item[4], 1) end
  if item[3] > 0 then append(KEYS[item[3]], item[8], item[9], 1) end
  return fan_out(KEYS[item[2]], item[4], item[5], item[6], item[7])
end
local results = {}
for i, item in ipairs(cjson.decode(ARGV[1])) do
  local ok, result = pcall(run, item)
  if not ok then  -- an error reply among the results: redis-py makes it that item's ResponseError
    if type(result) == 'table' then result = result.err end
    result = {err = tostring(result)}
  end
  results[i] = result
end
return results
"""


def fields(entry: Entry) -> list[str]:
    """A stream entry as a script's arguments: field, value, field, value..."""
    return [item for pair in entry.items() for item in pair]


def stream_args(entry: Entry, max_len: int | None) -> list:
    """A stream entry as the appending scripts take it in ARGV (`APPEND_LUA`): max_len ('' for
    none), then the entry's fields."""
    return ["" if max_len is None else max_len, *fields(entry)]


class FrameKeys:
    """The KEYS of one `FRAMES_SCRIPT` call: every key its items touch, once each."""

    __slots__ = ("keys", "_positions")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._positions: dict[str, int] = {}

    def position(self, key: str) -> int:
        """Where `key` is in KEYS, counted from 1 as Lua does."""
        number = self._positions.get(key)
        if number is None:
            self.keys.append(key)
            number = self._positions[key] = len(self.keys)
        return number
