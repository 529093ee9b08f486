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
