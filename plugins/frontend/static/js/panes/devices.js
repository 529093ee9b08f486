// Devices: each device's state with controls for its writable properties; live over device_update.
import {clear, h} from "../dom.js";

export function mount(root, app) {
  const {api, t} = app;
  const grid = h("div", {class: "device-grid"});
  root.append(h("div", {class: "page"}, h("header", {class: "page-header"}, h("h2", {}, t("nav.devices"))), grid));
  const cards = new Map();

  const localName = (names, fallback) => (names && (names[app.language] || names.en)) || fallback;

  async function operate(device, body) {
    try {
      await api.send("POST", `/devices/${encodeURIComponent(device.id)}/operate`, body);
      const answer = await api.get(`/devices/${encodeURIComponent(device.id)}`);
      render(answer.device);
    } catch (error) { app.toast(error.message, {level: "error"}); }
  }

  function control(device, key, spec) {
    const value = (device.state || {})[key];
    const label = `${key.replace(/_/g, " ")}${spec.unit ? ` (${spec.unit})` : ""}`;
    if (!spec.writable || !device.online) return h("div", {class: "reading"}, h("span", {}, label), h("strong", {}, value === null || value === undefined ? "—" : String(value)));
    if (spec.type === "bool") {
      const box = h("input", {type: "checkbox", role: "switch", checked: Boolean(value), "aria-label": `${localName(device.names, device.name)} ${key}`});
      box.addEventListener("change", () => operate(device, key === "on" || key === "locked"
        ? {action: "switch", value: box.checked} : {action: "set", property: key, value: box.checked}));
      return h("label", {class: "reading"}, h("span", {}, label), box);
    }
    if (spec.type === "enum") {
      const select = h("select", {"aria-label": label}, ...(spec.options || []).map((option) => h("option", {value: option, selected: option === value}, option)));
      select.addEventListener("change", () => operate(device, {action: "set", property: key, value: select.value}));
      return h("label", {class: "reading"}, h("span", {}, label), select);
    }
    if (spec.type === "int" || spec.type === "number") {
      const range = h("input", {type: "range", min: spec.min ?? 0, max: spec.max ?? 100, step: spec.step ?? (spec.type === "int" ? 1 : 0.5),
        value: value ?? spec.min ?? 0, "aria-label": label});
      const shown = h("output", {}, String(value ?? ""));
      range.addEventListener("input", () => { shown.textContent = range.value; });
      range.addEventListener("change", () => operate(device, {action: "set", property: key, value: Number(range.value)}));
      return h("label", {class: "reading"}, h("span", {}, label), range, shown);
    }
    return h("div", {class: "reading"}, h("span", {}, label), h("strong", {}, String(value ?? "—")));
  }

  function render(device) {
    const card = h("article", {class: `item device${device.online ? "" : " offline"}`},
      h("strong", {}, localName(device.names, device.name)),
      h("span", {class: "muted"}, ` · ${localName(device.room_names, device.room)}`),
      ...Object.entries(device.properties || {}).map(([key, spec]) => control(device, key, spec)));
    const old = cards.get(device.id);
    cards.set(device.id, card);
    if (old) old.replaceWith(card); else grid.append(card);
  }

  async function load() {
    try {
      const answer = await api.get("/devices");
      clear(grid);
      cards.clear();
      if (!answer.devices.length) grid.append(h("p", {class: "muted"}, t("dev.empty")));
      for (const device of answer.devices) render(device);
    } catch (error) { clear(grid).append(h("p", {class: "muted"}, error.message)); }
  }

  const off = app.socket.on("device_update", async (frame) => {
    if (!cards.has(frame.device_id)) return;
    try { render((await api.get(`/devices/${encodeURIComponent(frame.device_id)}`)).device); } catch (error) { /* next update */ }
  });
  return {show: load, unmount: off};
}
