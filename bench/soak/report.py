"""What the soak prints at its end: per-kind latencies and errors, the schedules' outcome, each
service's samples a minute apart, and the targets, each met or not."""
from __future__ import annotations

import argparse
import os
import platform
import statistics
from datetime import datetime, timezone
from typing import Callable

from bench.soak.load import REST_KINDS, Load, Recorder
from bench.support import percentile

NO_SAMPLE = (0, 0, 0, 0)  # a service missing from a sample: (MB, files, database connections, accepted)


def report(recorder: Recorder, samples: list[dict], schedules: dict, load: Load, args: argparse.Namespace) -> bool:
    """Prints the whole report; whether every target was met."""
    print()
    print(f"Soak of {args.minutes:g} minutes, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    rest_latencies = print_latencies(recorder)
    print_schedules(recorder, schedules, load)
    services = list(samples[-1]["services"]) if samples else []
    print_samples(samples, services)
    met = targets(recorder, samples, services, schedules, rest_latencies, args)
    print()
    for name, ok, detail in met:
        print(f"- {name}: {'met' if ok else 'NOT met'} ({detail})")
    return all(ok for _, ok, _ in met)


def print_latencies(recorder: Recorder) -> list[float]:
    """The table of kinds, with a last row of every REST kind together; the REST latencies."""
    print()
    print("| kind | count | p50 ms | p95 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    rest_latencies: list[float] = []
    for kind in sorted(set(recorder.latencies) | set(recorder.errors)):
        values = recorder.latencies.get(kind, [])
        if kind in REST_KINDS:
            rest_latencies += values
        print(f"| {kind} | {len(values)} | {percentile(values, 50):.1f} | {percentile(values, 95):.1f} | "
              f"{percentile(values, 99):.1f} | {recorder.errors.get(kind, 0)} |")
    print(f"| **REST, all kinds** | {len(rest_latencies)} | {percentile(rest_latencies, 50):.1f} | "
          f"{percentile(rest_latencies, 95):.1f} | {percentile(rest_latencies, 99):.1f} | "
          f"{sum(recorder.errors.get(kind, 0) for kind in REST_KINDS)} |")
    return rest_latencies


def print_schedules(recorder: Recorder, schedules: dict, load: Load) -> None:
    print()
    print(f"Schedules: {schedules['reminders fired']} of {schedules['reminders due']} reminders due fired; "
          f"the every-minute rule ran {schedules['rule runs']} times; {load.notifications} notification frames "
          f"reached the devices.")
    if recorder.examples:
        print("First errors:")
        for example in recorder.examples:
            print("  " + example)


def print_samples(samples: list[dict], services: list[str]) -> None:
    """Memory, files and connections over time: one row a minute (the sample nearest each), and
    the last, taken once the load stopped."""
    print()
    print("| minute | " + " | ".join(services) + " |")
    print("|---|" + "---|" * len(services))
    shown = []
    for minute in range(int(samples[-1]["minute"]) + 1 if samples else 0):
        nearest = min(samples[:-1] or samples, key=lambda sample: abs(sample["minute"] - minute))
        if nearest not in shown:
            shown.append(nearest)
    for sample in [*shown, samples[-1]] if samples else []:
        cells = [f"{rss:.0f} MB, {files} f, {connections} c" for rss, files, connections, _ in
                 (sample["services"].get(service, NO_SAMPLE) for service in services)]
        label = f"{sample['minute']:.1f}" + (" (load stopped)" if sample is samples[-1] else "")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("(MB resident; f open files; c database connections, pg_stat_activity by application_name; "
          "each service's processes, the database server left out)")


def own_files(values: tuple) -> int:
    """Open files but the sockets judged elsewhere: database connections (their own target) and
    connections accepted from clients (their keep-alive pools: counted in the client's files)."""
    _, files, connections, accepted = values
    return int(files - connections - accepted)


def grew(after: list[dict], service: str, value: Callable[[tuple], int]) -> bool:
    """A leak climbs: the last fifth's median above the peak of the first fifth after the
    warm-up by more than 10 % and more than 2."""
    window = max(1, len(after) // 5)
    before = max(value(sample["services"].get(service, NO_SAMPLE)) for sample in after[:window])
    now = statistics.median(value(sample["services"].get(service, NO_SAMPLE)) for sample in after[-window:])
    return now > before * 1.1 and now > before + 2


def targets(recorder: Recorder, samples: list[dict], services: list[str], schedules: dict,
            rest_latencies: list[float], args: argparse.Namespace) -> list[tuple[str, bool, str]]:
    """(target, met, what was measured), over the samples taken under load (the last one is
    taken once it stopped)."""
    warm = min(5.0, args.minutes / 3)
    loaded = samples[:-1] if len(samples) > 2 else samples
    after = [sample for sample in loaded if sample["minute"] >= warm] or loaded
    first, last = after[0], loaded[-1]
    errors = sum(recorder.errors.values())
    rest_p95 = percentile(rest_latencies, 95)
    growth = {service: (last["services"][service][0] - first["services"][service][0]) / first["services"][service][0]
              for service in services if service in first["services"] and first["services"][service][0]}
    files_grew = [service for service in services if grew(after, service, own_files)]
    connections_grew = [service for service in services if grew(after, service, lambda values: int(values[2]))]
    return [
        ("no error", errors == 0, f"{errors} errors"),
        ("REST p95 under 300 ms", rest_p95 < 300, f"{rest_p95:.1f} ms"),
        (f"memory growth under 10 % from minute {warm:.1f} to the end", all(g < 0.10 for g in growth.values()),
         ", ".join(f"{service} {g * 100:+.1f} %" for service, g in growth.items())),
        ("no growth of open files (net of database and accepted connections)", not files_grew,
         ", ".join(files_grew) or "none grew"),
        ("no growth of database connections", not connections_grew, ", ".join(connections_grew) or "none grew"),
        ("every reminder due fired, the rule ran each minute",
         schedules["reminders fired"] == schedules["reminders due"]
         and (schedules["rule runs"] or 0) >= int(args.minutes) - 1,
         f"{schedules['reminders fired']}/{schedules['reminders due']}, {schedules['rule runs']} runs"),
    ]
