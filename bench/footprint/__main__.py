"""The stack's memory (issue 44): the proportional set size (PSS: each shared page divided among
the processes that map it) of every process of `bin/console.sh start --fresh`, at three moments:

1. idle after a fresh start (after `--rest` seconds, 30 by default);
2. after one voice round trip (a recording transcribed, a sentence spoken, through the gateway)
   and one knowledge search (a document added to a new base, then searched);
3. once the models were idle for their release time (`[core] model_idle_seconds`, 600 by
   default; `--idle-seconds 60` runs it short, set through configuration for this run only).

The stack is the real one (the console, all eight services, the embedded PostgreSQL and the
gateway's bus), started from this checkout on free ports in a temporary DATA_DIR, and stopped at
the end. PSS is read by psutil from /proc/PID/smaps (Linux only).

    .venv/bin/python -m bench.footprint [--rest 30] [--idle-seconds 600]

Prints a Markdown table; bench/README.md keeps the last one."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import psutil

from bench.support import free_port
from gateway.config import PROJECT_ROOT

MIB = 1024 * 1024
RECORDING = PROJECT_ROOT / "bench" / "voice" / "recordings" / "audioeval-en-quick_brown_fox.wav"
TARGETS = {"idle after a fresh start": 600, "after voice and knowledge": 1000, "after the idle time": 700}
# Knowledge: a few paragraphs, indexed before the answer (short documents are).
DOCUMENT = ("The boiler in the cellar is serviced every October by Meyer Heating. "
            "Its pressure should read between 1.2 and 1.8 bar; below 1 bar, top it up at the blue valve. "
            "The spare key to the garden shed hangs on the hook behind the kitchen door.")


def stack_configuration(scratch: Path, idle_seconds: float | None) -> dict[str, str]:
    """A copy of conf/ with free ports, a DATA_DIR, and the environment the console runs in."""
    conf = scratch / "conf"
    conf.mkdir()
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    table = (PROJECT_ROOT / "conf" / "services.toml").read_text()
    conf.joinpath("services.toml").write_text(re.sub(r"(?m)^port = \d+$", lambda _: f"port = {free_port()}", table))
    extra = scratch / "footprint.toml"
    # A loaded machine starts services slowly: more time than the console's 60 s to come up.
    extra.write_text("[console]\nhealth_timeout = 600\n"
                     + (f"[core]\nmodel_idle_seconds = {idle_seconds}\n" if idle_seconds is not None else ""))
    environment = {key: value for key, value in os.environ.items()
                   if not key.endswith("_URL") and key not in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL")}
    environment.update(GATEWAY_CONF_DIR=str(conf), GATEWAY_CONFIG=str(extra), DATA_DIR=str(scratch / "data"),
                       ADMIN_PASSWORD="footprint-" + uuid.uuid4().hex[:12], CONSOLE_PORT=str(free_port()),
                       PYTHONPATH=str(PROJECT_ROOT))
    return environment


def console(arguments: list[str], environment: dict[str, str], timeout: float) -> str:
    done = subprocess.run([sys.executable, "-m", "console", *arguments], env=environment, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"console {' '.join(arguments)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def label(process: psutil.Process) -> str:
    """What a process of the stack is, from its command line."""
    command = process.cmdline()
    if "--service" in command:
        service = command[command.index("--service") + 1]
        if "--worker-index" in command:
            return f"{service} worker {command[command.index('--worker-index') + 1]}"
        return f"{service} (parent)" if service == "gateway" else service
    if command[1:3] == ["-m", "console"]:
        return "console"
    name = process.name()
    if "redis" in name:
        return "bus (redis-server)"
    if "postgres" in name or "postgres" in " ".join(command[:1]):
        return "postgresql"
    return name


def stack_processes(data_dir: Path) -> list[psutil.Process]:
    """The console and every process below it, and the embedded PostgreSQL and its children."""
    state = json.loads((data_dir / "console" / "console.json").read_text())
    root = psutil.Process(state["pid"])
    processes = [root, *root.children(recursive=True)]
    postmaster = data_dir / "postgres" / "postmaster.pid"
    if postmaster.exists():
        server = psutil.Process(int(postmaster.read_text().split("\n", 1)[0]))
        processes += [server, *server.children(recursive=True)]
    return list({process.pid: process for process in processes}.values())


def measure(data_dir: Path) -> dict[str, float]:
    """MiB of PSS per kind of process (PostgreSQL's processes summed), and the total."""
    sizes: dict[str, float] = {}
    for process in stack_processes(data_dir):
        try:
            name, pss = label(process), process.memory_full_info().pss / MIB
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        sizes[name] = sizes.get(name, 0.0) + pss
        sizes.setdefault("processes", 0)
        sizes["processes"] += 1
    sizes["total"] = sum(value for key, value in sizes.items() if key != "processes")
    return sizes


def request(url: str, *, token: str = "", body: dict | None = None, data: bytes | None = None,
            content_type: str = "application/json", timeout: float = 300) -> bytes:
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = json.dumps(body).encode() if body is not None else data
    with urllib.request.urlopen(urllib.request.Request(url, data=payload, headers=headers,
                                                       method="POST" if payload is not None else "GET"),
                                timeout=timeout) as answer:
        return answer.read()


def gateway_url(conf: Path) -> str:
    port = re.search(r'id = "gateway"\n(?:.*\n)*?port = (\d+)', (conf / "services.toml").read_text())
    assert port, "no gateway in the service table"
    return f"http://127.0.0.1:{port.group(1)}/api/v1"


def use_voice_and_knowledge(base: str, password: str) -> dict[str, float]:
    """One voice round trip and one knowledge search; the seconds each took."""
    token = json.loads(request(f"{base}/auth/login", body={"username": "admin", "password": password}))["token"]
    boundary = uuid.uuid4().hex
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"audio\"; filename=\"speech.wav\"\r\n"
                 f"Content-Type: audio/wav\r\n\r\n").encode() + RECORDING.read_bytes() + \
        f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n--{boundary}--\r\n".encode()
    timings = {}
    started = time.perf_counter()
    text = json.loads(request(f"{base}/voice/transcribe", token=token, data=multipart,
                              content_type=f"multipart/form-data; boundary={boundary}"))["text"]
    audio = request(f"{base}/voice/tts", token=token, body={"text": text or "Hello there.", "language": "en"})
    timings["voice round trip s"] = time.perf_counter() - started
    assert text and len(audio) > 1000, (text, len(audio))
    started = time.perf_counter()
    knowledge = json.loads(request(f"{base}/knowledge/bases", token=token, body={"name": "footprint"}))
    request(f"{base}/knowledge/bases/{knowledge['id']}/documents", token=token,
            body={"title": "The house", "content": DOCUMENT})
    found = json.loads(request(f"{base}/knowledge/search", token=token,
                               body={"query": "where is the shed key?", "kb_ids": [knowledge["id"]]}))
    timings["knowledge add + search s"] = time.perf_counter() - started
    assert found["chunks"], found
    return timings


