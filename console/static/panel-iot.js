// IoT Devices: the simulated devices' state, switching and setting their properties, and each
// device's operation history (through the IoT debug service). Refreshed every 5 s.
import { $, actionButton, api, badge, el, explain, get, guardEvery, notify, onSubmit, replace, table, when } from "./console.js";

let devices = [];
// Each person has their own simulated home; the administrator's also holds the MQTT devices.
const owner = () => $("#iot-owner").user_id.value.trim() || "admin";
const devicePath = (device, action) =>
  `/api/iot/devices/${encodeURIComponent(device.id)}/${action}?user_id=${encodeURIComponent(owner())}`;

function describe(spec) {
  if (spec.type === "bool") return "true or false";
  if (spec.options) return spec.options.join(", ");
  if (spec.min !== undefined) return `${spec.min}–${spec.max}${spec.unit ? ` ${spec.unit}` : ""}`;
  return spec.type;
}

function valueOf(spec, text) {
  if (spec.type === "bool") return text === "true";
  if (spec.type === "int" || spec.type === "number") return Number(text);
  return text;
}

function control(device) {
  const writable = Object.entries(device.properties || {}).filter(([, spec]) => spec.writable && spec.type !== "bool");
  const form = el("form", { class: "inline", "data-device": device.id },
    el("label", {}, "Property", el("select", { name: "property" },
      writable.map(([name, spec]) => el("option", { value: name }, `${name} (${describe(spec)})`)))),
    el("label", {}, "Value", el("input", { name: "value", size: 8, required: true })),
    el("button", { type: "submit" }, "Set"));
  // The chosen property's current value, as a hint in the empty field.
  const [property, value] = ["property", "value"].map((name) => form.elements.namedItem(name));
  const hint = () => { value.placeholder = `now ${device.state[property.value] ?? "–"}`; };
  property.addEventListener("change", hint);
  if (writable.length) hint();
  onSubmit(form, async (data) => {
    const property = data.get("property");
    const body = await api("POST", devicePath(device, "operate"),
      { action: "set", property, value: valueOf(device.properties[property], data.get("value")), source: "console" });
    notify(`${device.name}: ${property} set`, "ok");
    update(body.device);
  });
  return writable.length ? form : null;
}

function card(device) {
  const switchable = device.properties && (device.properties.on || device.properties.locked);
  const switchKey = device.properties && device.properties.on ? "on" : "locked";
  const isOn = device.state && device.state[switchKey];
  return el("div", { class: "card device", "data-device": device.id },
    el("h3", {}, device.name, " ", badge(device.online ? "online" : "offline")),
    el("div", { class: "muted" }, `${(device.room_names && device.room_names.en) || device.room} · ${device.type}`),
    el("dl", {}, Object.entries(device.state || {}).map(([key, value]) => [
      el("dt", {}, key),
      el("dd", {}, value === null ? "–" : `${value}${(device.properties[key] && device.properties[key].unit) || ""}`)])),
    el("div", { class: "actions" },
      switchable && device.properties[switchKey].writable ? actionButton(
        switchKey === "on" ? (isOn ? "Switch off" : "Switch on") : (isOn ? "Unlock" : "Lock"),
        async () => {
          const body = await api("POST", devicePath(device, "operate"),
            { action: "switch", value: !isOn, source: "console" });
          update(body.device);
        }, { class: "primary", "data-switch": device.id }) : null,
      actionButton("History", () => history(device))),
    control(device));
}

function update(device) {
  devices = devices.map((known) => (known.id === device.id ? device : known));
  render();
}

function render() {
  const room = $("#iot-room").value;
  const shown = devices.filter((device) => !room || device.room === room);
  $("#iot-summary").textContent = `${shown.length} device(s), ${shown.filter((d) => d.online).length} online`;
  replace($("#iot-devices"), shown.map(card));
}

async function history(device) {
  $("#iot-history-title").textContent = `Operation history: ${device.name} (${owner()})`;
  const body = await get(`/api/iot/devices/${encodeURIComponent(device.id)}/history`, { limit: 50, user_id: owner() });
  replace($("#iot-history"), table([
    { title: "When", value: (op) => when(op.created_at) },
    { title: "Action", value: (op) => op.action },
    { title: "Changes", class: "wrap", value: (op) => Object.entries(op.changes || {})
      .map(([key, change]) => `${key}: ${change && typeof change === "object" && "from" in change ? `${change.from} → ${change.to}` : JSON.stringify(change)}`).join("; ") || "(none)" },
    { title: "By", value: (op) => `${op.source} (${op.actor})` },
    { title: "Result", value: (op) => (op.success ? badge("ok") : el("span", { class: "field-error" }, op.error || "failed")) },
  ], body.operations || [], "No operations yet."));
}

async function load() {
  const body = await get("/api/iot/devices", { user_id: owner() });
  devices = body.devices || [];
  const select = $("#iot-room");
  if (select.options.length === 1) {
    const rooms = new Map(devices.map((d) => [d.room, (d.room_names && d.room_names.en) || d.room]));
    for (const [id, name] of rooms) select.append(el("option", { value: id }, name));
  }
  if (!document.activeElement || !document.activeElement.closest("#iot-devices form")) render();
}

onSubmit($("#iot-owner"), load);
$("#iot-room").addEventListener("change", render);
$("#iot-reload").addEventListener("click", () => load().catch((error) => notify(explain(error), "error")));
guardEvery(5000, load);
