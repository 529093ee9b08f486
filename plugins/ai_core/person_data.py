"""What the AI core keeps of a person, for deleting them (auth contract `PERSON_DATA`, asked by
the gateway through GET/DELETE /api/v1/people/{user_id}/data): the records of their tool calls
and the confirmations waiting for (or decided by) them."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter, row_eraser


def register(registrar: Registrar) -> None:
    keep_person_data(registrar, "ai_core",
                     row_counter(registrar, {"tool_calls": "ai_tool_calls", "confirmations": "ai_pending_confirmations"}),
                     row_eraser(registrar, ["ai_tool_calls", "ai_pending_confirmations"]))
