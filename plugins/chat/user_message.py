"""The user's message of a turn: what the AI core reads of it, and its storing, after which
the user's other devices see its echo and then the reply (echo_gate.py)."""
from __future__ import annotations

import logging
from typing import Any

from .admission import Turn
from .contract import TurnFailed
from .echo_gate import EchoGate
from .frames import echo_frame, now_ms
from .keys import ACTIVITY_TTL, activity_key
from .outcomes import already_stored, outcome_read
from .relay_state import RelayState

log = logging.getLogger("plugins.chat.relay")  # the relay's log (docs/chat.md)


async def store_user_message(relay: RelayState, turn: Turn, gate: EchoGate) -> dict:
    """Write the turn's queue row if the submitter did not, and the user's message; then
    echo it to the user's other devices and let the reply's frames follow.

    When the sender sees the reply without waiting for this, the writes start once the
    AI core's first event was sent on (or `store_after` seconds passed): their work in this
    process and in PostgreSQL would otherwise compete with the first token for the CPU
    (`TurnRelay._start` arranges that)."""
    session_id = turn.session_id
    metadata: dict[str, Any] = dict(turn.metadata) if turn.metadata is not None else {"mode": turn.mode}
    if turn.attachments:
        metadata["attachments"] = [{k: v for k, v in a.items() if k != "url"} for a in turn.attachments]
    store_message = relay.conversations.add_message(session_id, turn.user_id, "user", turn.text, "chat",
                                                    metadata=metadata, client_msg_id=turn.client_msg_id) \
        if turn.reuse is None else already_stored(turn.reuse)
    try:
        if turn.recorded:  # claimed from the queue, or written at admission
            recorded, message = True, await store_message
        else:  # both writes at once, each batched with other turns'
            recording = relay.records.running(turn.columns())
            try:
                message = await store_message
            except BaseException:
                recording.add_done_callback(outcome_read)  # it is written anyway
                raise
            recorded = await recording
        if not recorded and not message.get("duplicate"):
            # The queue already had this id (a row from before a restart whose turn never
            # stored its message): the message is new to the session, so the turn goes on.
            log.warning("turn %s of session %s runs without its own queue row", turn.turn_id, session_id)
        if message.get("duplicate"):
            raise TurnFailed(f"this message was already received (client_msg_id {turn.client_msg_id})",
                             "duplicate_message")
    except BaseException as error:
        await gate.open(None)
        if not isinstance(error, TurnFailed):  # nothing stored: let a re-send through
            await relay.admission.forget_message_id(turn)
        raise
    await gate.open(echo_frame(session_id, message, turn.text, metadata.get("attachments", []),
                               turn.client_msg_id, turn.client) if turn.reuse is None else None)
    await relay.context.bus.set(activity_key(turn.session.key), str(now_ms()), ttl=ACTIVITY_TTL)
    return message


def model_text(text: str, attachments: list[dict]) -> str:
    """What the AI core reads of the person's words. A message that only carries documents
    (they went into the conversation's knowledge base, which the assistant searches) says so in
    words: the AI core takes no turn without text or an image."""
    if text.strip() or any(a.get("type") == "image" for a in attachments):
        return text
    names = [str(a.get("filename") or "a document") for a in attachments if a.get("type") == "document"]
    return f"I attached {', '.join(names)}." if names else text
