// STT: upload a recording (or record one) and transcribe it through the voice service; the
// engines it has; the console's recognition log (last 200), live from the `stt-log` push.
import { $, api, badge, el, explain, get, guard, notify, number, onPush, onSubmit, replace, table, when } from "./console.js";

let entries = [];

function renderLog() {
  replace($("#stt-log"), table([
    { title: "When", value: (e) => when(e.time) },
    { title: "Text", class: "wrap", value: (e) => (e.success === false ? el("span", { class: "field-error" }, e.error_type || "failed") : e.text || el("span", { class: "muted" }, "(nothing said)")) },
    { title: "Language", value: (e) => e.language || "–" },
    { title: "Engine", value: (e) => e.engine || "–" },
    { title: "Audio ms", class: "num", value: (e) => number(e.audio_ms, 0) },
    { title: "Processing ms", class: "num", value: (e) => number(e.processingMs) },
    { title: "Source", value: (e) => e.source || "–" },
  ], entries.slice().reverse(), "No recognition yet: transcribe a recording above."));
}

async function transcribe(data) {
  replace($("#stt-result"), el("p", { class: "muted" }, "Transcribing…"));
  try {
    const body = await api("POST", "/api/voice/transcribe", data);
    replace($("#stt-result"), el("div", { class: "card", id: "stt-text" },
      el("div", { class: "label" }, `${body.language} · ${body.engine} · ${number(body.duration_ms, 0)} ms of audio in ${number(body.processing_ms, 0)} ms`),
      el("p", { class: "value-text" }, body.text || "(nothing was said)")));
  } catch (error) {
    replace($("#stt-result"), el("p", { class: "field-error", role: "alert" }, explain(error)));
  }
}

async function status() {
  const body = await get("/api/voice/status");
  const stt = body.stt || {};
  replace($("#stt-status"), table([
    { title: "Engine", value: (e) => el("strong", {}, e.name) },
    { title: "Model", value: (e) => e.model || "–" },
    { title: "Languages", value: (e) => (e.languages || []).join(", ") },
    { title: "State", value: (e) => (e.loaded ? badge("ok") : el("span", { class: "field-error" }, e.error || "not loaded")) },
  ], stt.engines || [], "No speech-recognition engine."),
  el("p", { class: "muted" }, `Default engine: ${stt.default_engine || "–"}; default language: ${stt.default_language || "–"}`));
}

async function logs() {
  const body = await get("/api/voice/logs");
  entries = Array.isArray(body) ? body : body.entries || body.logs || [];
  renderLog();
}

onSubmit($("#stt-upload"), (data) => transcribe(data));

let recorder = null;
$("#stt-record").addEventListener("click", async () => {
  const button = $("#stt-record");
  if (recorder) { recorder.stop(); return; }
  if (!navigator.mediaDevices || !window.MediaRecorder) {
    notify("This browser cannot record here; upload a file instead.", "error");
    return;
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const chunks = [];
    recorder = new MediaRecorder(stream);
    recorder.addEventListener("dataavailable", (event) => chunks.push(event.data));
    recorder.addEventListener("stop", () => {
      stream.getTracks().forEach((track) => track.stop());
      recorder = null;
      button.textContent = "Record from microphone";
      const data = new FormData();
      data.set("audio", new Blob(chunks, { type: "audio/webm" }), "recording.webm");
      data.set("language", $("#stt-upload").language.value);
      data.set("format", "webm");
      transcribe(data);
    });
    recorder.start();
    button.textContent = "Stop and transcribe";
  } catch (error) {
    notify(`The microphone is not available: ${error.message}`, "error");
  }
});

onPush("stt-log", (message) => {
  entries.push(message.entry);
  entries = entries.slice(-200);
  renderLog();
});
renderLog();
logs().catch((error) => notify(explain(error), "error"));
guard(() => status().catch((error) => notify(explain(error), "error")));
