// What every panel shares: same-origin JSON calls, a DOM builder that never parses HTML, the
// /ws push, notices, and the "service is down" banner. Plain ES module, no build step.

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
    this.errorType = this.body.errorType || "";
    this.hint = this.body.hint || "";
    this.fields = this.body.fields || {};
  }
}

/** fetch() a console path; JSON in and out. A FormData body is sent as multipart. */
export async function api(method, path, body) {
  const options = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body instanceof FormData) {
    options.body = body;
  } else if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    throw new ApiError(0, { error: "The console does not answer.", errorType: "console_unreachable",
                            hint: "Is the console still running? (bin/console.sh status)" });
  }
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new ApiError(response.status, typeof data === "object" ? data : { error: data });
  return data;
}

export const get = (path, query) => api("GET", withQuery(path, query));

export function withQuery(path, query) {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, value);
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** el("td", {class: "num", onclick: fn}, "text", child...) */
export function el(tag, attributes, ...children) {
  const svg = ["svg", "path", "line", "text", "g", "rect", "circle", "polyline", "title"].includes(tag);
  const node = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "value" && !svg) node.value = value;
    else if (key === "checked" && !svg) node.checked = Boolean(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

export function $(selector, root = document) { return root.querySelector(selector); }

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** A table; columns: [{title, value: row => text|Node, class}]. */
export function table(columns, rows, empty = "Nothing to show.") {
  if (!rows.length) return el("p", { class: "empty" }, empty);
  return el("div", { class: "table-wrap" },
    el("table", {},
      el("thead", {}, el("tr", {}, columns.map((column) => el("th", { class: column.class }, column.title)))),
      el("tbody", {}, rows.map((row) => el("tr", {}, columns.map((column) =>
        el("td", { class: column.class, "data-label": column.title }, column.value(row))))))));
}

// ------------------------------------------------------------------ formatting

export function when(value) {
  if (value === undefined || value === null || value === "") return "–";
  const date = typeof value === "number" ? new Date(value < 1e12 ? value * 1000 : value) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

export function duration(seconds) {
  if (!seconds) return "–";
  const s = Math.floor(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

export function bytes(value) {
  if (value === undefined || value === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let amount = Number(value);
  let unit = 0;
  while (amount >= 1024 && unit < units.length - 1) { amount /= 1024; unit += 1; }
  return `${amount.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

export function number(value, digits = 1) {
  if (value === undefined || value === null || Number.isNaN(Number(value))) return "–";
  return Number(value).toFixed(digits).replace(/\.0+$/, "");
}

export function badge(status) {
  return el("span", { class: `badge badge-${String(status).toLowerCase()}` }, String(status));
}

// ------------------------------------------------------------------ notices

export function notify(message, kind = "info") {
  const box = document.getElementById("toasts");
  const toast = el("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  box.append(toast);
  setTimeout(() => toast.remove(), kind === "error" ? 8000 : 4000);
}

/** The text of an error for a person: what went wrong, and what to do. */
export function explain(error) {
  if (error instanceof ApiError) return error.hint ? `${error.message} ${error.hint}` : error.message;
  return String(error && error.message ? error.message : error);
}

/** An error of a field checked in the page, shown the way the server's are. */
export function fieldError(field, message) {
  return new ApiError(400, { error: `${field}: ${message}`, errorType: "validation_error", fields: { [field]: [message] } });
}

/** Put each of an ApiError's field messages next to the form control of that name. */
export function showFieldErrors(form, error) {
  for (const old of form.querySelectorAll(".field-error")) old.remove();
  for (const old of form.querySelectorAll("[aria-invalid]")) old.removeAttribute("aria-invalid");
  if (!(error instanceof ApiError)) return false;
  let shown = false;
  const place = (field, messages) => {
    // A nested field may come back by its own name (`signing_secret` for `config.signing_secret`).
    const control = form.elements.namedItem(field) || form.querySelector(`[name$=".${CSS.escape(field)}"]`);
    if ((!control || !control.closest) && messages && typeof messages === "object" && !Array.isArray(messages)) {
      for (const [key, inner] of Object.entries(messages)) place(`${field}.${key}`, inner);
      return;
    }
    if (!control || !control.closest) return;
    control.setAttribute("aria-invalid", "true");
    control.closest("label, .field").append(el("span", { class: "field-error", role: "alert" }, flatten(messages).join(" ")));
    shown = true;
  };
  for (const [field, messages] of Object.entries(error.fields || {})) place(field, messages);
  return shown;
}

function flatten(messages, prefix = "") {
  if (Array.isArray(messages)) return messages.flatMap((message) => flatten(message, prefix));
  if (messages && typeof messages === "object") {
    return Object.entries(messages).flatMap(([key, value]) => flatten(value, `${prefix}${key}: `));
  }
  return [`${prefix}${messages}`];
}

/** Run `action` when the form is submitted; errors go next to fields or into a notice. */
export function onSubmit(form, action) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    showFieldErrors(form, null);
    try {
      await action(new FormData(form));
    } catch (error) {
      if (!showFieldErrors(form, error)) notify(explain(error), "error");
    } finally {
      if (button) button.disabled = false;
    }
  });
}

/** A button whose click runs `action`, disabled while it runs, errors as notices. */
export function actionButton(label, action, attributes = {}) {
  const button = el("button", { type: "button", ...attributes }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await action();
    } catch (error) {
      notify(explain(error), "error");
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// ------------------------------------------------------------------ push (/ws)

const listeners = new Map();
let socket = null;
let retry = 1000;

/** Call fn(message) for each pushed message of `type` (`log`, `status`, `stt-log`). */
export function onPush(type, fn) {
  if (!listeners.has(type)) listeners.set(type, []);
  listeners.get(type).push(fn);
  connect();
}

function pushState(text, kind) {
  const badgeNode = document.getElementById("push-state");
  if (!badgeNode) return;
  badgeNode.textContent = `live: ${text}`;
  badgeNode.className = `push-state push-${kind}`;
}

function connect() {
  if (socket) return;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws`);
  socket.addEventListener("open", () => { retry = 1000; pushState("on", "on"); });
  socket.addEventListener("message", (event) => {
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    for (const fn of listeners.get(message.type) || []) fn(message);
  });
  socket.addEventListener("close", () => {
    socket = null;
    pushState("reconnecting", "off");
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 15000);
  });
}

// ------------------------------------------------------------------ services a panel needs

let servicesCache = null;

export async function services() {
  const body = await get("/api/services");
  servicesCache = body.services;
  return body.services;
}

/**
 * Show the panel only while the services it needs run. Otherwise a banner names the stopped
 * ones and offers to start them (in order); `ready()` runs once all of them run, and again
 * after they come back.
 */
export function guard(ready) {
  const needs = (document.body.dataset.needs || "").split(" ").filter(Boolean);
  const banner = document.getElementById("service-banner");
  const body = document.getElementById("panel-body");
  let up = null;

  async function check(records) {
    const rows = records || await services();
    const down = needs.map((id) => rows.find((row) => row.id === id))
      .filter((row) => row && row.status !== "running");
    const nowUp = down.length === 0;
    if (nowUp === up) return;
    up = nowUp;
    if (nowUp) {
      banner.hidden = true;
      body.hidden = false;
      ready();
      return;
    }
    body.hidden = true;
    const names = down.map((row) => `${row.name} (${row.id}): ${row.status}`).join(", ");
    replace(banner,
      el("p", {}, el("strong", {}, "Service down. "),
        `This panel needs ${down.length > 1 ? "these services" : "this service"}, which ${down.length > 1 ? "are" : "is"} not running: ${names}.`),
      actionButton(`Start ${down.map((row) => row.name).join(", ")}`, async () => {
        for (const row of down) {
          notify(`Starting ${row.name}…`);
          await api("POST", `/api/services/${encodeURIComponent(row.id)}/start`);
        }
        await check();
      }, { class: "primary", id: "start-needed" }));
    banner.hidden = false;
  }

  if (!needs.length) { ready(); return; }
  onPush("status", () => { check().catch(() => {}); });
  check().catch((error) => notify(explain(error), "error"));
}

/** A proxy answered that its service is unreachable: re-check the banner. */
export function isServiceDown(error) {
  return error instanceof ApiError && (error.status === 502 || error.status === 503 || error.status === 504);
}

// ------------------------------------------------------------------ navigation on small screens

const toggle = document.getElementById("nav-toggle");
if (toggle) {
  toggle.addEventListener("click", () => {
    const open = document.body.classList.toggle("nav-open");
    toggle.setAttribute("aria-expanded", String(open));
  });
  const close = () => {
    document.body.classList.remove("nav-open");
    toggle.setAttribute("aria-expanded", "false");
  };
  document.getElementById("main").addEventListener("click", close);
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
}
onPush("status", () => {});  // every page shows whether live updates arrive

/** Previous/next buttons for an offset-paged list; `go(newOffset)` loads that page. */
export function pager(container, { offset, limit, total, go }) {
  replace(container);
  if (total <= limit && offset === 0) return;
  container.append(
    actionButton("Previous", () => go(Math.max(0, offset - limit)), { disabled: offset === 0 }),
    el("span", { class: "muted" }, `${total ? offset + 1 : 0}-${Math.min(offset + limit, total)} of ${total}`),
    actionButton("Next", () => go(offset + limit), { disabled: offset + limit >= total }));
}

/** Run `load` now and every `ms` while the panel is shown; errors become notices (once). */
export function every(ms, load) {
  let failing = false;
  const run = () => load().then(() => { failing = false; }, (error) => {
    if (!failing) notify(explain(error), "error");
    failing = true;
  });
  run();
  return setInterval(() => { if (!document.getElementById("panel-body").hidden) run(); }, ms);
}

/** A horizontal bar filled to `percent` (SVG: no inline style under the CSP). */
export function meter(percent) {
  const width = Math.max(0, Math.min(100, Number(percent) || 0));
  return el("div", { class: "meter", role: "meter", "aria-valuenow": width, "aria-valuemin": 0, "aria-valuemax": 100 },
    el("svg", { viewBox: "0 0 100 1", preserveAspectRatio: "none" }, el("rect", { x: 0, y: 0, width, height: 1 })));
}

/**
 * A table of `path`'s `items`, filtered by the form's user_id and paged by offset (the memory
 * service's lists); returns the function that (re)loads it.
 */
export function userPagedList({ form, path, items, columns, empty, count, list, pagerBox, limit = 50 }) {
  let offset = 0;
  async function load() {
    const body = await get(path, { user_id: form.user_id.value.trim(), limit, offset });
    count.textContent = `(${body.total})`;
    replace(list, table(columns, body[items], empty));
    pager(pagerBox, { offset, limit, total: body.total, go: async (next) => { offset = next; await load(); } });
  }
  onSubmit(form, async () => { offset = 0; await load(); });
  return load;
}

/** guard(), then `load` again every `ms` while the panel is shown (quietly: the banner says why it stops). */
export function guardEvery(ms, load) {
  let timer = null;
  guard(() => {
    load().catch((error) => notify(explain(error), "error"));
    if (!timer) timer = setInterval(() => { if (!document.getElementById("panel-body").hidden) load().catch(() => {}); }, ms);
  });
}
