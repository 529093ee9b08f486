// /ws/chat for the open session: reconnects with back-off, resumes with `after=<turn_id>:<seq>`
// (the gateway replays what this device missed) and drops any frame it has already seen, so an
// interrupted reply completes once, without a repeat. A close with 1012 "service restart" (a
// rolling restart: another process already serves) is answered at once, not after a back-off.

const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 15000;
const SERVICE_RESTART = 1012;
// Spread over this much so the devices of a replaced worker do not all arrive in one instant.
const RESTART_JITTER_MS = 500;

export function clientId() {
  let id = localStorage.getItem("assistant.client_id");
  if (!id) {
    id = "web-" + (crypto.randomUUID ? crypto.randomUUID() : Math.random().toString(36).slice(2));
    localStorage.setItem("assistant.client_id", id);
  }
  return id;
}

export function deviceName() {
  const agent = navigator.userAgent;
  const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox"
    : /Chrom(e|ium)\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "Browser";
  const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS"
    : /Mac OS X/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
  return system ? `${browser} on ${system}` : browser;
}

export class ChatSocket {
  constructor(api) {
    this.api = api;
    this.handlers = new Map();
    this.sessionId = null;
    this.ws = null;
    this.state = "closed";        // closed | connecting | open | waiting
    this.failures = 0;
    this.timer = null;
    this.outbox = [];
    this.unanswered = [];         // messages sent on this socket that got neither stream_start nor queued
    this.seen = new Map();        // turn_id -> highest seq applied
    this.lastOfSession = new Map(); // session_id -> "<turn_id>:<seq>", for `after`
    this.wanted = false;
    addEventListener("online", () => this.reconnectSoon(0));
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.reconnectSoon(0);
    });
  }

  // on("stream_chunk", fn), on("*", fn) for every frame, on("state", fn) for connection changes.
  on(type, handler) {
    if (!this.handlers.has(type)) this.handlers.set(type, new Set());
    this.handlers.get(type).add(handler);
    return () => this.handlers.get(type).delete(handler);
  }

  emit(type, value) {
    for (const handler of this.handlers.get(type) || []) {
      try { handler(value); } catch (error) { console.warn("handler failed", error); }
    }
  }

  setState(state) {
    this.state = state;
    this.emit("state", state);
  }

  open(sessionId) {
    this.sessionId = sessionId;
    this.wanted = true;
    this.failures = 0;
    this.drop();
    this.connect();
  }

  close() {
    this.wanted = false;
    clearTimeout(this.timer);
    this.drop();
    this.setState("closed");
  }

  drop() {
    this.unanswered = [];
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.onclose = ws.onmessage = ws.onopen = ws.onerror = null;
      ws.close(1000);
    }
  }

  // A test (or a person on a train) may cut the line; the next connection resumes.
  interrupt() {
    if (this.ws) this.ws.close(4000, "interrupted");
  }

  async connect() {
    clearTimeout(this.timer);
    if (!this.wanted || (this.ws && this.ws.readyState <= 1)) return;
    this.setState("connecting");
    let token;
    try {
      token = this.failures > 0 ? await this.api.renew() : await this.api.validToken();
    } catch (error) {
      if (!this.api.signedIn) { this.close(); return; }
      this.scheduleRetry();
      return;
    }
    const params = new URLSearchParams({token, session_id: this.sessionId, client_id: clientId(),
      device_name: deviceName()});
    const after = this.lastOfSession.get(this.sessionId);
    if (after) params.set("after", after);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/ws/chat?${params}`);
    this.ws = ws;
    ws.onopen = () => {
      this.failures = 0;
      this.setState("open");
      const pending = this.outbox.splice(0);
      for (const frame of pending) this.transmit(ws, frame);
    };
    ws.onmessage = (event) => {
      let frame;
      try { frame = JSON.parse(event.data); } catch (error) { return; }
      this.receive(frame);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      // The gateway may not have admitted these: they go again (same client_msg_id, so never twice).
      this.outbox.unshift(...this.unanswered.splice(0));
      if (event.code === SERVICE_RESTART) this.reconnectAfterRestart();
      else this.scheduleRetry();
    };
  }

  scheduleRetry() {
    if (!this.wanted) return;
    this.failures += 1;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.failures - 1));
    this.setState("waiting");
    this.reconnectSoon(delay * (0.75 + Math.random() * 0.5));
  }

  // Nothing is wrong: the replacement already serves, so no back-off and no token renewal.
  reconnectAfterRestart() {
    if (!this.wanted) return;
    this.setState("waiting");
    this.reconnectSoon(Math.random() * RESTART_JITTER_MS);
  }

  reconnectSoon(delay) {
    if (!this.wanted || (this.ws && this.ws.readyState <= 1)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  receive(frame) {
    if (frame.turn_id !== undefined && frame.turn_id !== null && typeof frame.seq === "number") {
      const last = this.seen.get(frame.turn_id);
      if (last !== undefined && frame.seq <= last) return;   // replayed twice: already shown
      this.seen.set(frame.turn_id, frame.seq);
      if (frame.session_id) this.lastOfSession.set(frame.session_id, `${frame.turn_id}:${frame.seq}`);
    }
    this.answered(frame);
    this.emit(frame.type, frame);
    this.emit("*", frame);
  }

  // Frames sent while the line is down wait and go out when it is back (a `message` carries its
  // client_msg_id, so the gateway never runs one twice).
  send(frame) {
    const full = {session_id: this.sessionId, timestamp: Date.now(), ...frame};
    if (this.ws && this.ws.readyState === 1) this.transmit(this.ws, full);
    else {
      this.outbox.push(full);
      this.reconnectSoon(0);
    }
  }

  transmit(ws, frame) {
    ws.send(JSON.stringify(frame));
    if (frame.type === "message" && frame.client_msg_id) this.unanswered.push(frame);
  }

  // A frame naming its client_msg_id (`queued`, an error) answers that message; a `stream_start`
  // of the session answers its oldest one (the turns of a session start in order).
  answered(frame) {
    if (!this.unanswered.length) return;
    let index = -1;
    if (frame.client_msg_id) index = this.unanswered.findIndex((sent) => sent.client_msg_id === frame.client_msg_id);
    else if (frame.type === "stream_start") index = this.unanswered.findIndex((sent) => sent.session_id === frame.session_id);
    if (index >= 0) this.unanswered.splice(index, 1);
  }
}
