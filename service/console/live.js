// What the service is doing now, from its Prometheus metrics (/metrics): steps per
// second, live episodes, episodes finished, errors by code. Read every few seconds;
// rates are the change between two reads.

import { ApiError, request } from "./api.js";
import { sparkline } from "./charts.js";
import { card, h, notice, num, table } from "./dom.js";

const EVERY_MS = 2000;
const HISTORY = 90;

/** Prometheus text format: samples {name, labels, value}. */
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!match) continue;
    const labels = {};
    for (const [, name, value] of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[name] = value.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of a metric's samples by one label (or all together with label null). */
function sumBy(samples, name, label) {
  const sums = {};
  for (const sample of samples) {
    if (sample.name !== name) continue;
    const key = label ? sample.labels[label] ?? "" : "all";
    sums[key] = (sums[key] ?? 0) + sample.value;
  }
  return sums;
}

function read(samples) {
  return {
    steps: sumBy(samples, "wander_steps_total", "env"),
    invalid: sumBy(samples, "wander_invalid_actions_total", "env"),
    live: sumBy(samples, "wander_live_episodes", "env"),
    created: sumBy(samples, "wander_episodes_created_total", "env"),
    finished: sumBy(samples, "wander_episodes_finished_total", "env"),
    errors: sumBy(samples, "wander_errors_total", "code"),
    backlog: sumBy(samples, "wander_archive_backlog", null).all ?? 0,
    deadLetters: sumBy(samples, "wander_archive_dead_letters", null).all ?? 0,
  };
}

const total = (sums) => Object.values(sums).reduce((a, b) => a + b, 0);
const rate = (now, before, seconds, key) => (before && seconds > 0 ? Math.max(0, ((now[key] ?? 0) - (before[key] ?? 0)) / seconds) : null);

export async function render(main, params, { showError }) {
  main.append(h("h1", {}, "Live"), h("p", { class: "muted" }, `The service's activity, from /metrics every ${EVERY_MS / 1000} s.`));
  const box = h("div");
  main.append(box);
  const history = [];
  let before = null;
  let at = 0;
  let first = null;

  async function poll() {
    let now;
    try {
      now = read(parseMetrics(await request("metrics", { text: true })));
    } catch (error) {
      box.replaceChildren();
      if (error instanceof ApiError && error.status === 403) {
        box.append(notice("error", "The Live page reads /metrics, which only an admin key may read: this key's role may not. Enter an admin key to see the service's activity."));
      } else {
        showError(box, error);
      }
      return false;
    }
    const time = performance.now();
    const seconds = (time - at) / 1000;
    first ??= now;
    const steps = before ? rate({ all: total(now.steps) }, { all: total(before.steps) }, seconds, "all") : null;
    if (steps !== null) history.push(steps);
    if (history.length > HISTORY) history.shift();
    const finished = before ? rate({ all: total(now.finished) }, { all: total(before.finished) }, seconds, "all") : null;
    const errors = before ? rate({ all: total(now.errors) }, { all: total(before.errors) }, seconds, "all") : null;
    const envs = [...new Set([...Object.keys(now.steps), ...Object.keys(now.live), ...Object.keys(now.created)])].sort();
    const codes = Object.keys(now.errors).sort();
    box.replaceChildren(
      h("div", { class: "cards figures" },
        figure("Steps / s", steps, "steps-rate", history.length > 1 ? sparkline(history) : null),
        figure("Live episodes", total(now.live), "live-episodes"),
        figure("Episodes finished / s", finished, "finished-rate"),
        figure("Errors / s", errors, "errors-rate"),
        figure("Archive backlog", now.backlog, "backlog", now.deadLetters ? notice("warn", `${now.deadLetters} dead letters`) : null)),
      card("By environment", envs.length ? table(["Environment", "Steps / s", "Steps", "Live episodes", "Created", "Finished", "Invalid actions / s"],
        envs.map((env) => h("tr", { dataset: { env } },
          h("td", {}, env), h("td", { class: "num" }, num(rate(now.steps, before?.steps, seconds, env), 1)),
          h("td", { class: "num" }, num(now.steps[env] ?? 0)), h("td", { class: "num" }, num(now.live[env] ?? 0)),
          h("td", { class: "num" }, num(now.created[env] ?? 0)), h("td", { class: "num" }, num(now.finished[env] ?? 0)),
          h("td", { class: "num" }, num(rate(now.invalid, before?.invalid, seconds, env), 1)))))
        : notice("info", "No episode created since the service started.")),
      card("Errors by code", codes.length ? table(["Code", "Since the service started", "Since this page opened"],
        codes.map((code) => h("tr", { dataset: { code } }, h("td", {}, h("code", {}, code)),
          h("td", { class: "num" }, num(now.errors[code])), h("td", { class: "num" }, num(now.errors[code] - (first.errors[code] ?? 0))))))
        : notice("info", "No error answered since the service started.")),
    );
    before = now;
    at = time;
    return true;
  }

  if (!(await poll())) return null;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      if (!(await poll())) clearInterval(timer);
    } finally {
      busy = false;
    }
  }, EVERY_MS);
  return () => clearInterval(timer);
}

function figure(title, value, field, extra = null) {
  return h("section", { class: "card figure" }, h("h2", {}, title),
    h("p", { class: "big", dataset: { field } }, value === null ? "…" : num(value, 1)), extra);
}
