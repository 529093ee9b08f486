"""What the automation plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter, row_eraser


def register(registrar: Registrar) -> None:
    keep_person_data(registrar, "automation",
                     row_counter(registrar, {"automation_rules": "automation_rules", "scenes": "automation_scenes"}),
                     # a rule's claims cascade
                     row_eraser(registrar, ["automation_runs", "automation_rules", "automation_scenes"]))
