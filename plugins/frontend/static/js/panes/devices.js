// Devices (docs/iot.md): each device a card, grouped by room, with its state and the controls
// its properties allow — a switch, a slider within the device's own range and step, a choice
// of its options, lock and unlock. `device_update` frames from the chat socket replace a card's
// device as it changes anywhere (another device, the assistant, an automation, drift).
import {clear, h} from "../dom.js";
import {busy, heading, ownId, statusLine} from "../ui.js";

function localized(names, fallback, language) {
  return (names && (names[language] || names.en)) || fallback;
}

function formatValue(value, spec) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number" && spec && spec.precision) {
    const digits = Math.max(0, -Math.floor(Math.log10(spec.precision)));
    value = value.toFixed(digits);
  }
  return spec && spec.unit ? `${value} ${spec.unit}` : String(value);
}

export function mount(root, app) {
  const {api, t} = app;
  const cards = new Map();          // device id -> {element, update(device)}
  let devices = [];
  const status = statusLine();
  const refresh = h("button", {type: "button", class: "quiet", "data-i18n": "devices.refresh"}, t("devices.refresh"));
  const rooms = h("div", {class: "rooms"});
  root.append(h("div", {class: "pane-body"}, heading(t, "devices.title", refresh), status, rooms));

  const label = (property) => t(`devices.prop_${property}`) === `devices.prop_${property}` ? property.replace(/_/g, " ")
    : t(`devices.prop_${property}`);

  async function operate(device, body, control) {
    const answer = await busy(app, control, () => api.send("POST", `/devices/${encodeURIComponent(device.id)}/operate`, body));
    if (answer && answer.device) replace(answer.device);
    else replace(devices.find((item) => item.id === device.id) || device);   // put a refused control back
  }

  // One card; update(device) sets every control from a device object without rebuilding it,
  // so a slider being dragged or a focused control keeps its place.
  function card(device) {
    const title = h("h4", {class: "card-title"});
    const online = h("span", {class: "badge"});
    const summary = h("p", {class: "meta device-summary"});
    const controls = h("div", {class: "device-controls"});
    const readings = h("dl", {class: "readings"});
    const element = h("article", {class: "tile device", "data-id": device.id, "data-type": device.type},
      h("div", {class: "device-head"}, h("span", {class: "device-icon", "aria-hidden": "true"}), title, online),
      summary, controls, readings);
    const setters = [];
    let current = device;
    const properties = device.properties || {};

    if (properties.locked && properties.locked.writable) {
      const lockButton = h("button", {type: "button", class: "primary", "data-action": "lock"});
      lockButton.addEventListener("click", () => {
        // Unlocking lets someone in: asked first, as the assistant asks (docs/ai-core.md, "Confirmation").
        const name = localized(current.names, current.name, app.language);
        if (current.state.locked && !confirm(t("devices.unlock_confirm", {name}))) return;
        operate(current, {action: "switch", value: !current.state.locked}, lockButton);
      });
      setters.push((item) => {
        const locked = Boolean(item.state.locked);
        lockButton.textContent = t(locked ? "devices.unlock" : "devices.lock");
        lockButton.setAttribute("aria-label", `${t(locked ? "devices.unlock" : "devices.lock")}: ${localized(item.names, item.name, app.language)}`);
      });
      controls.append(lockButton);
    }
    if (properties.on && properties.on.writable) {
      const toggle = h("button", {type: "button", class: "switch", role: "switch", "data-action": "power"},
        h("span", {class: "switch-track", "aria-hidden": "true"}), h("span", {class: "switch-label"}));
      toggle.addEventListener("click", () => operate(current, {action: "switch", value: !current.state.on}, toggle));
      setters.push((item) => {
        const on = Boolean(item.state.on);
        toggle.setAttribute("aria-checked", String(on));
        toggle.setAttribute("aria-label", `${t("devices.power")}: ${localized(item.names, item.name, app.language)}`);
        toggle.querySelector(".switch-label").textContent = t(on ? "devices.on" : "devices.off");
      });
      controls.append(toggle);
    }
    for (const [name, spec] of Object.entries(properties)) {
      if (!spec.writable || name === "on" || name === "locked") continue;
      if ((spec.type === "int" || spec.type === "number") && spec.min !== undefined && spec.max !== undefined) {
        const range = h("input", {type: "range", min: spec.min, max: spec.max, step: spec.step || (spec.type === "int" ? 1 : "any"),
          "data-property": name});
        const output = h("output", {class: "range-value"});
        const caption = h("span", {});
        range.addEventListener("input", () => { output.textContent = formatValue(Number(range.value), spec); });
        range.addEventListener("change", () => {
          const value = spec.type === "int" ? Math.round(Number(range.value)) : Number(range.value);
          operate(current, {action: "set", property: name, value}, null);
        });
        setters.push((item) => {
          caption.textContent = label(name);
          range.setAttribute("aria-label", `${label(name)}: ${localized(item.names, item.name, app.language)}`);
          if (!range.matches(":active")) range.value = item.state[name] ?? spec.min;
          output.textContent = formatValue(item.state[name], spec);
        });
        controls.append(h("label", {class: "range-field"}, caption, range, output));
      } else if (spec.type === "enum" && spec.options) {
        const select = h("select", {"data-property": name}, spec.options.map((option) => h("option", {value: option}, option)));
        const caption = h("span", {});
        select.addEventListener("change", () => operate(current, {action: "set", property: name, value: select.value}, select));
        setters.push((item) => {
          caption.textContent = label(name);
          for (const option of select.options) {
            const key = `devices.option_${option.value}`;
            option.textContent = t(key) === key ? option.value : t(key);
          }
          select.value = item.state[name] ?? "";
        });
        controls.append(h("label", {class: "select-field"}, caption, select));
      }
    }
    const readOnly = Object.entries(properties).filter(([, spec]) => !spec.writable);

    function update(item) {
      current = item;
      title.textContent = localized(item.names, item.name, app.language);
      online.textContent = t(item.online ? "devices.online" : "devices.offline");
      online.classList.toggle("warning", !item.online);
      element.classList.toggle("offline", !item.online);
      element.classList.toggle("active", Boolean(item.state.on) || item.state.locked === false);
      summary.textContent = describe(item);
      for (const setter of setters) setter(item);
      clear(readings);
      for (const [name, spec] of readOnly) readings.append(h("dt", {}, label(name)), h("dd", {}, formatValue(item.state[name], spec)));
      readings.hidden = !readOnly.length;
      for (const control of controls.querySelectorAll("button, input, select")) control.disabled = !item.online;
    }
    update(device);
    return {element, update};
  }

  function describe(device) {
    const state = device.state || {};
    if ("locked" in state) return t(state.locked ? "devices.locked" : "devices.unlocked");
    if ("position" in state) return t("devices.position_is", {value: state.position});
    if ("on" in state) return t(state.on ? "devices.on" : "devices.off");
    return "";
  }

  function render() {
    clear(rooms);
    cards.clear();
    const byRoom = new Map();
    for (const device of devices) {
      if (!byRoom.has(device.room)) byRoom.set(device.room, []);
      byRoom.get(device.room).push(device);
    }
    if (!devices.length) rooms.append(h("p", {class: "muted"}, t("devices.empty")));
    for (const [room, members] of byRoom) {
      const grid = h("div", {class: "device-grid"});
      for (const device of members) {
        const built = card(device);
        cards.set(device.id, built);
        grid.append(built.element);
      }
      rooms.append(h("section", {class: "room", "data-room": room, "aria-label": localized(members[0].room_names, room, app.language)},
        h("h3", {}, localized(members[0].room_names, room, app.language)), grid));
    }
  }

  function replace(device) {
    const index = devices.findIndex((item) => item.id === device.id);
    if (index === -1) { devices.push(device); render(); return; }
    devices[index] = device;
    const built = cards.get(device.id);
    if (built) built.update(device); else render();
  }

  async function load() {
    await busy(app, refresh, async () => {
      try {
        const answer = await api.get("/devices", {user_id: ownId(app)});
        devices = answer.devices || [];
        status.textContent = "";
        render();
      } catch (error) {
        status.textContent = error.hint ? `${error.message} — ${error.hint}` : error.message;
      }
    });
  }

  refresh.addEventListener("click", load);
  const offUpdate = app.socket.on("device_update", (frame) => { if (frame.device) replace(frame.device); });
  // After a dropped connection the missed changes are not replayed: read the states again.
  const offState = app.socket.on("state", (state) => { if (state === "open" && !root.hidden && devices.length) load(); });
  const offLanguage = app.onLanguage(() => render());
  return {show: load, unmount() { offUpdate(); offState(); offLanguage(); }};
}
