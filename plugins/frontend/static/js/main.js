// The shell: sign-in, the top bar, the panes and the toasts. Each pane is a module under
// panes/ exporting mount(root, app); see docs/web-client.md for the `app` it is handed.
import {ApiClient, ApiError} from "./api.js";
import {ChatSocket} from "./socket.js";
import {LANGUAGES, language, onLanguage, setLanguage, t, translate} from "./i18n.js";
import {h} from "./dom.js";
import {disablePush, followNotificationClicks, resyncPush} from "./push.js";

// Add a pane here (and its module under panes/): the top bar lists them in this order.
export const PANES = [
  {name: "chat", label: "nav.chat", load: () => import("./panes/chat.js")},
  {name: "inbox", label: "nav.inbox", load: () => import("./panes/inbox.js")},
  {name: "reminders", label: "nav.reminders", load: () => import("./panes/reminders.js")},
  {name: "memories", label: "nav.memories", load: () => import("./panes/memories.js")},
  {name: "knowledge", label: "nav.knowledge", load: () => import("./panes/knowledge.js")},
  {name: "devices", label: "nav.devices", load: () => import("./panes/devices.js")},
];

const api = new ApiClient();
const socket = new ChatSocket(api);
const $ = (selector) => document.querySelector(selector);
const mounted = new Map();   // name -> {root, handle}
let currentPane = null;

function toast(text, {level = "info", timeout = 6000, title = ""} = {}) {
  const close = h("button", {type: "button", class: "icon", "aria-label": t("toast.close")}, "×");
  const item = h("div", {class: `toast ${level}`, role: level === "error" ? "alert" : "status"},
    h("div", {class: "toast-text"}, title ? h("strong", {}, title) : null, title ? " " : null, text), close);
  close.addEventListener("click", () => item.remove());
  $("#toasts").append(item);
  if (timeout) setTimeout(() => item.remove(), timeout);
  return item;
}

// What every pane gets.
const app = {
  api,
  socket: {on: (type, handler) => socket.on(type, handler), send: (frame) => socket.send(frame),
    open: (sessionId) => socket.open(sessionId), interrupt: () => socket.interrupt(),
    get sessionId() { return socket.sessionId; }, get state() { return socket.state; }},
  t,
  get language() { return language(); },
  onLanguage,
  toast,
  openPane: (name) => showPane(name),
  get profile() { return api.profile; },
  panes: PANES,
  // A mounted pane's handle (what its mount returned), e.g. for a pane that drives another.
  pane: (name) => (mounted.get(name) || {}).handle || null,
};
window.assistantApp = app;   // for the browser tests and the curious; nothing secret on it

async function showPane(name) {
  const entry = PANES.find((pane) => pane.name === name) || PANES[0];
  for (const [other, {root, handle}] of mounted) {
    if (other !== entry.name) {
      root.hidden = true;
      handle && handle.hide && handle.hide();
    }
  }
  for (const button of document.querySelectorAll("#nav button")) {
    button.setAttribute("aria-current", button.dataset.pane === entry.name ? "page" : "false");
  }
  currentPane = entry.name;
  let record = mounted.get(entry.name);
  if (!record) {
    const root = h("section", {class: `pane pane-${entry.name}`, "data-pane": entry.name});
    $("#panes").append(root);
    record = {root, handle: null};
    mounted.set(entry.name, record);
    const module = await entry.load();
    record.handle = (await module.mount(root, app)) || null;
  }
  record.root.hidden = false;
  record.handle && record.handle.show && record.handle.show();
  document.body.dataset.pane = entry.name;
}

// A pane that marks its text with data-i18n is translated in place (the chat keeps its state);
// any other is built again in the new language the next time it shows.
function relabelPanes() {
  for (const [name, {root, handle}] of [...mounted]) {
    if (handle && handle.translatesItself) continue;
    handle && handle.unmount && handle.unmount();
    root.remove();
    mounted.delete(name);
  }
  if (currentPane && !mounted.has(currentPane)) showPane(currentPane);
}

