// Notifications on this device while no page of the app is open: Web Push. Turning it on asks
// the browser's permission, subscribes the service worker's registration with the gateway's
// VAPID key, and sends the subscription to the gateway, which then pushes every notification
// to it (docs/notifications.md, docs/web-client.md). The service worker shows them
// (static/push-sw.js, imported by the service worker).
import {h} from "./dom.js";

const WORKER_WAIT_MS = 5000;
// The gateway's id of this browser's subscription (not a secret): what turning off deletes.
const STORED_ID = "assistant.push_subscription";

export function pushSupported() {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window && window.isSecureContext;
}

function keyBytes(base64url) {
  const padded = (base64url + "=".repeat((4 - base64url.length % 4) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

// The service worker's registration once one is active, or null (none registered in time).
async function registration() {
  if (!pushSupported()) return null;
  const timeout = new Promise((resolve) => setTimeout(() => resolve(null), WORKER_WAIT_MS));
  return Promise.race([navigator.serviceWorker.ready, timeout]);
}

function deviceName() {
  const agent = navigator.userAgent;
  const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox"
    : /Chrome\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "Browser";
  const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS"
    : /Mac OS X/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
  return system ? `${browser} · ${system}` : browser;
}

// "unsupported", "denied", "no_worker", "on" or "off".
export async function pushState() {
  if (!pushSupported()) return "unsupported";
  if (Notification.permission === "denied") return "denied";
  const worker = await registration();
  if (!worker) return "no_worker";
  const subscription = await worker.pushManager.getSubscription();
  return subscription && Notification.permission === "granted" ? "on" : "off";
}

// Must run from a click (browsers ask permission only then).
export async function enablePush(api) {
  const permission = await Notification.requestPermission();
  if (permission !== "granted") throw new Error(permission === "denied" ? "denied" : "dismissed");
  const worker = await registration();
  if (!worker) throw new Error("no_worker");
  await register(api, await subscribed(api, worker));
}

// This browser's subscription under the gateway's current VAPID key: one made with another key
// (the server's key file replaced) cannot be pushed to, so it is replaced.
async function subscribed(api, worker) {
  const {publicKey} = await api.get("/notifications/push/key");
  let subscription = await worker.pushManager.getSubscription();
  const current = subscription && subscription.options && subscription.options.applicationServerKey;
  if (subscription && current && new Uint8Array(current).join() !== keyBytes(publicKey).join()) {
    await subscription.unsubscribe();
    subscription = null;
  }
  return subscription || worker.pushManager.subscribe({userVisibleOnly: true, applicationServerKey: keyBytes(publicKey)});
}

async function register(api, subscription) {
  const answer = await api.send("POST", "/notifications/push/subscriptions",
    {...subscription.toJSON(), device_name: deviceName()});
  localStorage.setItem(STORED_ID, answer.subscription.id);
}

// Turning off, and signing out: the gateway forgets this browser, and the browser its
// subscription, so a shared computer does not go on showing the last person's reminders.
export async function disablePush(api) {
  const stored = localStorage.getItem(STORED_ID);
  localStorage.removeItem(STORED_ID);
  if (stored) {
    await api.request("DELETE", `/notifications/push/subscriptions/${encodeURIComponent(stored)}`).catch(() => {});
  }
  const worker = pushSupported() ? await navigator.serviceWorker.getRegistration() : null;
  const subscription = worker && await worker.pushManager.getSubscription();
  if (subscription) await subscription.unsubscribe();
}

// At sign-in: a device whose notifications are on sends its subscription again (a browser may
// have renewed it while no page was open, the server's key may have changed), so the gateway
// pushes to what the browser has now.
export async function resyncPush(api) {
  try {
    if ((await pushState()) !== "on") return;
    await register(api, await subscribed(api, await registration()));
  } catch (error) {
    // Nothing to do now: the toggle shows the state when the person looks.
  }
}

// A click on a shown notification (the service worker's message) opens the inbox.
export function followNotificationClicks(app) {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && event.data.type === "assistant.notification_click") app.openPane("inbox");
  });
}

// The Inbox's switch: a button saying what it will do, and a line saying how things stand.
export function pushToggle(app) {
  const {api, t} = app;
  const button = h("button", {type: "button", class: "quiet", "aria-pressed": "false"});
  const note = h("span", {class: "muted push-note", role: "status", "aria-live": "polite"});
  let state = "off";

  function show() {
    button.hidden = state === "unsupported" || state === "denied" || state === "no_worker";
    button.textContent = t(state === "on" ? "push.disable" : "push.enable");
    button.setAttribute("aria-pressed", String(state === "on"));
    note.textContent = state === "off" ? "" : t(`push.${state}`);
  }

  async function refresh() {
    state = await pushState().catch(() => "unsupported");
    show();
  }

  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      if (state === "on") await disablePush(api);
      else await enablePush(api);
    } catch (error) {
      const known = ["denied", "dismissed", "no_worker"].includes(error.message);
      if (!known) app.toast(t("push.failed", {error: error.message}), {level: "error"});
    } finally {
      button.disabled = false;
      await refresh();
    }
  });
  app.onLanguage(show);
  refresh();
  return {element: h("div", {class: "push-toggle"}, button, note), refresh};
}
