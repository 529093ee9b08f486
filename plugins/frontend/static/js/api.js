// The gateway's HTTP API, through the frontend service's proxy on this origin.
// The access token lives in this module's memory only; the refresh token is an HttpOnly cookie
// the proxy sets and reads (docs/web-client.md), so no script on the page can read either from storage.
import {language} from "./i18n.js";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.errorType = body && body.errorType;
    this.hint = body && body.hint;
  }
}

const RENEW_BEFORE_SECONDS = 60;
const SIGNED_IN_MARK = "assistant.signed_in";

export class ApiClient {
  constructor(base = "/api/v1") {
    this.base = base;
    this.token = null;
    this.expires = 0;          // unix seconds
    this.profile = null;
    this.listeners = new Set();
    this.renewing = null;
    this.timer = null;
    this.oneTimePassword = null;
  }

  onChange(listener) { this.listeners.add(listener); return () => this.listeners.delete(listener); }
  emit() { for (const listener of this.listeners) listener(this.signedIn); }
  get signedIn() { return Boolean(this.token); }

  accept(answer) {
    this.token = answer.token;
    // Not the token: only a mark that a refresh cookie should exist, so a fresh page does not
    // ask for a renewal (and log a 401) when nobody signed in here.
    localStorage.setItem(SIGNED_IN_MARK, "1");
    this.expires = Number(answer.expires) || Math.floor(Date.now() / 1000) + 600;
    clearTimeout(this.timer);
    const wait = Math.max(5, this.expires - Date.now() / 1000 - RENEW_BEFORE_SECONDS);
    this.timer = setTimeout(() => this.renew().catch(() => {}), wait * 1000);
  }

  async post(path, body, token = null) {
    const headers = {"Content-Type": "application/json", "Accept-Language": language()};
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(this.base + path, {
      method: "POST", headers, body: JSON.stringify(body || {}), credentials: "same-origin",
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(response.status, answer);
    return answer;
  }

  async login(username, password) {
    const answer = await this.post("/auth/login", {username, password});
    this.accept(answer);
    // A one-time password: kept in memory only until the person has chosen their own, which
    // the shell asks for before anything else (POST /auth/password needs the current one).
    this.oneTimePassword = answer.password_change_required ? password : null;
    await this.loadProfile();
    this.emit();
  }

  // Accept an invitation (the code from the link) with the password the person chose: signed in.
  async acceptInvitation(code, password) {
    this.accept(await this.post("/auth/invitation", {code, password}));
    this.oneTimePassword = null;
    await this.loadProfile();
    this.emit();
  }

  // Until the person has chosen their own password their tokens open nothing else (403
  // password_change_required): after the login (which said so) and after a reload (the profile
  // says so; the one-time password is then asked again, as it is no longer in memory).
  get passwordChangeRequired() {
    return Boolean(this.token && (this.oneTimePassword || (this.profile && this.profile.password_change_required)));
  }

  // The person's own password instead of the one-time one (`currentPassword`: typed again after a
  // reload). The answer's new tokens replace this login's (the gateway ends every earlier login).
  async changePassword(newPassword, currentPassword = this.oneTimePassword) {
    const token = await this.validToken();
    this.accept(await this.post("/auth/password",
      {current_password: currentPassword, new_password: newPassword}, token));
    this.oneTimePassword = null;
    if (this.profile) this.profile = {...this.profile, password_change_required: false};
    await this.loadProfile().catch(() => {});   // the change is made; the profile can follow later
    this.emit();
  }

  async register(fields) {
    this.accept(await this.post("/auth/register", fields));
    await this.loadProfile();
    this.emit();
  }

  // A page opened again: the cookie, if any, buys a fresh access token. Resolves true (signed
  // in), false (nobody is), or null: the server could not be reached (offline), so try again later.
  async restore() {
    if (!localStorage.getItem(SIGNED_IN_MARK)) return false;
    try {
      await this.renew();
      await this.loadProfile();
      this.emit();
      return true;
    } catch (error) {
      const unreachable = !(error instanceof ApiError) || error.errorType === "gateway_unreachable";
      return unreachable ? null : false;
    }
  }

  // One renewal at a time; callers arriving meanwhile wait for it.
  renew() {
    if (!this.renewing) {
      this.renewing = this.post("/auth/refresh", {})
        .then((answer) => { this.accept(answer); return this.token; })
        .catch((error) => {
          if (error instanceof ApiError && error.status === 401) this.forget();
          throw error;
        })
        .finally(() => { this.renewing = null; });
    }
    return this.renewing;
  }

  async validToken() {
    if (this.token && this.expires - Date.now() / 1000 < 30) await this.renew();
    return this.token;
  }

  async loadProfile() {
    this.profile = await this.request("GET", "/profile");
    await this.adoptDeviceZone();
    return this.profile;
  }

  // "Tomorrow at 9" means 9 where the person is: a profile whose zone nobody chose takes this
  // device's once (a choice, made here or in Settings, is never overridden).
  async adoptDeviceZone() {
    if (!this.profile || this.profile.timezone_chosen !== false || this.passwordChangeRequired) return;
    let zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (error) { return; }
    if (!zone) return;
    try {
      this.profile = await this.request("PUT", "/profile", {json: {timezone: zone}});
    } catch (error) {
      // A zone the server does not know (an old tz database): its default stays.
    }
  }

  forget() {
    const was = this.signedIn;
    this.token = null;
    this.expires = 0;
    this.profile = null;
    this.oneTimePassword = null;
    clearTimeout(this.timer);
    localStorage.removeItem(SIGNED_IN_MARK);
    if (was) this.emit();
  }

  async logout() {
    try {
      await fetch(this.base + "/auth/logout", {
        method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json", ...(this.token ? {Authorization: `Bearer ${this.token}`} : {})},
        body: "{}",
      });
    } finally {
      this.forget();
    }
  }

  // request("GET", "/sessions", {query: {...}}) / request("POST", "/sessions", {json: {...}})
  // / request("POST", "/files/upload", {body: formData}) / {raw: true} for the Response itself.
  async request(method, path, options = {}, retried = false) {
    const token = await this.validToken();
    const url = new URL(this.base + path, location.origin);
    for (const [key, value] of Object.entries(options.query || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
    }
    // The interface's language, not the browser's: what the gateway names things in (a new
    // session's default title, docs/sessions.md) follows the person's choice in Settings.
    const headers = {"Accept-Language": language(), ...(options.headers || {})};
    if (token) headers.Authorization = `Bearer ${token}`;
    let body = options.body;
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    const response = await fetch(url, {method, headers, body, credentials: "same-origin"});
    if (response.status === 401 && !retried && this.token) {
      await this.renew();
      return this.request(method, path, options, true);
    }
    if (options.raw && response.ok) return response;
    const answer = response.status === 204 ? {} : await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(response.status, answer);
    return answer;
  }

  get(path, query) { return this.request("GET", path, {query}); }
  send(method, path, json) { return this.request(method, path, {json}); }

  // An image (or any file) upload; resolves with the spec's File object.
  upload(file) {
    const form = new FormData();
    form.append("file", file, file.name || "pasted-image.png");
    return this.request("POST", "/files/upload", {body: form});
  }

  // Same-origin URLs such as thumbnails need the bearer token: fetch and show as a blob: URL.
  async blobUrl(path) {
    const response = await this.request("GET", path.replace(/^\/api\/v1/, ""), {raw: true});
    return URL.createObjectURL(await response.blob());
  }
}
