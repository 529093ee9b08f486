// Settings (docs/web-client.md): the person's time zone (the profile's, what "tomorrow at 9"
// means to the assistant, reminders and rules), the interface's language, spoken replies on
// this device, and signing out every other device.
import {h} from "../dom.js";
import {LANGUAGES, setLanguage} from "../i18n.js";
import {busy, field, heading, statusLine} from "../ui.js";

function deviceZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (error) { return ""; }
}

function knownZones(current) {
  let zones = [];
  try { zones = Intl.supportedValuesOf("timeZone"); } catch (error) { zones = []; }
  for (const zone of [current, deviceZone(), "UTC"]) if (zone && !zones.includes(zone)) zones.push(zone);
  return zones.sort();
}

export function mount(root, app) {
  const {api, t} = app;
  const current = (app.profile && app.profile.timezone) || deviceZone() || "UTC";

  const zone = h("select", {name: "timezone"}, knownZones(current).map((name) => h("option", {value: name}, name)));
  zone.value = current;
  const saveZone = h("button", {type: "submit", class: "primary", "data-i18n": "settings.save"}, t("settings.save"));
  const here = deviceZone();
  const useHere = h("button", {type: "button", class: "quiet", "data-action": "device-zone"},
    t("settings.use_device_zone", {zone: here}));
  useHere.hidden = !here;
  const zoneStatus = statusLine();
  const zoneForm = h("form", {class: "pane-form settings-zone"}, field(t, "settings.timezone", zone, "grow"), saveZone, useHere);

  const language = h("select", {name: "language"}, LANGUAGES.map(({code, name}) => h("option", {value: code}, name)));
  language.value = app.language;

  const speak = h("input", {type: "checkbox", name: "speak"});
  const chat = () => app.pane("chat");
  speak.checked = chat() ? chat().speaker.enabled : localStorage.getItem("assistant.speak") === "1";

  const others = h("button", {type: "button", class: "quiet danger", "data-action": "sign-out-others",
    "data-i18n": "settings.sign_out_others"}, t("settings.sign_out_others"));
  const othersStatus = statusLine();

  root.append(h("div", {class: "pane-body"}, heading(t, "settings.title"),
    h("section", {class: "settings-group"}, h("h3", {"data-i18n": "settings.timezone"}, t("settings.timezone")),
      h("p", {class: "muted", "data-i18n": "settings.timezone_intro"}, t("settings.timezone_intro")), zoneForm, zoneStatus),
    h("section", {class: "settings-group"}, field(t, "settings.language", language)),
    h("section", {class: "settings-group"}, h("label", {class: "check"}, speak,
      h("span", {"data-i18n": "settings.speak"}, t("settings.speak")))),
    h("section", {class: "settings-group"}, h("h3", {"data-i18n": "settings.devices"}, t("settings.devices")),
      h("p", {class: "muted", "data-i18n": "settings.sign_out_others_intro"}, t("settings.sign_out_others_intro")),
      others, othersStatus)));

  async function chooseZone(name) {
    const profile = await api.send("PUT", "/profile", {timezone: name});
    api.profile = profile;
    zone.value = profile.timezone;
    zoneStatus.textContent = t("settings.timezone_saved", {zone: profile.timezone});
  }

  zoneForm.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(app, saveZone, () => chooseZone(zone.value));
  });
  useHere.addEventListener("click", () => busy(app, useHere, () => chooseZone(here)));
  language.addEventListener("change", () => setLanguage(language.value));
  speak.addEventListener("change", () => {
    const handle = chat();
    if (handle) {
      if (handle.speaker.enabled !== speak.checked) handle.speaker.toggle();
    } else {
      localStorage.setItem("assistant.speak", speak.checked ? "1" : "0");
    }
  });
  others.addEventListener("click", () => {
    if (!confirm(t("settings.sign_out_others_confirm"))) return;
    busy(app, others, async () => {
      const answer = await api.send("POST", "/auth/logout", {others: true});
      othersStatus.textContent = t("settings.signed_out_others", {count: answer.revoked ?? 0});
    });
  });

  return {
    show() {
      if (chat()) speak.checked = chat().speaker.enabled;
      if (app.profile && app.profile.timezone) zone.value = app.profile.timezone;
    },
  };
}
