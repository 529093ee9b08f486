// Performance: each service's CPU and memory sampled by the console, live and as history
// charts; one service's min/mean/max/p95 over the window. Refreshed every 5 s.
import { $, badge, bytes, el, every, get, number, replace, table, when } from "./console.js";
import { lineChart } from "./chart.js";

const METRICS = [["cpuPercent", "CPU %", (v) => `${number(v)} %`], ["rssBytes", "Memory", bytes],
                 ["threads", "Threads", (v) => number(v, 0)], ["openFiles", "Open files", (v) => number(v, 0)],
                 ["connections", "Connections", (v) => number(v, 0)]];

async function charts(window, chosen) {
  const body = chosen ? { services: [await get(`/api/performance/${encodeURIComponent(chosen)}`, { window })] }
    : await get("/api/performance/history", { window });
  const shown = body.services.filter((service) => chosen || service.samples.length);
  const series = (metric, scale = 1) => shown.map((service) => ({
    name: service.name, points: service.samples.map((sample) => [sample.time, sample[metric] / scale]) }));
  lineChart($("#chart-memory"), series("rssBytes", 1024 * 1024), { format: (v) => `${number(v, 0)} MiB`, label: "memory chart" });
  lineChart($("#chart-cpu"), series("cpuPercent"), { format: (v) => `${number(v)} %`, label: "CPU chart" });
}

async function current() {
  const body = await get("/api/performance/dashboard");
  const select = $("#perf-service");
  if (select.options.length === 1) {
    for (const row of body.services) select.append(el("option", { value: row.id }, row.name));
  }
  $("#perf-updated").textContent = `sampled ${when(body.sampledAt)}, every ${body.interval} s`;
  $("#perf-table-title").textContent = "Now, with the mean and p95 of the last 5 minutes";
  const trend = (stats, format) => (stats ? `${format(stats.mean)} / ${format(stats.p95)}` : "–");
  replace($("#perf-table"), table([
    { title: "Service", value: (row) => row.name },
    { title: "State", value: (row) => badge(row.status) },
    { title: "CPU", class: "num", value: (row) => (row.sample ? `${number(row.sample.cpuPercent)} %` : "–") },
    { title: "CPU mean / p95", class: "num", value: (row) => trend(row.cpuPercent, (v) => `${number(v)} %`) },
    { title: "Memory", class: "num", value: (row) => (row.sample ? bytes(row.sample.rssBytes) : "–") },
    { title: "Memory mean / p95", class: "num", value: (row) => trend(row.rssBytes, bytes) },
    { title: "Threads", class: "num", value: (row) => (row.sample ? row.sample.threads : "–") },
    { title: "Open files", class: "num", value: (row) => (row.sample ? row.sample.openFiles : "–") },
    { title: "Connections", class: "num", value: (row) => (row.sample ? row.sample.connections : "–") },
  ], body.services));
}

async function summary(window, chosen) {
  const body = await get(`/api/performance/${encodeURIComponent(chosen)}/summary`, { window });
  $("#perf-table-title").textContent = `${body.name}: ${body.count} samples over the window`;
  replace($("#perf-table"), table([
    { title: "Metric", value: ([, label]) => label },
    ...["min", "mean", "max", "p95"].map((stat) => ({
      title: stat, class: "num", value: ([key, , format]) => (body[key] ? format(body[key][stat]) : "–") })),
  ], METRICS));
}

async function load() {
  const window = $("#perf-window").value;
  const chosen = $("#perf-service").value;
  await Promise.all([charts(window, chosen), chosen ? summary(window, chosen) : current()]);
}

$("#perf-service").addEventListener("change", () => load());
$("#perf-window").addEventListener("change", () => load());
every(5000, load);
