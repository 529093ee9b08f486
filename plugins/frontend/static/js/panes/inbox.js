// Notifications: every pushed `notification` frame becomes a toast (from the moment the shell
// starts this pane), and the pane lists the stored inbox with read marks.
import {clear, formatTime, h} from "../dom.js";
import {pushToggle} from "../push.js";

const LEVELS = {warning: "warning", success: "success", reminder: "warning", info: "info", thinking: "info"};

export function mount(root, app) {
  const {api, t} = app;
  const heading = h("h2", {"data-i18n": "inbox.title"}, t("inbox.title"));
  const readAll = h("button", {type: "button", class: "quiet", "data-i18n": "inbox.read_all"}, t("inbox.read_all"));
  const list = h("div", {class: "inbox-list"});
  // Notifications on this device while the app is closed (Web Push), turned on here.
  const push = pushToggle(app);
  root.append(h("div", {class: "inbox"}, h("div", {class: "inbox-header"}, heading, readAll), push.element, list));

  async function load() {
    try {
      const answer = await api.get("/notifications", {limit: 100});
      clear(list);
      if (!(answer.notifications || []).length) list.append(h("p", {class: "muted"}, t("inbox.empty")));
      for (const item of answer.notifications || []) {
        const element = h("article", {class: `inbox-item${item.read ? "" : " unread"}`},
          h("strong", {}, item.title || item.type), h("time", {class: "stamp"}, formatTime(Date.parse(item.timestamp), app.language)),
          item.body ? h("p", {}, item.body) : null);
        if (!item.read) {
          // Unread: a control that marks it read, by click or by keyboard.
          element.setAttribute("role", "button");
          element.setAttribute("tabindex", "0");
          element.setAttribute("aria-label", `${item.title || item.type}: ${t("inbox.mark_read")}`);
          const markRead = async () => {
            await api.request("POST", `/notifications/${encodeURIComponent(item.id)}/read`).catch(() => {});
            app.refreshUnread();
            element.classList.remove("unread");
            element.removeAttribute("role");
            element.removeAttribute("tabindex");
            element.removeAttribute("aria-label");
          };
          element.addEventListener("click", markRead, {once: true});
          element.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); markRead(); } });
        }
        list.append(element);
      }
    } catch (error) {
      clear(list).append(h("p", {class: "muted"}, error.message));
    }
  }

  readAll.addEventListener("click", async () => {
    await api.request("POST", "/notifications/read-all").catch(() => {});
    app.refreshUnread();
    load();
  });
  const off = app.socket.on("notification", (frame) => {
    if (!root.hidden) load();
  });
  return {show: () => { load(); push.refresh(); }, unmount: off};
}

// Toasts are started by the shell at sign-in, whether or not the pane was opened.
export function startToasts(app) {
  return app.socket.on("notification", (frame) => {
    const note = frame.notification || {};
    app.toast(note.body || "", {title: note.title || "", level: LEVELS[note.type] || "info", timeout: 8000});
  });
}

// How many notifications are unread, for the Inbox entry of the nav: `show(count)` is called
// with the inbox's own count (GET /notifications answers `unread`) when the person signs in,
// when the socket (re)connects, when a notification frame arrives, when the page is shown again,
// and every UNREAD_POLL_MS while it is visible, since reading on another device sends no frame.
const UNREAD_POLL_MS = 60000;
const UNREAD_SETTLE_MS = 250;   // several frames at once (missed ones on reconnect) cost one call

export function watchUnread(app, show) {
  let timer = null;
  let asked = 0;
  async function refresh() {
    clearTimeout(timer);
    timer = null;
    // Nothing but the new password is open before it is chosen (403 password_change_required).
    if (!app.api.signedIn || app.api.passwordChangeRequired) return;
    const ask = ++asked;
    try {
      const answer = await app.api.get("/notifications", {unread: "true", limit: 1});
      if (ask === asked) show(Number(answer.unread) || 0);   // a later answer wins
    } catch (error) {
      // Offline or signed out: the count stays as it was until the next try.
    }
  }
  const soon = () => { if (!timer) timer = setTimeout(refresh, UNREAD_SETTLE_MS); };
  app.socket.on("notification", soon);
  app.socket.on("state", (state) => { if (state === "open") soon(); });
  app.api.onChange((signedIn) => (signedIn ? soon() : show(0)));
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") soon(); });
  setInterval(() => { if (document.visibilityState === "visible") soon(); }, UNREAD_POLL_MS);
  if (app.api.signedIn) soon();
  return {refresh};
}
