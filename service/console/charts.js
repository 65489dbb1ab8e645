// Charts drawn as plain SVG: a scatter of values with a rolling mean, a sparkline, and
// shares as one stacked bar.

import { h, num, percent, s } from "./dom.js";

/** The mean of each value and the `window - 1` before it. */
export function rollingMean(values, window) {
  const means = [];
  let sum = 0;
  values.forEach((value, i) => {
    sum += value;
    if (i >= window) sum -= values[i - window];
    means.push(sum / Math.min(i + 1, window));
  });
  return means;
}

/** Values in order (episodes by finishing time), as dots, and their rolling mean as a line. */
export function rewardChart(values, { window, label = "reward" } = {}) {
  const width = 640;
  const height = 220;
  const pad = { left: 44, right: 12, top: 12, bottom: 28 };
  const low = Math.min(0, ...values);
  const high = Math.max(low + 1e-9, ...values);
  const x = (i) => pad.left + (values.length < 2 ? 0.5 : i / (values.length - 1)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - (v - low) / (high - low)) * (height - pad.top - pad.bottom);
  const means = rollingMean(values, window);
  const line = means.map((m, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(m).toFixed(1)}`).join("");
  const ticks = [low, (low + high) / 2, high];
  return s(
    "svg",
    {
      viewBox: `0 0 ${width} ${height}`,
      class: "chart",
      role: "img",
      "aria-label": `${label} of ${values.length} episodes in finishing order, with its rolling mean over ${window}`,
    },
    ticks.map((t) =>
      s("g", {},
        s("line", { x1: pad.left, x2: width - pad.right, y1: y(t), y2: y(t), class: "grid" }),
        s("text", { x: pad.left - 6, y: y(t) + 4, class: "tick", "text-anchor": "end" }, num(t, 2)),
      ),
    ),
    s("text", { x: pad.left, y: height - 8, class: "tick" }, "first"),
    s("text", { x: width - pad.right, y: height - 8, class: "tick", "text-anchor": "end" },
      `episode ${values.length}`),
    values.map((v, i) => s("circle", { cx: x(i), cy: y(v), r: 2.5, class: "dot" })),
    s("path", { d: line, class: "mean" }),
  );
}

/** A small line of recent values (the Live page's steps per second). */
export function sparkline(values, { width = 240, height = 48 } = {}) {
  const high = Math.max(1e-9, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const d = values.map((v, i) => `${i ? "L" : "M"}${(i * step).toFixed(1)},${(height - 2 - (v / high) * (height - 4)).toFixed(1)}`).join("");
  return s("svg", { viewBox: `0 0 ${width} ${height}`, class: "sparkline", preserveAspectRatio: "none", "aria-hidden": "true" },
    s("path", { d, class: "mean" }));
}

const OUTCOME_COLOURS = { win: "var(--win)", draw: "var(--draw)", loss: "var(--loss)" };
const PALETTE = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

/** Shares (value → rate) as one stacked bar with its legend; outcomes win/draw/loss first. */
export function sharesBar(rates) {
  const order = ["win", "draw", "loss"];
  const names = Object.keys(rates).sort((a, b) => {
    const ia = order.indexOf(a);
    const ib = order.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  const colour = (name, i) => OUTCOME_COLOURS[name] ?? PALETTE[i % PALETTE.length];
  return h("div", { class: "shares" },
    h("div", { class: "bar", role: "img", "aria-label": names.map((n) => `${n} ${percent(rates[n])}`).join(", ") },
      names.map((name, i) => h("span", {
        style: `width:${rates[name] * 100}%;background:${colour(name, i)}`,
        title: `${name}: ${percent(rates[name])}`,
      }))),
    h("ul", { class: "legend" }, names.map((name, i) =>
      h("li", { dataset: { share: name } },
        h("i", { style: `background:${colour(name, i)}` }), `${name} ${percent(rates[name])}`))),
  );
}

/** A value between `low` and `high` as a short horizontal bar. */
export function meter(value, high) {
  const share = high > 0 ? Math.max(0, Math.min(1, Math.abs(value) / high)) : 0;
  return h("span", { class: `meter${value < 0 ? " negative" : ""}` },
    h("span", { style: `width:${share * 100}%` }));
}
