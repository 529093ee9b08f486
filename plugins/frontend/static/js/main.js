// The shell: sign-in, the top bar, the panes and the toasts. Each pane is a module under
// panes/ exporting mount(root, app); see docs/web-client.md for the `app` it is handed.
import {ApiClient, ApiError} from "./api.js";
import {ChatSocket} from "./socket.js";
import {LANGUAGES, language, onLanguage, setLanguage, t, translate} from "./i18n.js";
import {h} from "./dom.js";
import {disablePush, followNotificationClicks, resyncPush} from "./push.js";

// Add a pane here (and its module under panes/): the top bar (on a phone, the tab bar at the
// bottom) lists them in this order. `icon`: the path data of a 24×24 outline, drawn with the
// text's colour.
export const PANES = [
  {name: "chat", label: "nav.chat", icon: "M4 5h16v11H10l-5 4v-4H4z", load: () => import("./panes/chat.js")},
  {name: "inbox", label: "nav.inbox", icon: "M3 13l3-8h12l3 8v6H3zM3 13h5l1.5 3h5l1.5-3h5",
    load: () => import("./panes/inbox.js")},
  {name: "reminders", label: "nav.reminders", icon: "M6 16v-5a6 6 0 0 1 12 0v5l2 2H4zM10 21h4",
    load: () => import("./panes/reminders.js")},
  {name: "memories", label: "nav.memories", icon: "M7 3h10v18l-5-4-5 4z", load: () => import("./panes/memories.js")},
  {name: "knowledge", label: "nav.knowledge", icon: "M3 5h6a3 3 0 0 1 3 3v12a2 2 0 0 0-2-2H3zM21 5h-6a3 3 0 0 0-3 3v12a2 2 0 0 1 2-2h7z",
    load: () => import("./panes/knowledge.js")},
  {name: "devices", label: "nav.devices", icon: "M3 11l9-8 9 8M5 9.5V20h14V9.5M10 20v-6h4v6",
    load: () => import("./panes/devices.js")},
  {name: "automation", label: "nav.automation", icon: "M13 2L4 14h7l-1 8 9-12h-7z",
    load: () => import("./panes/automation.js")},
  // On a desktop an icon in the top bar, beside the person's name (the bar holds seven panes).
  {name: "settings", label: "nav.settings", icon: "M4 7h9M17 7h3M4 17h3M11 17h9M15 5v4M9 15v4", place: "top",
    load: () => import("./panes/settings.js")},
];
const SVG = "http://www.w3.org/2000/svg";

const api = new ApiClient();
const socket = new ChatSocket(api);
const $ = (selector) => document.querySelector(selector);
const mounted = new Map();   // name -> {root, handle}
let currentPane = null;
let unread = null;           // the inbox module's unread counter, once loaded

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
  // Read the unread count again now (the inbox calls it after marking notifications read).
  refreshUnread: () => unread && unread.refresh(),
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
  for (const button of document.querySelectorAll("#nav button, #nav-top button")) {
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

function navIcon(path) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "nav-icon");
  const shape = document.createElementNS(SVG, "path");
  shape.setAttribute("d", path || "M4 4h16v16H4z");
  svg.append(shape);
  return svg;
}

function buildNav() {
  const nav = $("#nav"), top = $("#nav-top");
  nav.textContent = "";
  top.textContent = "";
  for (const pane of PANES) {
    if (pane.place === "top") {  // an icon in the top bar; on a phone a tab like the others
      top.append(h("button", {type: "button", class: "icon", "data-pane": pane.name, "data-i18n-label": pane.label,
        "aria-label": t(pane.label), title: t(pane.label), onclick: () => showPane(pane.name)}, navIcon(pane.icon)));
    }
    nav.append(h("button", {type: "button", "data-pane": pane.name, class: pane.place === "top" ? "phone-only" : "",
      onclick: () => showPane(pane.name)},
      navIcon(pane.icon), h("span", {class: "nav-label", "data-i18n": pane.label}, t(pane.label)),
      pane.name === "inbox" ? h("span", {class: "unread-count", role: "img", hidden: ""}) : null));
  }
}

// The unread count on the Inbox entry: hidden at zero, its aria-label "3 unread".
function showUnread(count) {
  const badge = $("#nav .unread-count");
  if (!badge) return;
  badge.hidden = !count;
  badge.textContent = count > 99 ? "99+" : String(count || "");
  badge.dataset.count = String(count || 0);
  badge.setAttribute("aria-label", t("nav.unread", {count}));
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

// One card of the sign-in page: "login", "register", "invitation" or "password".
const AUTH_FORMS = ["login", "register", "invitation", "password"];
function showAuthForm(name) {
  $("#boot").hidden = true;
  $("#login").hidden = false;
  $("#shell").hidden = true;
  for (const form of AUTH_FORMS) $(`#${form}-form`).hidden = form !== name;
  $(`#${name}-form input:not([disabled])`).focus();
}

// The invitation link (PUBLIC_BASE_URL/?invitation=<code>) leaves the address once used: a
// reload or a bookmark must not offer a spent code again.
function forgetInvitationInAddress() {
  const url = new URL(location.href);
  url.searchParams.delete("invitation");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}

// A correction clears the last complaint.
function clearErrorOnInput(form) {
  form.addEventListener("input", () => formError(form, ""));
}

function checkRepeated(form, password) {
  if (password === String(new FormData(form).get("repeat"))) return true;
  formError(form, t("password.mismatch"));
  form.querySelector('input[name="repeat"]').focus();
  return false;
}

function wireInvitation(code) {
  const form = $("#invitation-form");
  clearErrorOnInput(form);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError(form, "");
    const password = String(new FormData(form).get("password"));
    if (!checkRepeated(form, password)) return;
    try {
      await api.acceptInvitation(code, password);
      form.reset();
      forgetInvitationInAddress();
    } catch (error) {
      if (error instanceof ApiError && error.errorType === "invalid_invitation") forgetInvitationInAddress();
      formError(form, error instanceof ApiError && error.errorType === "invalid_invitation"
        ? t("invitation.invalid") : error.message);
    }
  });
  document.querySelector('[data-action="invitation-to-login"]').addEventListener("click", () => {
    forgetInvitationInAddress();
    showAuthForm("login");
  });
}

