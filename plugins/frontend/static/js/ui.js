// Small pieces the feature panes share: a labelled field, a heading row, an error line, a button
// that is disabled while its action runs. Text always goes in as text nodes (h()).
import {h} from "./dom.js";

// <label><span>Label</span>control</label>, translated again on a language switch.
export function field(t, key, control, extraClass = "") {
  return h("label", {class: `field ${extraClass}`.trim()}, h("span", {"data-i18n": key}, t(key)), control);
}

export function heading(t, key, ...actions) {
  return h("div", {class: "pane-header"}, h("h2", {"data-i18n": key}, t(key)), ...actions);
}

export function button(t, key, attributes = {}) {
  return h("button", {type: "button", class: "quiet", "data-i18n": key, ...attributes}, t(key));
}

// Runs `action` with `control` disabled; shows a failure as a toast. Resolves with the action's
// result, or undefined when it failed.
export async function busy(app, control, action) {
  if (control) control.disabled = true;
  try {
    return await action();
  } catch (error) {
    app.toast(error.hint ? `${error.message} — ${error.hint}` : error.message, {level: "error"});
    return undefined;
  } finally {
    if (control) control.disabled = false;
  }
}

// The signed-in person's id: the administrator's listings name it so they show their own.
export function ownId(app) {
  return (app.profile && app.profile.user_id) || undefined;
}

export function statusLine() {
  return h("p", {class: "muted pane-status", role: "status", "aria-live": "polite"});
}
