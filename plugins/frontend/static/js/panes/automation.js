// Automation (docs/automation.md): the person's rules, each with its trigger in plain words, an
// on/off switch, "Run now" for a manual rule, its run log and Delete; their scenes with Run; and a
// small form for the commonest rule, "every day at HH:MM, tell me …". The assistant and the API
// make the others.
import {clear, formatTime, h} from "../dom.js";
import {busy, button, field, heading, ownId, statusLine} from "../ui.js";

const RUN_LOG_LIMIT = 20;

export function mount(root, app) {
  const {api, t} = app;
  const state = {rules: [], scenes: [], devices: new Map(), openLogs: new Set()};
  const owner = () => ({user_id: ownId(app)});

  const nameInput = h("input", {name: "name", required: true, maxlength: "200", autocomplete: "off",
    "data-i18n-placeholder": "automation.name_placeholder", placeholder: t("automation.name_placeholder")});
  const timeInput = h("input", {name: "time", type: "time", required: true, value: "07:30"});
  const textInput = h("input", {name: "text", required: true, maxlength: "200", autocomplete: "off",
    "data-i18n-placeholder": "automation.text_placeholder", placeholder: t("automation.text_placeholder")});
  const add = h("button", {type: "submit", class: "primary", "data-i18n": "automation.add"}, t("automation.add"));
  const form = h("form", {class: "pane-form rule-form", "aria-label": t("automation.new")},
    field(t, "automation.name", nameInput), field(t, "automation.every_day_at", timeInput),
    field(t, "automation.text", textInput, "grow"), add);
  const status = statusLine();
  const ruleList = h("ul", {class: "card-list rule-list", "aria-label": t("automation.rules")});
  const sceneList = h("ul", {class: "card-list scene-list", "aria-label": t("automation.scenes")});
  root.append(h("div", {class: "pane-body"}, heading(t, "automation.title"),
    h("p", {class: "muted", "data-i18n": "automation.intro"}, t("automation.intro")), status,
    h("h3", {"data-i18n": "automation.scenes"}, t("automation.scenes")), sceneList,
    h("h3", {"data-i18n": "automation.rules"}, t("automation.rules")), ruleList,
    h("h3", {"data-i18n": "automation.new"}, t("automation.new")), form));

  function days(list) {
    return (list || []).map((day) => t(`automation.day_${day}`)).join(t("automation.list_separator"));
  }

  // A device by its name in the interface's language (from /devices), else by its id.
  function deviceName(id) {
    const device = state.devices.get(id);
    return (device && ((device.names && (device.names[app.language] || device.names.en)) || device.name)) || id;
  }

  function propertyName(property) {
    const key = `devices.prop_${property}`;
    return t(key) === key ? property.replace(/_/g, " ") : t(key).toLowerCase();
  }

  function comparison(config) {
    if ("above" in config) return t("automation.above", {value: config.above});
    if ("below" in config) return t("automation.below", {value: config.below});
    const value = config.equals === true ? t("automation.true") : config.equals === false ? t("automation.false")
      : config.equals;
    return t("automation.equals", {value});
  }

  // The trigger in plain words: "Every day at 07:30", "When living_room_ac temperature goes above 28".
  function describeTrigger(rule) {
    const config = rule.trigger_config || {};
    const zone = config.timezone ? ` (${config.timezone})` : "";
    switch (rule.trigger_type) {
      case "time":
        if (config.at) {
          return t("automation.trigger_at", {when: new Date(Date.parse(config.at)).toLocaleString(app.language,
            {year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit"})}) + zone;
        }
        if (config.cron) return t("automation.trigger_cron", {cron: config.cron}) + zone;
        if (config.repeat === "weekly") return t("automation.trigger_weekly", {time: config.time, days: days(config.weekdays)}) + zone;
        return t("automation.trigger_daily", {time: config.time}) + zone;
      case "device_state":
        return t("automation.trigger_device", {device: deviceName(config.device_id), property: propertyName(config.property),
          comparison: comparison(config)});
      case "event":
        return t("automation.trigger_event", {event: config.event});
      case "manual":
        return t("automation.trigger_manual");
      default:
        return rule.trigger_type;
    }
  }

  function describeActions(actions) {
    const list = Array.isArray(actions) ? actions : [actions];
    return list.map((action) => {
      const key = `automation.action_${action.type}`;
      const kind = t(key) === key ? action.type : t(key);
      const what = action.title || action.text || action.prompt || (action.device_id && deviceName(action.device_id))
        || action.url || "";
      return what ? t("automation.action_what", {kind, what}) : kind;
    }).join(" · ");
  }

  function statusBadge(run) {
    const key = `automation.status_${run.status}`;
    return h("span", {class: `badge run-${run.status}`}, t(key) === key ? run.status : t(key));
  }

  function runItem(run) {
    const results = run.results || [];
    const failed = results.filter((result) => !result.ok);
    const triggerKey = `automation.by_${run.trigger}`;
    return h("li", {class: "run", "data-run": run.id},
      h("p", {class: "meta"}, statusBadge(run), h("time", {datetime: run.started_at}, formatTime(Date.parse(run.started_at), app.language)),
        h("span", {}, t(triggerKey) === triggerKey ? run.trigger : t(triggerKey)),
        results.length ? h("span", {}, t("automation.actions_ok", {ok: results.length - failed.length, count: results.length})) : null),
      run.note ? h("p", {class: "muted run-note"}, run.note) : null,
      failed.map((result) => h("p", {class: "run-error"}, `${result.type}: ${result.error}`)));
  }

  async function showLog(rule, container) {
    const answer = await api.get(`/automation/rules/${rule.id}/runs`, {limit: RUN_LOG_LIMIT, ...owner()});
    clear(container);
    container.append(h("h4", {}, t("automation.run_log_total", {total: answer.total})));
    if (!answer.runs.length) container.append(h("p", {class: "muted"}, t("automation.no_runs")));
    else container.append(h("ol", {class: "run-list"}, answer.runs.map(runItem)));
  }

  function ruleItem(rule) {
    const toggle = h("button", {type: "button", role: "switch", class: "switch", "data-action": "enable",
      "aria-checked": String(rule.enabled), "aria-label": t("automation.enabled_label", {name: rule.name})},
    h("span", {class: "switch-track"}), h("span", {}, t(rule.enabled ? "automation.on" : "automation.off")));
    toggle.addEventListener("click", () => busy(app, toggle, async () => {
      const answer = await api.send("PUT", `/automation/rules/${rule.id}`, {enabled: !rule.enabled, ...owner()});
      Object.assign(rule, answer.rule);
      const replacement = ruleItem(rule);
      item.replaceWith(replacement);
      replacement.querySelector("[data-action=enable]").focus();
    }));
    const log = h("div", {class: "run-log", hidden: !state.openLogs.has(rule.id)});
    const logButton = button(t, "automation.run_log", {"data-action": "log", "aria-expanded": String(state.openLogs.has(rule.id))});
    logButton.addEventListener("click", () => busy(app, logButton, async () => {
      const open = !state.openLogs.has(rule.id);
      if (open) { state.openLogs.add(rule.id); await showLog(rule, log); } else state.openLogs.delete(rule.id);
      log.hidden = !open;
      logButton.setAttribute("aria-expanded", String(open));
    }));
    const actions = h("div", {class: "card-actions"}, toggle);
    if (rule.trigger_type === "manual") {
      const run = button(t, "automation.run_now", {class: "primary", "data-action": "run"});
      run.addEventListener("click", () => busy(app, run, async () => {
        const answer = await api.send("POST", `/automation/rules/${rule.id}/trigger`, owner());
        app.toast(answer.message, {level: answer.run.status === "succeeded" ? "success" : "warning", timeout: 4000});
        state.openLogs.add(rule.id);
        log.hidden = false;
        logButton.setAttribute("aria-expanded", "true");
        await showLog(rule, log);
      }));
      actions.append(run);
    }
    const remove = button(t, "automation.delete", {class: "quiet danger", "data-action": "delete"});
    remove.addEventListener("click", () => {
      if (!confirm(t("automation.delete_confirm", {name: rule.name}))) return;
      busy(app, remove, async () => {
        await api.request("DELETE", `/automation/rules/${rule.id}`, {query: owner()});
        state.openLogs.delete(rule.id);
        await load();
      });
    });
    actions.append(logButton, remove);
    const next = rule.enabled && rule.next_run_at
      ? h("span", {}, t("automation.next", {when: formatTime(Date.parse(rule.next_run_at), app.language)})) : null;
    const last = rule.last_run_at
      ? h("span", {}, t("automation.last", {when: formatTime(Date.parse(rule.last_run_at), app.language)})) : null;
    const item = h("li", {class: `tile rule${rule.enabled ? "" : " disabled"}`, "data-id": rule.id},
      h("div", {class: "card-main"}, h("strong", {class: "card-title"}, rule.name),
        rule.description ? h("p", {}, rule.description) : null,
        h("p", {class: "trigger"}, describeTrigger(rule)),
        h("p", {class: "muted actions-line"}, describeActions(rule.actions)),
        h("p", {class: "meta"}, next, last), log),
      actions);
    if (!log.hidden) showLog(rule, log).catch(() => {});
    return item;
  }

  function sceneItem(scene) {
    const names = scene.rule_ids.map((id) => (state.rules.find((rule) => rule.id === id) || {name: id}).name);
    const run = button(t, "automation.run_scene", {class: "primary", "data-action": "execute",
      "aria-label": t("automation.run_scene_label", {name: scene.name})});
    const result = h("p", {class: "muted scene-result", role: "status"});
    run.addEventListener("click", () => busy(app, run, async () => {
      const answer = await api.send("POST", `/automation/scenes/${scene.id}/execute`, owner());
      result.textContent = answer.message;
      app.toast(answer.message, {level: answer.run.status === "succeeded" ? "success" : "warning", timeout: 4000});
    }));
    return h("li", {class: "tile scene", "data-id": scene.id},
      h("div", {class: "card-main"}, h("strong", {class: "card-title"}, scene.icon ? `${scene.icon} ${scene.name}` : scene.name),
        scene.actions && scene.actions.length ? h("p", {class: "muted actions-line"}, describeActions(scene.actions)) : null,
        names.length ? h("p", {class: "meta"}, t("automation.scene_rules", {rules: names.join(t("automation.list_separator"))})) : null,
        result),
      h("div", {class: "card-actions"}, run));
  }

  function render() {
    clear(ruleList);
    clear(sceneList);
    if (!state.rules.length) ruleList.append(h("li", {class: "muted empty-line"}, t("automation.no_rules")));
    for (const rule of state.rules) ruleList.append(ruleItem(rule));
    if (!state.scenes.length) sceneList.append(h("li", {class: "muted empty-line"}, t("automation.no_scenes")));
    for (const scene of state.scenes) sceneList.append(sceneItem(scene));
  }

  async function load() {
    try {
      // Device names are a nicety: without the devices feature the ids are shown.
      const [rules, scenes, devices] = await Promise.all([api.get("/automation/rules", owner()),
        api.get("/automation/scenes", owner()), api.get("/devices", owner()).catch(() => ({devices: []}))]);
      state.devices = new Map((devices.devices || []).map((device) => [device.id, device]));
      state.rules = rules.rules || [];
      state.scenes = scenes.scenes || [];
      status.textContent = "";
      render();
    } catch (error) {
      status.textContent = error.hint ? `${error.message} — ${error.hint}` : error.message;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = nameInput.value.trim();
    const text = textInput.value.trim();
    if (!name || !text || !timeInput.value) return;
    busy(app, add, async () => {
      await api.send("POST", "/automation/rules", {name, trigger_type: "time",
        trigger_config: {repeat: "daily", time: timeInput.value.slice(0, 5)},
        actions: [{type: "notify", title: text}], ...owner()});
      app.toast(t("automation.created", {name}), {level: "success", timeout: 3000});
      form.reset();
      timeInput.value = "07:30";
      await load();
    });
  });

  return {show: load};
}
