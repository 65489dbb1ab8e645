// One run: its summary, its reward over time, and its episodes, filtered and paged;
// refreshed every few seconds while the run is being played.

import { query, request, segment } from "./api.js";
import { meter, rewardChart, sharesBar } from "./charts.js";
import { card, duration, h, notice, num, percent, table, when } from "./dom.js";

const PAGE = 25;
const CHART_EPISODES = 500;
const REFRESH_MS = 5000;
const LIVE_WITHIN_MS = 5 * 60 * 1000;
const FILTERS = ["env", "status", "outcome", "min_reward", "max_reward"];

export async function render(main, params, { showError }) {
  const run = params.get("id");
  const base = `v1/runs/${segment(run)}`;
  const state = { offset: Math.max(0, Number(params.get("offset") ?? 0) || 0) };
  for (const name of FILTERS) state[name] = params.get(name) ?? "";

  const summaryBox = h("div", { class: "cards" });
  const chartBox = h("div");
  const listBox = h("div");
  const refresh = h("input", { type: "checkbox", id: "refresh" });
  main.append(
    h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / ", h("span", { class: "run-label" }, run)),
    h("p", { class: "toolbar" }, h("label", {}, refresh, ` refresh every ${REFRESH_MS / 1000} s`)),
    summaryBox, card("Reward over time", chartBox), card("Episodes", listBox),
  );

  let summary = await request(base);
  const environments = await environmentInfo(Object.keys(summary.envs));
  refresh.checked = Date.now() - new Date(summary.last_finished_at) < LIVE_WITHIN_MS;

  const showSummary = () => summaryBox.replaceChildren(...summaryCards(summary, environments));
  const showChart = async () => chartBox.replaceChildren(await rewardOverTime(base));
  const showList = async () => listBox.replaceChildren(...(await episodesList(run, base, summary, state, showList)));
  showSummary();
  await Promise.all([showChart(), showList()]);

  let busy = false;
  const timer = setInterval(async () => {
    if (!refresh.checked || busy) return;
    busy = true;
    try {
      const before = summary;
      summary = await request(base);
      // The chart and the list read whole records: read them again only when the run moved.
      if (summary.episodes === before.episodes && summary.last_finished_at === before.last_finished_at) return;
      showSummary();
      await Promise.all([showChart(), showList()]);
    } catch (error) {
      summaryBox.replaceChildren();
      showError(summaryBox, error);
    } finally {
      busy = false;
    }
  }, REFRESH_MS);
  return () => clearInterval(timer);
}

/** Each environment's EnvInfo (reward weights), or null where the key may not read it. */
async function environmentInfo(names) {
  const found = {};
  await Promise.all(names.map(async (name) => {
    try {
      found[name] = await request(`v1/environments/${name.split("/").map(segment).join("/")}`);
    } catch {
      found[name] = null; // an environment the service no longer offers
    }
  }));
  return found;
}

function summaryCards(summary, environments) {
  const reward = summary.reward;
  const statuses = Object.entries(summary.statuses).map(([k, v]) => `${v} ${k}`).join(", ");
  const cards = [
    card("Run",
      h("dl", {},
        h("dt", {}, "Episodes"), h("dd", { dataset: { field: "episodes" } }, `${summary.episodes} (${statuses})`),
        h("dt", {}, "Environments"), h("dd", {}, Object.entries(summary.envs).map(([k, v]) => `${k} (${v})`).join(", ")),
        summary.tenant ? [h("dt", {}, "Tenant"), h("dd", {}, summary.tenant)] : null,
        h("dt", {}, "Span"), h("dd", {}, `${when(summary.first_created_at)} → ${when(summary.last_finished_at)} (${duration(summary.first_created_at, summary.last_finished_at)})`))),
    card("Reward",
      reward ? h("dl", {},
        h("dt", {}, "Mean ± std"), h("dd", { class: "big", dataset: { field: "reward-mean" } }, `${num(reward.mean)} ± ${num(reward.std)}`),
        h("dt", {}, "Range"), h("dd", {}, `${num(reward.min)} … ${num(reward.max)}`),
        h("dt", {}, "Non-zero"), h("dd", {}, percent(reward.nonzero_rate)))
        : notice("info", "No finished episode yet.")),
  ];
  const weights = Object.assign({}, ...Object.values(environments).map((e) => Object.fromEntries((e?.reward_components ?? []).map((c) => [c.name, c.weight]))));
  const components = Object.entries(summary.components);
  if (components.length) {
    const high = Math.max(...components.map(([, v]) => Math.abs(v)), 1e-9);
    cards.push(card("Components (means)", table(["Component", "Mean", "", "Weight"],
      components.map(([name, value]) => h("tr", {},
        h("td", {}, name), h("td", { class: "num" }, num(value)), h("td", { class: "meter-cell" }, meter(value, high)),
        h("td", { class: "num" }, weights[name] === undefined ? "–" : num(weights[name])))))));
  }
  const metrics = Object.entries(summary.metrics);
  if (metrics.length) cards.push(card("Metrics", h("div", { class: "metrics" }, metrics.map(([name, m]) => metricView(name, m)))));
  return cards;
}

