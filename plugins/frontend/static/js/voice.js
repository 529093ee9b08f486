// Voice on /ws/chat: hold-to-talk recording streamed as voice_stream_* frames (interim text as the
// service recognises it), and spoken replies played sentence by sentence from stream_segments.

const STREAM_TYPES = [["audio/webm;codecs=opus", "webm"], ["audio/webm", "webm"], ["audio/ogg;codecs=opus", "ogg"]];
const CHUNK_MS = 250;

function base64Of(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

// The audio path on this origin: the gateway may prefix PUBLIC_BASE_URL, which the page's CSP
// would refuse; the proxy serves the same path here.
function localPath(url) {
  const parsed = new URL(url, location.origin);
  return parsed.pathname + parsed.search;
}

export function voiceSupported() {
  return Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);
}

// A recorder bound to the chat socket. `mode()` says which reply mode to ask for.
export class VoiceRecorder {
  constructor(app, mode) {
    this.app = app;
    this.mode = mode;
    this.recording = false;
    this.recorder = null;
    this.stream = null;
  }

  async start() {
    if (this.recording) return;
    this.recording = true;
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({audio: true});
    } catch (error) {
      this.recording = false;
      throw error;
    }
    if (!this.recording) { this.release(); return; }   // released before the microphone opened
    const language = this.app.language === "zh" ? "zh" : "en";
    const streamed = STREAM_TYPES.find(([type]) => MediaRecorder.isTypeSupported(type));
    const recorder = new MediaRecorder(this.stream, streamed ? {mimeType: streamed[0]} : undefined);
    this.recorder = recorder;
    let chain = Promise.resolve();
    if (streamed) {
      let sequence = 0;
      this.app.socket.send({type: "voice_stream_start", format: streamed[1], language, mode: this.mode()});
      recorder.ondataavailable = (event) => {
        if (!event.data.size) return;
        const number = sequence++;
        chain = chain.then(async () => this.app.socket.send({type: "voice_stream_chunk",
          audio_data: await base64Of(event.data), sequence: number}));
      };
      recorder.onstop = () => { chain = chain.then(() => this.app.socket.send({type: "voice_stream_end"})); };
      recorder.start(CHUNK_MS);
    } else {
      // No WebM/Ogg recorder (Safari records MP4): the whole recording in one voice_input.
      const parts = [];
      recorder.ondataavailable = (event) => { if (event.data.size) parts.push(event.data); };
      recorder.onstop = async () => {
        const blob = new Blob(parts, {type: recorder.mimeType});
        this.app.socket.send({type: "voice_input", audio_data: await base64Of(blob), language,
          format: (recorder.mimeType.split("/")[1] || "mp4").split(";")[0], mode: this.mode(),
          client_msg_id: crypto.randomUUID ? crypto.randomUUID() : String(Date.now())});
      };
      recorder.start();
    }
  }

  stop() {
    if (!this.recording) return;
    this.recording = false;
    if (this.recorder && this.recorder.state !== "inactive") this.recorder.stop();
    this.release();
  }

  release() {
    if (this.stream) for (const track of this.stream.getTracks()) track.stop();
    this.stream = null;
  }
}

// Plays each reply's sentences in order as their audio arrives.
export class ReplySpeaker {
  constructor(api) {
    this.api = api;
    this.enabled = localStorage.getItem("assistant.speak") === "1";
    this.queue = [];
    this.playing = false;
    this.played = [];           // paths played, newest last (the tests read it)
    this.audio = new Audio();
    this.audio.addEventListener("ended", () => this.next());
    this.audio.addEventListener("error", () => this.next());
  }

  toggle() {
    this.enabled = !this.enabled;
    localStorage.setItem("assistant.speak", this.enabled ? "1" : "0");
    if (!this.enabled) this.stopAll();
    return this.enabled;
  }

  add(segments) {
    if (!this.enabled) return;
    const usable = (segments || []).filter((segment) => segment.audio_url).sort((a, b) => a.index - b.index);
    for (const segment of usable) this.queue.push(localPath(segment.audio_url));
    if (!this.playing) this.next();
  }

  next() {
    const path = this.queue.shift();
    if (!path) { this.playing = false; return; }
    this.playing = true;
    this.played.push(path);
    this.audio.src = path;
    this.audio.play().catch(() => this.next());
  }

  stopAll() {
    this.queue = [];
    this.audio.pause();
    this.playing = false;
  }
}
