"""A session written out as a file: JSON (the spec's shape), Markdown or plain text.

The Markdown and text layouts are ours (the spec leaves them open); docs/sessions.md shows
them. Times are UTC so that a file reads the same wherever it is opened."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from urllib.parse import quote

FORMATS = {
    "json": ("application/json", "json"),
    "markdown": ("text/markdown", "md"),
    "txt": ("text/plain", "txt"),
}
ROLE_LABELS = {"user": "User", "assistant": "Assistant", "system": "System", "action": "Action"}


def utc_text(milliseconds: int) -> str:
    return datetime.fromtimestamp(milliseconds / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def role_label(role: str) -> str:
    return ROLE_LABELS.get(role, role.capitalize() or "Unknown")


def as_json(session: dict, messages: list[dict]) -> str:
    return json.dumps({
        "session": {key: session[key] for key in ("id", "title", "created_at", "updated_at")},
        "messages": [{"role": m["role"], "content": m["content"], "created_at": m["created_at"]}
                     for m in messages],
    }, ensure_ascii=False, indent=2)


def as_markdown(session: dict, messages: list[dict]) -> str:
    lines = [f"# {session['title']}", "",
             f"- Session: `{session['id']}`",
             f"- Created: {utc_text(session['created_at'])}",
             f"- Updated: {utc_text(session['updated_at'])}",
             f"- Messages: {len(messages)}", ""]
    for message in messages:
        lines += ["---", "", f"### {role_label(message['role'])} · {utc_text(message['created_at'])}", "",
                  message["content"], ""]
    return "\n".join(lines)


def as_text(session: dict, messages: list[dict]) -> str:
    lines = [session["title"],
             f"Session: {session['id']}",
             f"Created: {utc_text(session['created_at'])}",
             f"Updated: {utc_text(session['updated_at'])}",
             f"Messages: {len(messages)}", ""]
    for message in messages:
        lines += [f"[{utc_text(message['created_at'])}] {role_label(message['role'])}:", message["content"], ""]
    return "\n".join(lines)


RENDERERS = {"json": as_json, "markdown": as_markdown, "txt": as_text}


def render(session: dict, messages: list[dict], export_format: str) -> str:
    return RENDERERS[export_format](session, messages)


def attachment_disposition(session: dict, export_format: str) -> str:
    """An ASCII `filename` from the session id for every client, and the title (often Chinese)
    as RFC 6266 `filename*` for those that read it."""
    extension = FORMATS[export_format][1]
    ascii_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", session["id"]).strip("._") or "session"
    title = re.sub(r'[\x00-\x1f\x7f/\\"]+', "_", session["title"]).strip() or ascii_name
    return (f'attachment; filename="{ascii_name}.{extension}"; '
            f"filename*=UTF-8''{quote(title + '.' + extension, safe='')}")
