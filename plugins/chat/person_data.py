"""What the chat plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter, row_eraser


def register(registrar: Registrar) -> None:
    keep_person_data(registrar, "chat", row_counter(registrar, {"known_clients": "known_clients"}),
                     row_eraser(registrar, ["chat_turn_queue", "known_clients"]))
