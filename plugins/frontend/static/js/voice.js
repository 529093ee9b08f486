// Voice in the chat composer (docs/voice.md): a hold-to-talk button that records with
// MediaRecorder (WebM/Opus) and streams the pieces as voice_stream_start / _chunk / _end frames,
// showing the recogniser's interim text as it comes and the final text as the person's message;
// and spoken replies: the `stream_segments` of a reply played one after another, in order.
// chat.js calls attachVoice() once; everything voice-specific lives here.
import {h} from "./dom.js";

const TIMESLICE_MS = 250;
const MIME_TYPES = ["audio/webm;codecs=opus", "audio/webm", "audio/ogg;codecs=opus"];
const SPEAK_KEY = "assistant.speak_replies";

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let start = 0; start < bytes.length; start += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(start, start + 0x8000));
  }
  return btoa(binary);
}

// Plays audio URLs one at a time, in the order of their index; a reply's later sentence that
// arrives first waits for the earlier one.
export class SpeechQueue {
  constructor() {
    this.audio = new Audio();
    this.turns = new Map();   // message_id -> {next, waiting: Map(index -> url)}
    this.queue = [];
    this.playing = false;
    this.audio.addEventListener("ended", () => this.playNext());
    this.audio.addEventListener("error", () => this.playNext());
  }

  add(messageId, segment) {
    let turn = this.turns.get(messageId);
    if (!turn) { turn = {next: 0, waiting: new Map()}; this.turns.set(messageId, turn); }
    turn.waiting.set(segment.index, segment.audio_url || "");
    while (turn.waiting.has(turn.next)) {
      const url = turn.waiting.get(turn.next);
      turn.waiting.delete(turn.next);
      turn.next += 1;
      if (url) this.queue.push(url);
    }
    if (!this.playing) this.playNext();
  }

  playNext() {
    const url = this.queue.shift();
    this.playing = Boolean(url);
    if (!url) return;
    this.audio.src = url;
    this.audio.play().catch(() => this.playNext());   // autoplay refused: skip, never stall
  }

  stop() {
    this.queue = [];
    this.playing = false;
    this.audio.pause();
  }
}

