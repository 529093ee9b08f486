// A small SVG line chart: time on x, one path per series, with axes, grid and a legend.
// Colours come from the style sheet's .s0-.s7 classes (no inline style under the CSP).
import { el, replace } from "./console.js";

const HEIGHT = 220;
const MARGIN = { top: 10, right: 12, bottom: 24, left: 56 };

/**
 * series: [{name, points: [[time (seconds or ms), value], ...]}]
 * options: {format: value => text, min: number}
 */
export function lineChart(container, series, options = {}) {
  const format = options.format || ((value) => String(Math.round(value * 10) / 10));
  const width = Math.max(container.clientWidth || 600, 280);
  const drawn = series.filter((line) => line.points.length);
  const all = drawn.flatMap((line) => line.points);
  const svg = el("svg", { class: "chart", viewBox: `0 0 ${width} ${HEIGHT}`, role: "img",
                          "aria-label": options.label || "chart", width, height: HEIGHT });
  if (!all.length) {
    svg.append(el("text", { x: width / 2, y: HEIGHT / 2, "text-anchor": "middle" }, "No samples yet"));
    replace(container, svg);
    return svg;
  }
  const times = all.map((point) => point[0]);
  const values = all.map((point) => point[1]);
  const t0 = Math.min(...times);
  const t1 = Math.max(...times, t0 + 1);
  const v0 = Math.min(options.min ?? 0, ...values);
  const v1 = niceMax(Math.max(...values, v0 + 1e-9));
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (t) => MARGIN.left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v) => MARGIN.top + plotH - ((v - v0) / (v1 - v0 || 1)) * plotH;

  for (let step = 0; step <= 4; step += 1) {
    const value = v0 + ((v1 - v0) * step) / 4;
    const py = y(value);
    svg.append(el("line", { class: step ? "grid" : "axis", x1: MARGIN.left, x2: width - MARGIN.right, y1: py, y2: py }));
    svg.append(el("text", { x: MARGIN.left - 6, y: py + 4, "text-anchor": "end" }, format(value)));
  }
  const ms = t1 > 1e12 ? 1 : 1000;
  for (const t of [t0, (t0 + t1) / 2, t1]) {
    svg.append(el("text", { x: x(t), y: HEIGHT - 6, "text-anchor": t === t0 ? "start" : t === t1 ? "end" : "middle" },
      new Date(t * ms).toLocaleTimeString()));
  }
  series.forEach((line, index) => {
    if (!line.points.length) return;
    const d = line.points.map((point, i) => `${i ? "L" : "M"}${x(point[0]).toFixed(1)},${y(point[1]).toFixed(1)}`).join("");
    svg.append(el("path", { class: `series s${index % 8}`, d, "data-series": line.name },
      el("title", {}, `${line.name}: ${format(line.points[line.points.length - 1][1])}`)));
  });
  const legend = el("div", { class: "legend" }, series.map((line, index) =>
    el("span", {}, el("span", { class: `swatch s${index % 8}` }), line.name,
      line.points.length ? ` (${format(line.points[line.points.length - 1][1])})` : " (no samples)")));
  replace(container, svg, legend);
  return svg;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (value <= step * power) return step * power;
  }
  return 10 * power;
}
