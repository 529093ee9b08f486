"""Every typed key the console stores on its application."""
from __future__ import annotations

from aiohttp import web

from .logstore import LogStore
from .push import PushHub, SttLog
from .supervisor import Supervisor

SUPERVISOR = web.AppKey("console_supervisor", Supervisor)
PUSH = web.AppKey("console_push", PushHub)
LOGS = web.AppKey("console_logs", LogStore)
STT_LOG = web.AppKey("console_stt_log", SttLog)
STARTED = web.AppKey("console_started", float)  # time.monotonic() at start, for uptime
CREDENTIAL = web.AppKey("console_credential", str)  # empty: loopback only, none asked