// After a sign-in with a one-time password the person chooses their own before anything else.
function wirePasswordChange() {
  const form = $("#password-form");
  clearErrorOnInput(form);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError(form, "");
    const fields = new FormData(form);
    const password = String(fields.get("new_password"));
    if (!checkRepeated(form, password)) return;
    try {
      await api.changePassword(password, api.oneTimePassword || String(fields.get("current_password")));
      form.reset();
    } catch (error) {
      formError(form, error instanceof ApiError && error.errorType === "validation_error"
        ? t("password.length") : error.message);
    }
  });
  document.querySelector('[data-action="password-signout"]').addEventListener("click", () => api.logout());
}

function showSignedIn(signedIn) {
  if (signedIn && api.passwordChangeRequired) {
    // After a reload the one-time password is no longer in memory: the person types it again.
    const current = $("#password-form .current-password");
    current.hidden = Boolean(api.oneTimePassword);
    current.querySelector("input").disabled = current.hidden;
    showAuthForm("password");
    return;
  }
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
    showAuthForm("login");
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
  import("./panes/inbox.js").then((inbox) => {
    inbox.startToasts(app);
    unread = inbox.watchUnread(app, showUnread);
  });
  onLanguage(() => { const badge = $("#nav .unread-count"); if (badge) showUnread(Number(badge.dataset.count)); });
  followNotificationClicks(app);
  offline.start();
  installable();
  wirePasswordChange();
  const invitation = new URLSearchParams(location.search).get("invitation");
  if (invitation) {
    // Whoever was signed in on this browser before, the link is for the person it invites.
    wireInvitation(invitation);
    showAuthForm("invitation");
    return;
  }
  await signInFromCookie();
}

// The service worker (/sw.js) keeps the app shell for opening offline and installs a new
// version by itself. Browsers offer it on HTTPS and on localhost only; elsewhere this is skipped.
function installable() {
  if (!("serviceWorker" in navigator)) return;
  const hadController = Boolean(navigator.serviceWorker.controller);
  let announced = false;
  const announce = () => {
    if (announced) return;
    announced = true;
    toast(t("app.updated"), {level: "info", timeout: 10000});
  };
  // Said once the new version is installed, not only when it takes over: Chromium lets the old
  // worker finish whatever it is handling before the new one activates, which can take a while.
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    if (hadController) announce();
  });
  navigator.serviceWorker.register("/sw.js").then((registration) => {
    registration.addEventListener("updatefound", () => {
      const worker = registration.installing;
      if (!worker || !navigator.serviceWorker.controller) return;   // the first install is no update
      worker.addEventListener("statechange", () => {
        if (["installed", "activating", "activated"].includes(worker.state)) announce();
      });
    });
    // A phone keeps an installed app open for days: look for a new version when it comes back.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") registration.update().catch(() => {});
    });
  }).catch((error) => console.warn("service worker not registered", error));
}

// A returning person is signed in from the refresh cookie. When the server cannot be reached
// (no network, or the page came from the offline copy) the shell says "not connected" and tries
// again when the browser is back online, and every RETRY_OFFLINE_MS.
const RETRY_OFFLINE_MS = 10000;
async function signInFromCookie() {
  const restored = await api.restore();
  if (restored !== null) {
    offline.unreachable(false);
    if (!restored) showSignedIn(false);
    return;
  }
  offline.unreachable(true);
  if (!api.signedIn && $("#login").hidden && $("#shell").hidden) showSignedIn(false);
  const again = () => {
    removeEventListener("online", again);
    clearTimeout(timer);
    if (!api.signedIn) signInFromCookie();
  };
  const timer = setTimeout(again, RETRY_OFFLINE_MS);
  addEventListener("online", again);
}

// The "not connected" banner: the browser says it is offline, or the server did not answer.
const offline = {
  serverUnreachable: false,
  start() {
    addEventListener("online", () => this.show());
    addEventListener("offline", () => this.show());
    socket.on("state", (state) => { if (state === "open") this.unreachable(false); });
    this.show();
  },
  unreachable(value) { this.serverUnreachable = value; this.show(); },
  show() {
    const banner = $("#offline");
    const off = !navigator.onLine || this.serverUnreachable;
    banner.hidden = !off;
    document.body.classList.toggle("offline", off);
  },
};

start();
