// The service worker, served at /sw.js so its scope is the whole site. The frontend service puts
// two lines before this file when it serves it (plugins/frontend/__init__.py, service_worker):
//   const VERSION = "<hash of the static files>";   const SHELL = ["/", "/static/app.css", ...];
// A deployment that changes any static file changes VERSION, so these bytes change, the browser
// installs this worker again, it fills a new cache and deletes the old one.
//
// The app shell (the page, its styles, modules, vendored libraries and icons) is answered from
// the cache first, so the page opens without a network. The API (/api/...) and the chat socket
// (/ws/...) are never cached or answered from here. Other listeners (push, notificationclick)
// may be added below; they do not touch the cache.
/* global VERSION, SHELL */
// Web Push (docs/notifications.md): the `push` and `notificationclick` listeners.
importScripts("/static/push-sw.js");

const CACHE = `shell-${VERSION}`;
const NEVER_CACHED = ["/api/", "/ws/"];

self.addEventListener("install", (event) => {
  // cache: "reload" skips the HTTP cache, so the new version's files are the ones kept.
  event.waitUntil(caches.open(CACHE)
    .then((cache) => cache.addAll(SHELL.map((path) => new Request(path, {cache: "reload"}))))
    .then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names.filter((name) => name.startsWith("shell-") && name !== CACHE)
      .map((name) => caches.delete(name))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== location.origin) return;
  if (NEVER_CACHED.some((prefix) => url.pathname.startsWith(prefix))) return;
  const key = url.pathname;   // the page is "/" whatever its query
  if (!SHELL.includes(key)) return;
  event.respondWith(caches.open(CACHE).then(async (cache) => {
    const cached = await cache.match(key);
    if (cached) return cached;
    const response = await fetch(request);
    if (response.ok) cache.put(key, response.clone());
    return response;
  }));
});