function buildNav() {
  const nav = $("#nav");
  nav.textContent = "";
  for (const pane of PANES) {
    nav.append(h("button", {type: "button", "data-pane": pane.name, "data-i18n": pane.label,
      onclick: () => showPane(pane.name)}, t(pane.label)));
  }
}

function fillLanguageSelects() {
  for (const select of document.querySelectorAll(".language-select")) {
    select.textContent = "";
    for (const {code, name} of LANGUAGES) select.append(h("option", {value: code}, name));
    select.value = language();
    select.addEventListener("change", () => setLanguage(select.value));
  }
  onLanguage((code) => { for (const select of document.querySelectorAll(".language-select")) select.value = code; });
}

function showConnection(state) {
  const element = $("#connection");
  element.dataset.state = state;
  element.textContent = t(`conn.${state}`);
}

function formError(form, message) {
  const paragraph = form.querySelector(".form-error");
  paragraph.textContent = message || "";
  paragraph.hidden = !message;
}

function wireLogin() {
  const login = $("#login-form");
  const register = $("#register-form");
  login.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError(login, "");
    const data = new FormData(login);
    try {
      await api.login(String(data.get("username")).trim(), String(data.get("password")));
      login.reset();
    } catch (error) {
      formError(login, error instanceof ApiError && error.status === 401 ? t("login.failed") : error.message);
    }
  });
  register.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError(register, "");
    const fields = Object.fromEntries(new FormData(register));
    try {
      await api.register(fields);
      register.reset();
    } catch (error) {
      formError(register, error instanceof ApiError && error.errorType === "registration_closed"
        ? t("register.closed") : error.message);
    }
  });
  const swap = (toRegister) => {
    login.hidden = toRegister;
    register.hidden = !toRegister;
    (toRegister ? register : login).querySelector("input").focus();
  };
  document.querySelector('[data-action="to-register"]').addEventListener("click", () => swap(true));
  document.querySelector('[data-action="to-login"]').addEventListener("click", () => swap(false));
}

function showSignedIn(signedIn) {
  $("#boot").hidden = true;
  $("#login").hidden = signedIn;
  $("#shell").hidden = !signedIn;
  if (signedIn) {
    $("#who").textContent = api.profile ? api.profile.nickname || api.profile.username : "";
    showPane(currentPane || "chat");
    resyncPush(api);
  } else {
    socket.close();
    for (const {root, handle} of mounted.values()) {
      handle && handle.unmount && handle.unmount();
      root.remove();
    }
    mounted.clear();
    currentPane = null;
    $("#login-form input").focus();
    // The chat and its Markdown libraries are not needed to paint the sign-in form; fetch them
    // while the person types, so the chat opens at once after signing in.
    (window.requestIdleCallback || setTimeout)(() => import("./panes/chat.js").catch(() => {}));
  }
}

async function start() {
  translate(document);
  fillLanguageSelects();
  buildNav();
  wireLogin();
  socket.on("state", showConnection);
  onLanguage(() => showConnection(socket.state));
  onLanguage(relabelPanes);
  document.querySelector('[data-action="signout"]').addEventListener("click", async () => {
    await disablePush(api).catch(() => {});  // this browser stops showing the person's notifications
    api.logout();
  });
  document.querySelector('[data-action="toggle-drawer"]').addEventListener("click", (event) => {
    const open = document.body.classList.toggle("drawer-open");
    event.currentTarget.setAttribute("aria-expanded", String(open));
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("drawer-open")) {
      document.body.classList.remove("drawer-open");
      const toggle = document.querySelector('[data-action="toggle-drawer"]');
      toggle.setAttribute("aria-expanded", "false");
      toggle.focus();
    }
  });
  api.onChange(showSignedIn);
  import("./panes/inbox.js").then((inbox) => inbox.startToasts(app));
  followNotificationClicks(app);
  if (!(await api.restore())) showSignedIn(false);
}

start();