function metricView(name, metric) {
  if (metric.kind === "categorical") {
    return h("div", { class: "metric", dataset: { metric: name } }, h("h3", {}, name), sharesBar(metric.rates));
  }
  const invalid = name === "invalid_moves";
  return h("div", { class: "metric", dataset: { metric: name } }, h("h3", {}, name),
    invalid ? h("p", { class: "big", dataset: { field: "invalid-rate" } }, `${percent(metric.nonzero_rate)} of episodes had an invalid move`) : null,
    h("p", {}, `mean ${num(metric.mean)} ± ${num(metric.std)} · range ${num(metric.min)} … ${num(metric.max)} · non-zero ${percent(metric.nonzero_rate)}`));
}

/** The totals of the run's last (up to) CHART_EPISODES episodes, in finishing order. */
async function rewardOverTime(base) {
  const { total } = await request(`${base}/episodes${query({ limit: 1, status: "done" })}`);
  const offset = Math.max(0, total - CHART_EPISODES);
  const page = await request(`${base}/episodes${query({ limit: CHART_EPISODES, offset, status: "done" })}`);
  const done = page.episodes.filter((e) => e.score && typeof e.score.total === "number");
  done.sort((a, b) => (a.finished_at ?? "").localeCompare(b.finished_at ?? ""));
  if (!done.length) return notice("info", "No finished episode yet.");
  const values = done.map((e) => e.score.total);
  const window = Math.max(1, Math.min(50, Math.round(values.length / 10)));
  return h("figure", {}, rewardChart(values, { window }),
    h("figcaption", {}, `Total reward of ${values.length} episode${values.length === 1 ? "" : "s"}${offset ? ` (the latest ${CHART_EPISODES} created)` : ""} in the order they finished; the line is the mean of the last ${window}.`));
}

async function episodesList(run, base, summary, state, reshow) {
  const filters = Object.fromEntries(FILTERS.map((name) => [name, state[name]]));
  const page = await request(`${base}/episodes${query({ ...filters, limit: PAGE, offset: state.offset })}`);
  const keep = () => history.replaceState(null, "", `#/run/${segment(run)}${query({ ...filters, offset: state.offset || "" })}`);
  const form = filterForm(summary, state, () => { state.offset = 0; keep(); reshow(); });
  if (!page.episodes.length) return [form, notice("info", page.total ? "No episode on this page." : "No episode matches these filters.")];
  const rows = page.episodes.map((e, i) => {
    const link = `#/episode/${segment(e.id)}${query({ run, ...filters, offset: state.offset + i })}`;
    const outcome = e.score?.metrics?.outcome;
    return h("tr", { dataset: { episode: e.id } },
      h("td", {}, h("a", { href: link }, e.id)),
      h("td", {}, e.env), h("td", {}, e.status),
      h("td", {}, outcome === undefined ? "–" : h("span", { class: `outcome ${outcome}` }, String(outcome))),
      h("td", { class: "num" }, num(e.score?.total, 4)), h("td", { class: "num" }, e.turn),
      h("td", {}, when(e.finished_at)));
  });
  const move = (offset) => () => { state.offset = offset; keep(); reshow(); };
  return [
    form,
    table(["Episode", "Environment", "Status", "Outcome", "Reward", "Turns", "Finished"], rows, { class: "episodes" }),
    h("nav", { class: "pager", "aria-label": "Pages of episodes" },
      h("button", { type: "button", disabled: state.offset === 0, onclick: move(Math.max(0, state.offset - PAGE)) }, "← Previous"),
      h("span", { dataset: { field: "episodes-range" } }, `${state.offset + 1}–${state.offset + page.episodes.length} of ${page.total}`),
      h("button", { type: "button", disabled: state.offset + PAGE >= page.total, onclick: move(state.offset + PAGE) }, "Next →")),
  ];
}

function filterForm(summary, state, apply) {
  const select = (name, label, values) => h("label", {}, label, h("select", { name },
    h("option", { value: "" }, "any"),
    values.map((v) => h("option", { value: v, selected: state[name] === v }, v))));
  const outcomes = Object.keys(summary.metrics.outcome?.rates ?? {}).filter((v) => v !== "null");
  const form = h("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    for (const name of FILTERS) state[name] = form.elements[name]?.value ?? "";
    apply();
  } },
  Object.keys(summary.envs).length > 1 ? select("env", "Environment ", Object.keys(summary.envs)) : null,
  select("status", "Status ", ["done", "aborted"]),
  outcomes.length ? select("outcome", "Outcome ", outcomes) : null,
  h("label", {}, "Reward ≥ ", h("input", { name: "min_reward", type: "number", step: "any", value: state.min_reward, size: 6 })),
  h("label", {}, "≤ ", h("input", { name: "max_reward", type: "number", step: "any", value: state.max_reward, size: 6 })),
  h("button", { type: "submit" }, "Filter"));
  return form;
}
