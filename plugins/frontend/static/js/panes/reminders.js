// Reminders: list by status, create (time in the person's own zone), complete, snooze, delete.
import {clear, h} from "../dom.js";

const SNOOZE_MINUTES = 10;

export function mount(root, app) {
  const {api, t} = app;
  const status = h("select", {"aria-label": t("rem.filter")},
    ...["pending", "completed", "cancelled", ""].map((value) => h("option", {value}, t(`rem.status_${value || "all"}`))));
  const title = h("input", {name: "title", required: true, maxlength: "200", placeholder: t("rem.title"), "aria-label": t("rem.title")});
  const when = h("input", {name: "remind_at", type: "datetime-local", required: true, "aria-label": t("rem.when")});
  const repeat = h("select", {name: "repeat_type", "aria-label": t("rem.repeat")},
    ...["none", "daily", "weekly", "monthly"].map((value) => h("option", {value}, t(`rem.repeat_${value}`))));
  const form = h("form", {class: "row-form"}, title, when, repeat, h("button", {type: "submit", class: "primary"}, t("rem.add")));
  const list = h("div", {class: "items"});
  root.append(h("div", {class: "page"}, h("header", {class: "page-header"}, h("h2", {}, t("nav.reminders")), status), form, list));

  async function load() {
    try {
      const answer = await api.get("/reminders", {status: status.value, limit: 200});
      clear(list);
      if (!answer.reminders.length) list.append(h("p", {class: "muted"}, t("rem.empty")));
      for (const reminder of answer.reminders) list.append(item(reminder));
    } catch (error) { clear(list).append(h("p", {class: "muted"}, error.message)); }
  }

  function item(reminder) {
    const change = (body) => api.send("PUT", `/reminders/${encodeURIComponent(reminder.id)}`, body).then(load)
      .catch((error) => app.toast(error.message, {level: "error"}));
    const actions = h("div", {class: "item-actions"});
    if (reminder.status === "pending") {
      actions.append(
        h("button", {type: "button", onclick: () => change({status: "completed"})}, t("rem.complete")),
        h("button", {type: "button", onclick: () => change({remind_at: new Date(Date.now() + SNOOZE_MINUTES * 60000).toISOString(), snooze: true})},
          t("rem.snooze", {minutes: SNOOZE_MINUTES})));
    }
    actions.append(h("button", {type: "button", class: "quiet danger", onclick: () =>
      api.request("DELETE", `/reminders/${encodeURIComponent(reminder.id)}`).then(load)}, t("chat.delete")));
    const at = new Date(reminder.remind_at).toLocaleString(app.language, {dateStyle: "medium", timeStyle: "short"});
    return h("article", {class: `item reminder ${reminder.status}`},
      h("strong", {}, reminder.title),
      h("span", {class: "muted"}, ` · ${at}${reminder.repeat_type && reminder.repeat_type !== "none" ? ` · ${t(`rem.repeat_${reminder.repeat_type}`)}` : ""}`),
      reminder.description ? h("p", {}, reminder.description) : null, actions);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api.send("POST", "/reminders", {title: title.value.trim(), remind_at: when.value.length === 16 ? `${when.value}:00` : when.value,
        repeat_type: repeat.value});
      form.reset();
      load();
    } catch (error) { app.toast(error.message, {level: "error"}); }
  });
  status.addEventListener("change", load);
  const off = app.socket.on("notification", (frame) => { if ((frame.notification || {}).type === "reminder") load(); });
  return {show: load, unmount: off};
}
