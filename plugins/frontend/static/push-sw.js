// Web Push in the service worker (the service worker imports it: importScripts("/static/push-sw.js")).
// Every notification the gateway pushes (docs/notifications.md) arrives here, decrypted by the
// browser: {id, type, title, body, timestamp, data}. It is shown as a system notification unless
// a page of the app is visible, which already shows it as a toast from its WebSocket.
/* eslint-env serviceworker */

self.addEventListener("push", (event) => {
  event.waitUntil(showPushed(event.data));
});

async function showPushed(data) {
  let note = {};
  try {
    note = data ? data.json() : {};
  } catch (error) {
    note = {title: data ? data.text() : ""};
  }
  const windows = await self.clients.matchAll({type: "window", includeUncontrolled: true});
  if (windows.some((client) => client.visibilityState === "visible")) return;
  const title = note.title || "Assistant";
  const options = {
    body: note.body && note.body !== note.title ? note.body : "",
    tag: note.id || undefined,             // the same notification twice replaces, not repeats
    timestamp: Date.parse(note.timestamp) || Date.now(),
    icon: "/static/icon.svg",
    badge: "/static/icon.svg",
    data: {id: note.id, type: note.type, reminder_id: (note.data || {}).reminder_id},
    requireInteraction: note.type === "reminder",
  };
  await self.registration.showNotification(title, options);
}

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(openInbox(event.notification.data || {}));
});

async function openInbox(data) {
  const windows = await self.clients.matchAll({type: "window", includeUncontrolled: true});
  const existing = windows.find((client) => new URL(client.url).origin === self.location.origin);
  if (existing) {
    await existing.focus();
    existing.postMessage({type: "assistant.notification_click", notification: data});
    return;
  }
  await self.clients.openWindow("/");
}
