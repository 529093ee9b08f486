"""The simulated climate step by step (simulation.Weather, no service): the bedroom sensors follow
the bedroom AC by its mode, drift towards the ambient values while it is off, and a state change
is reported only when the rounded value changes."""
from __future__ import annotations

from datetime import datetime, timezone

from plugins.iot.simulation import Weather

NOON = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def run(weather: Weather, ac: dict, temperature: float, humidity: int, steps: int) -> list[dict]:
    states = {"bedroom_ac": ac, "bedroom_temperature": {"temperature": temperature},
              "bedroom_humidity": {"humidity": humidity}}
    reports = []
    for _ in range(steps):
        changed = weather.step("alice", states, NOON)
        reports.append(changed)
        for device_id, values in changed.items():
            states[device_id] = {**states[device_id], **values}
    return reports


def temperatures(reports: list[dict]) -> list[float]:
    return [r["bedroom_temperature"]["temperature"] for r in reports if "bedroom_temperature" in r]


def test_cooling_brings_the_temperature_down_to_the_target_and_no_further():
    reports = run(Weather(seed=1), {"on": True, "mode": "cool", "target_temperature": 22}, 28.0, 60, 60)
    seen = temperatures(reports)
    reached = seen.index(22.0)
    assert seen[:reached + 1] == sorted(seen[:reached + 1], reverse=True) and seen[0] < 28.0
    # Then it holds the target as a thermostat does: the room warms a little, the AC cools it back.
    assert all(22.0 <= value <= 22.3 for value in seen[reached:])
    humidity = [r["bedroom_humidity"]["humidity"] for r in reports if "bedroom_humidity" in r]
    assert humidity == sorted(humidity, reverse=True) and humidity[-1] == 42  # 0.3 % a tick, to 40 at most


def test_heating_and_auto_go_up_but_cooling_below_the_target_does_not():
    for mode in ("heat", "auto"):
        warmed = temperatures(run(Weather(seed=2), {"on": True, "mode": mode, "target_temperature": 26}, 20.0, 55, 3))
        assert warmed[-1] > 21, mode
    cool_below = temperatures(run(Weather(seed=2), {"on": True, "mode": "cool", "target_temperature": 26},
                                  20.0, 55, 3))
    assert all(19.9 <= value < 21 for value in cool_below)  # only the room's slow drift towards ambient


def test_with_the_ac_off_the_room_drifts_towards_the_ambient_temperature_and_humidity():
    ambient = Weather.ambient_temperature(NOON)
    reports = run(Weather(seed=3), {"on": False, "mode": "cool", "target_temperature": 16}, 35.0, 90, 40)
    seen = temperatures(reports)
    assert seen[-1] < 32 and abs(seen[-1] - ambient) < abs(35.0 - ambient)
    humidity = [r["bedroom_humidity"]["humidity"] for r in reports if "bedroom_humidity" in r]
    assert humidity[-1] < 80


def test_dry_mode_dries_the_air_fast_and_only_rounded_changes_are_reported():
    reports = run(Weather(seed=4), {"on": True, "mode": "dry", "target_temperature": 26}, 26.0, 50, 20)
    humidity = [r["bedroom_humidity"]["humidity"] for r in reports if "bedroom_humidity" in r]
    assert humidity[:3] == [49, 48, 47] and humidity[-1] == 35
    # At the floor nothing changes any more: no report.
    assert "bedroom_humidity" not in reports[-1]


def test_the_living_room_is_read_by_its_air_conditioner_and_the_bedroom_sensor_and_ac_agree():
    weather = Weather(seed=5)
    states = {"living_room_ac": {"on": True, "mode": "heat", "target_temperature": 30, "temperature": 27.0},
              "bedroom_ac": {"on": False, "mode": "cool", "target_temperature": 26, "temperature": 26.5},
              "bedroom_temperature": {"temperature": 26.5}, "bedroom_humidity": {"humidity": 55}}
    living = []
    for _ in range(12):
        changed = weather.step("alice", states, NOON)
        for device_id, values in changed.items():
            states[device_id] = {**states[device_id], **values}
        living.append(states["living_room_ac"]["temperature"])
        assert states["bedroom_ac"]["temperature"] == states["bedroom_temperature"]["temperature"]
        assert set(changed.get("living_room_ac", {})) <= {"temperature"}  # only the reading moves
    assert living == sorted(living) and living[0] > 27.0 and living[-1] > 28.0  # heating crosses 28 °C