// row: the composer's row of controls; showUser(text): put the recognised text in the
// conversation as the person's message.
export function attachVoice({app, row, before, showUser}) {
  const {t} = app;
  const supported = Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);
  const talk = h("button", {type: "button", class: "icon talk", "data-i18n-label": "voice.hold", "aria-label": t("voice.hold"),
    title: t("voice.hold"), "aria-pressed": "false", disabled: !supported}, h("span", {class: "mic", "aria-hidden": "true"}));
  const speak = h("button", {type: "button", class: "icon speak", "data-i18n-label": "voice.speak_replies",
    "aria-label": t("voice.speak_replies"), title: t("voice.speak_replies")}, h("span", {class: "speaker", "aria-hidden": "true"}));
  const interim = h("p", {class: "voice-interim", role: "status", "aria-live": "polite", hidden: true});
  row.insertBefore(talk, before || null);
  row.insertBefore(speak, before || null);
  row.parentNode.insertBefore(interim, row);

  const speech = new SpeechQueue();
  let speakReplies = localStorage.getItem(SPEAK_KEY) !== "0";
  const showSpeak = () => speak.setAttribute("aria-pressed", String(speakReplies));
  showSpeak();
  speak.addEventListener("click", () => {
    speakReplies = !speakReplies;
    localStorage.setItem(SPEAK_KEY, speakReplies ? "1" : "0");
    if (!speakReplies) speech.stop();
    showSpeak();
  });

  // One recording at a time: {recorder, stream, sequence, open, held: [frames before the
  // recogniser's confirmation], ended}
  let take = null;

  function say(text, level = "") {
    interim.hidden = !text;
    interim.className = `voice-interim ${level}`.trim();
    interim.textContent = text;
  }

  function sendChunk(frame) {
    if (!take) return;
    if (take.open) app.socket.send(frame); else take.held.push(frame);
  }

  async function start() {
    if (take || !supported) return;
    speech.stop();
    take = {recorder: null, stream: null, sequence: 0, open: false, held: [], ended: false};
    const current = take;
    talk.classList.add("recording");
    talk.setAttribute("aria-pressed", "true");
    say(t("voice.listening"));
    try {
      current.stream = await navigator.mediaDevices.getUserMedia({audio: {channelCount: 1, echoCancellation: true, noiseSuppression: true}});
    } catch (error) {
      finish();
      app.toast(t("voice.no_microphone", {error: error.message}), {level: "error"});
      return;
    }
    if (take !== current) { current.stream.getTracks().forEach((track) => track.stop()); return; }
    const mimeType = MIME_TYPES.find((type) => MediaRecorder.isTypeSupported(type)) || "";
    current.recorder = new MediaRecorder(current.stream, mimeType ? {mimeType, audioBitsPerSecond: 32000} : {});
    const format = (current.recorder.mimeType || mimeType).includes("ogg") ? "ogg" : "webm";
    app.socket.send({type: "voice_stream_start", format, language: app.language === "zh" ? "zh" : "en", mode: "voice_msg"});
    // Reading a piece is asynchronous: one chain keeps the pieces, and the end, in order.
    let chain = Promise.resolve();
    current.recorder.addEventListener("dataavailable", (event) => {
      if (!event.data || !event.data.size) return;
      const piece = event.data;
      chain = chain.then(async () => {
        const data = base64(await piece.arrayBuffer());
        sendChunk({type: "voice_stream_chunk", sequence: current.sequence++, audio_data: data});
      });
    });
    current.recorder.addEventListener("stop", () => {
      current.stream.getTracks().forEach((track) => track.stop());
      chain = chain.then(() => sendChunk({type: "voice_stream_end"}));
      current.ended = true;
      talk.classList.remove("recording");
      talk.setAttribute("aria-pressed", "false");
      say(t("voice.recognising"));
    });
    current.recorder.start(TIMESLICE_MS);
    if (current.stopWanted) stop();
  }

  function stop() {
    if (!take) return;
    if (!take.recorder) { take.stopWanted = true; return; }
    if (take.recorder.state !== "inactive") take.recorder.stop();
  }

  function finish() {
    if (take && take.stream) take.stream.getTracks().forEach((track) => track.stop());
    if (take && take.recorder && take.recorder.state !== "inactive") take.recorder.stop();
    take = null;
    talk.classList.remove("recording");
    talk.setAttribute("aria-pressed", "false");
  }

  // Press and hold with a pointer, or with Space / Enter on the focused button.
  talk.addEventListener("pointerdown", (event) => { event.preventDefault(); talk.setPointerCapture?.(event.pointerId); start(); });
  talk.addEventListener("pointerup", stop);
  talk.addEventListener("pointercancel", stop);
  talk.addEventListener("keydown", (event) => {
    if ((event.key === " " || event.key === "Enter") && !event.repeat) { event.preventDefault(); start(); }
  });
  talk.addEventListener("keyup", (event) => { if (event.key === " " || event.key === "Enter") { event.preventDefault(); stop(); } });
  talk.addEventListener("contextmenu", (event) => event.preventDefault());
  talk.addEventListener("click", (event) => event.preventDefault());

  const offs = [
    app.socket.on("voice_interim", (frame) => {
      if (!take) return;
      if (!take.open) {       // the confirmation: the recogniser is ready, send what was held
        take.open = true;
        take.messageId = frame.message_id;
        for (const held of take.held.splice(0)) app.socket.send(held);
      }
      if (frame.text && !take.ended) say(frame.text);
    }),
    app.socket.on("voice_final", (frame) => {
      take = null;
      const text = frame.text || "";
      if (text) { say(""); showUser(text); } else say(t("voice.nothing_heard"), "muted");
      if (!text) setTimeout(() => { if (!take) say(""); }, 3000);
    }),
    app.socket.on("error", (frame) => {
      if (!take) return;   // while the person holds the button, an error is the recording's
      finish();
      say(t("voice.failed", {error: frame.error || frame.content || frame.errorType || ""}), "error");
      setTimeout(() => { if (!take) say(""); }, 5000);
    }),
    app.socket.on("stream_segments", (frame) => {
      if (!speakReplies || (frame.session_id && frame.session_id !== app.socket.sessionId)) return;
      for (const segment of frame.segments || []) speech.add(frame.message_id || frame.turn_id, segment);
    }),
  ];
  return {
    talk, speak, interim, speech,
    detach() { finish(); speech.stop(); for (const off of offs) off(); },
  };
}