def table(moments: dict[str, dict[str, float]]) -> str:
    names = sorted({name for sizes in moments.values() for name in sizes if name not in ("total", "processes")})
    lines = ["| process | " + " | ".join(moments) + " |", "|---" * (len(moments) + 1) + "|"]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{sizes.get(name, 0):.0f}" for sizes in moments.values()) + " |")
    lines.append("| **total (MiB PSS)** | " + " | ".join(f"**{sizes['total']:.0f}**" for sizes in moments.values()) + " |")
    lines.append("| target | " + " | ".join(f"≤ {TARGETS.get(moment, 0)}" for moment in moments) + " |")
    lines.append("| processes | " + " | ".join(f"{sizes['processes']:.0f}" for sizes in moments.values()) + " |")
    return "\n".join(lines)


def run(rest: float, idle_seconds: float | None, keep: bool) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-footprint-"))
    environment = stack_configuration(scratch, idle_seconds)
    data_dir = Path(environment["DATA_DIR"])
    moments: dict[str, dict[str, float]] = {}
    try:
        started = time.perf_counter()
        console(["start", "--fresh"], environment, timeout=900)
        print(f"stack started in {time.perf_counter() - started:.0f}s; resting {rest:g}s", file=sys.stderr)
        time.sleep(rest)
        moments["idle after a fresh start"] = measure(data_dir)
        timings = use_voice_and_knowledge(gateway_url(scratch / "conf"), environment["ADMIN_PASSWORD"])
        time.sleep(2)
        moments["after voice and knowledge"] = measure(data_dir)
        wait = (idle_seconds if idle_seconds is not None else 600) * 1.5 + 15
        print(f"used: {timings}; waiting {wait:g}s for the idle release", file=sys.stderr)
        time.sleep(wait)
        moments["after the idle time"] = measure(data_dir)
    finally:
        try:
            console(["stop"], environment, timeout=300)
        finally:
            if not keep:
                shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()
    print(f"footprint, {psutil.cpu_count()} CPUs, Python {sys.version.split()[0]}, load {load[0]:.1f}; "
          f"rest {rest:g}s, idle release {idle_seconds if idle_seconds is not None else 'default'}s; "
          f"{', '.join(f'{key} {value:.1f}' for key, value in timings.items())}\n")
    print(table(moments))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rest", type=float, default=30.0, help="Seconds of rest after the start (default 30).")
    parser.add_argument("--idle-seconds", type=float, default=None,
                        help="The models' idle release time for this run (default: the configured one, 600).")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary DATA_DIR (its logs).")
    arguments = parser.parse_args()
    if not Path("/proc/self/smaps").exists():
        raise SystemExit("PSS is read from /proc/PID/smaps: Linux only")
    run(arguments.rest, arguments.idle_seconds, arguments.keep)


if __name__ == "__main__":
    main()
