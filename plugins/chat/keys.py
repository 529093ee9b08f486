"""The chat plugin's bus keys and channels, and how long each lives. Every instance sharing the
bus reads and writes the same keys (under the bus's prefix).

Session ids are per owner (two users may both have `work`): every key of a session is built
from its `session_key(user_id, session_id)`, and the sets of sessions hold those."""
from __future__ import annotations

from dataclasses import dataclass


# Sessions with a live device or a running turn, renewed while they last.
LIVE_SESSIONS = "chat:live-sessions"
LIVE_TTL = 60.0

# Sessions whose turns are being run: marked when a holder starts, unmarked when its turns all
# ended. A mark left behind by an instance that died (or was stopped mid-turn) tells the sweeper
# to end that turn's reply for the devices. As long as an unfinished replay is kept.
RUNNING_TURNS = "chat:running-turns"
RUNNING_TURNS_TTL = 3600.0

def running_marks(session_key: str) -> list[tuple[str, str, float]]:
    """The session as running a turn (for the sweeper) and live: made as its lock is taken
    (Admission.lock) and again while its turns run (TurnMachine._mark), as (set, member, ttl)."""
    return [(RUNNING_TURNS, session_key, RUNNING_TURNS_TTL), (LIVE_SESSIONS, session_key, LIVE_TTL)]


# A message id is remembered on the bus as long as the queue keeps finished rows (store.KEEP_FINISHED).
MESSAGE_ID_TTL = 86400.0

# The lock holder reads the database queue after a turn only while this mark says a message was
# queued; a holder outliving it is covered by its look at the queue after letting go.
QUEUED_MARK_TTL = 3600.0

ACTIVITY_TTL = 86400.0

# A running turn's replay stream outlives a crashed instance by at most this long.
RUNNING_REPLAY_TTL = 3600.0

# The pieces and the end of a turn handed in without a device (a webhook's, the bridge's), for a
# waiter on any instance: one channel, so the end arrives after the last piece.
WAITED_TURNS = "chat.waited-turns"


# Messages a user sent in the current minute (plugins.chat max_messages_per_minute).
RATE_WINDOW = 60.0


def rate_key(user_id: str) -> str:
    return f"chat:rate:{user_id}"


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A user's session: ids are per owner, so the pair names it; `key` is its one string."""
    user_id: str
    session_id: str

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)

    @classmethod
    def from_key(cls, key: str) -> "SessionRef":
        return cls(*session_of(key))


def session_key(user_id: str, session_id: str) -> str:
    """One string for a user's session; the length prefix keeps it unambiguous whatever
    characters the two hold."""
    return f"{len(user_id)}.{user_id}.{session_id}"


def session_of(key: str) -> tuple[str, str]:
    """(user_id, session_id) of a `session_key`."""
    length, _, rest = key.partition(".")
    size = int(length)
    return rest[:size], rest[size + 1:]


def lock_key(session: str) -> str:
    """The session's turn lock: the instance that holds it runs the session's turns."""
    return f"chat:turn-lock:{session}"


def activity_key(session: str) -> str:
    return f"chat:activity:{session}"


def message_key(session: str, client_msg_id: str) -> str:
    return f"chat:message-id:{session_key(session, client_msg_id)}"


def queued_key(session: str) -> str:
    return f"chat:queued:{session}"


def admitted_key(session: str) -> str:
    """Set while the bus holds the client_msg_id of every message admitted to the session."""
    return f"chat:admitted:{session}"


def replay_key(session: str) -> str:
    """The stream of the session's latest turn's frames."""
    return f"chat:replay:{session}"
