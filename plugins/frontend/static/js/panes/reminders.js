// Reminders (docs/reminders.md): the upcoming and the done, a form to set one (text, time,
// repeat), and per reminder Done, Snooze, History (its occurrences) and Delete. A reminder that
// fires (a `notification` of type `reminder`) refreshes the list, so its next time or its "fired"
// mark shows at once.
import {clear, h} from "../dom.js";
import {busy, button, field, heading, ownId, statusLine} from "../ui.js";

const REPEATS = ["none", "daily", "weekdays", "weekly", "monthly"];
const SNOOZES = [{key: "reminders.snooze_10m", minutes: 10}, {key: "reminders.snooze_1h", minutes: 60},
  {key: "reminders.snooze_tomorrow", minutes: null}];

// "2026-11-24T10:30" for a datetime-local input, in the browser's own clock.
function localInput(date) {
  const pad = (number) => String(number).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function browserZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || undefined; } catch (error) { return undefined; }
}

export function mount(root, app) {
  const {api, t} = app;
  const state = {view: "pending", reminders: []};

  const titleInput = h("input", {name: "title", required: true, maxlength: "200", autocomplete: "off",
    "data-i18n-placeholder": "reminders.title_placeholder", placeholder: t("reminders.title_placeholder")});
  const whenInput = h("input", {name: "remind_at", type: "datetime-local", required: true});
  const repeatSelect = h("select", {name: "repeat_type"},
    REPEATS.map((repeat) => h("option", {value: repeat, "data-i18n": `reminders.repeat_${repeat}`}, t(`reminders.repeat_${repeat}`))));
  const add = h("button", {type: "submit", class: "primary", "data-i18n": "reminders.add"}, t("reminders.add"));
  const form = h("form", {class: "pane-form reminder-form", "aria-label": t("reminders.new")},
    field(t, "reminders.title", titleInput, "grow"), field(t, "reminders.when", whenInput),
    field(t, "reminders.repeat", repeatSelect), add);
  const tabs = h("div", {class: "tabs", role: "tablist", "aria-label": t("reminders.title_list")});
  const tabButtons = {};
  for (const view of ["pending", "completed"]) {
    tabButtons[view] = h("button", {type: "button", role: "tab", class: "tab", "data-view": view,
      "data-i18n": `reminders.tab_${view}`, onclick: () => { state.view = view; load(); }}, t(`reminders.tab_${view}`));
    tabs.append(tabButtons[view]);
  }
  const list = h("ul", {class: "card-list reminder-list", role: "tabpanel"});
  const status = statusLine();
  root.append(h("div", {class: "pane-body"}, heading(t, "reminders.title_list"), form, tabs, status, list));

  function resetForm() {
    form.reset();
    const soon = new Date(Date.now() + 60 * 60 * 1000);
    soon.setMinutes(0, 0, 0);
    whenInput.value = localInput(soon);
  }

  function when(reminder) {
    const date = new Date(Date.parse(reminder.remind_at));
    const year = date.getFullYear() !== new Date().getFullYear() ? "numeric" : undefined;
    return date.toLocaleString(app.language, {weekday: "short", year, month: "short", day: "numeric", hour: "2-digit", minute: "2-digit"});
  }

  function render() {
    for (const [view, tab] of Object.entries(tabButtons)) tab.setAttribute("aria-selected", String(view === state.view));
    clear(list);
    if (!state.reminders.length) {
      list.append(h("li", {class: "muted empty-line"}, t(state.view === "pending" ? "reminders.empty" : "reminders.empty_done")));
      return;
    }
    for (const reminder of state.reminders) list.append(item(reminder));
  }

  function item(reminder) {
    const overdue = reminder.status === "pending" && reminder.notified;
    const meta = h("p", {class: "meta"}, h("time", {datetime: reminder.remind_at}, when(reminder)),
      reminder.repeat_type && reminder.repeat_type !== "none"
        ? h("span", {class: "badge"}, t(`reminders.repeat_${reminder.repeat_type}`, {}) ) : null,
      overdue ? h("span", {class: "badge warning"}, t("reminders.fired")) : null);
    const actions = h("div", {class: "card-actions"});
    if (reminder.status === "pending") {
      const done = button(t, "reminders.complete", {class: "primary", "data-action": "complete"});
      done.addEventListener("click", () => busy(app, done, async () => {
        await api.send("PUT", `/reminders/${reminder.id}`, {status: "completed"});
        app.toast(t("reminders.completed_toast", {title: reminder.title}), {level: "success", timeout: 3000});
        await load();
      }));
      const snooze = h("select", {class: "quiet", "data-action": "snooze", "aria-label": t("reminders.snooze")},
        h("option", {value: ""}, t("reminders.snooze")),
        SNOOZES.map(({key}, index) => h("option", {value: String(index)}, t(key))));
      snooze.addEventListener("change", () => {
        const choice = SNOOZES[Number(snooze.value)];
        snooze.value = "";
        if (!choice) return;
        let at;
        if (choice.minutes) at = new Date(Date.now() + choice.minutes * 60000);
        else { at = new Date(); at.setDate(at.getDate() + 1); at.setHours(9, 0, 0, 0); }
        busy(app, snooze, async () => {
          await api.send("PUT", `/reminders/${reminder.id}`, {remind_at: at.toISOString(), snooze: true});
          await load();
        });
      });
      actions.append(done, snooze);
    } else {
      const reopen = button(t, "reminders.reopen", {"data-action": "reopen"});
      reopen.addEventListener("click", () => busy(app, reopen, async () => {
        await api.send("PUT", `/reminders/${reminder.id}`, {status: "pending"});
        await load();
      }));
      actions.append(reopen);
    }
    const history = h("div", {class: "reminder-history", hidden: true});
    const historyButton = button(t, "reminders.history", {"data-action": "history", "aria-expanded": "false"});
    historyButton.addEventListener("click", () => busy(app, historyButton, async () => {
      const open = history.hidden;
      if (open) await showHistory(reminder, history);
      history.hidden = !open;
      historyButton.setAttribute("aria-expanded", String(open));
    }));
    actions.append(historyButton);
    const remove = button(t, "reminders.delete", {class: "quiet danger", "data-action": "delete"});
    remove.addEventListener("click", () => {
      if (!confirm(t("reminders.delete_confirm", {title: reminder.title}))) return;
      busy(app, remove, async () => { await api.request("DELETE", `/reminders/${reminder.id}`); await load(); });
    });
    actions.append(remove);
    return h("li", {class: `tile reminder${overdue ? " fired" : ""}`, "data-id": reminder.id},
      h("div", {class: "card-main"}, h("strong", {class: "card-title"}, reminder.title),
        reminder.description && reminder.description !== reminder.title ? h("p", {}, reminder.description) : null, meta,
        history),
      actions);
  }

  // What the scheduler did with each occurrence, newest first (GET /reminders/:id/occurrences).
  async function showHistory(reminder, container) {
    const answer = await api.get(`/reminders/${reminder.id}/occurrences`, {user_id: ownId(app)});
    const stamp = (iso) => new Date(Date.parse(iso)).toLocaleString(app.language,
      {month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit"});
    clear(container);
    container.append(h("h4", {}, t("reminders.history_title")));
    if (!answer.occurrences.length) {
      container.append(h("p", {class: "muted"}, t("reminders.history_empty")));
      return;
    }
    container.append(h("ol", {class: "occurrence-list"}, answer.occurrences.map((occurrence) => {
      const key = `reminders.outcome_${occurrence.outcome}`;
      return h("li", {class: `occurrence outcome-${occurrence.outcome}`},
        h("span", {class: `badge outcome-${occurrence.outcome}`}, t(key) === key ? occurrence.outcome : t(key)),
        h("time", {datetime: occurrence.due_at}, t("reminders.due", {when: stamp(occurrence.due_at)})),
        occurrence.handled_at ? h("span", {}, t("reminders.handled", {when: stamp(occurrence.handled_at)})) : null,
        occurrence.late_by_seconds ? h("span", {}, t("reminders.late_by", {seconds: Math.round(occurrence.late_by_seconds)})) : null);
    })));
  }

  async function load() {
    try {
      const answer = await api.get("/reminders", {status: state.view, limit: 200, user_id: ownId(app)});
      state.reminders = answer.reminders || [];
      if (state.view === "completed") state.reminders.sort((a, b) => String(b.completed_at).localeCompare(String(a.completed_at)));
      status.textContent = "";
      render();
    } catch (error) {
      status.textContent = error.message;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const title = titleInput.value.trim();
    if (!title || !whenInput.value) return;
    busy(app, add, async () => {
      await api.send("POST", "/reminders", {title, remind_at: whenInput.value, repeat_type: repeatSelect.value,
        timezone: browserZone()});
      app.toast(t("reminders.created_toast", {title, when: new Date(whenInput.value).toLocaleString(app.language)}),
        {level: "success", timeout: 3000});
      resetForm();
      state.view = "pending";
      await load();
    });
  });

  resetForm();
  // The notification is pushed inside the scheduler's transaction, before its new state is
  // committed: mark the reminder fired at once, then read the list again a moment later (a
  // repeating one has moved on to its next time by then).
  const offNotification = app.socket.on("notification", (frame) => {
    const note = frame.notification || {};
    if (note.type !== "reminder") return;
    const fired = state.reminders.find((item) => item.id === (note.data || {}).reminder_id);
    if (fired) { fired.notified = true; render(); }
    setTimeout(load, 1500);
  });
  const offLanguage = app.onLanguage(() => render());
  return {show: load, unmount() { offNotification(); offLanguage(); }};
}
