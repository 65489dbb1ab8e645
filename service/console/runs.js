// The runs in the archive, a page at a time.

import { query, request } from "./api.js";
import { duration, h, notice, table, when } from "./dom.js";

const LIMIT = 50;

export async function render(main, params) {
  const offset = Math.max(0, Number(params.get("offset") ?? 0) || 0);
  const page = await request(`v1/runs${query({ limit: LIMIT, offset })}`);
  main.append(h("h1", {}, "Runs"));
  const whose = page.tenant ? ` of tenant ${page.tenant}` : "";
  if (page.unlabelled) {
    const one = page.unlabelled === 1;
    main.append(notice("info", `${page.unlabelled} archived episode${one ? " has" : "s have"} no run label${whose}, so ${one ? "it is" : "they are"} in no run: give episodes a run label when you create them (`,
      h("code", {}, "run"), " in the API, ", h("code", {}, "--run"), " in the CLI) to find them here."));
  }
  if (!page.total) {
    main.append(notice("info", `No run${whose} in the archive yet. Episodes created with a run label appear here once they end: `,
      h("code", {}, "wander eval tictactoe --policy minimax -n 20 --run demo"), ", or a game on the ", h("a", { href: "#/play" }, "Play"), " page."));
    return;
  }
  const tenants = page.runs.some((r) => r.tenant !== null);
  const link = (r) => `#/run/${encodeURIComponent(r.run)}`;
  main.append(
    h("p", { class: "muted" }, `${page.total} run${page.total === 1 ? "" : "s"}, oldest first.`),
    table(
      ["Run", ...(tenants ? ["Tenant"] : []), "Episodes", "Environments", "First created", "Last finished", "Span"],
      page.runs.map((r) => h("tr", { dataset: { run: r.run } },
        h("td", {}, h("a", { href: link(r) }, r.run)),
        tenants ? h("td", {}, r.tenant ?? "–") : null,
        h("td", { class: "num" }, r.episodes),
        h("td", {}, r.envs.join(", ")),
        h("td", {}, when(r.first_created_at)),
        h("td", {}, when(r.last_finished_at)),
        h("td", {}, duration(r.first_created_at, r.last_finished_at)))),
      { class: "runs" }),
    pager(page.total, offset),
  );
}

function pager(total, offset) {
  if (total <= LIMIT) return "";
  return h("nav", { class: "pager", "aria-label": "Pages of runs" },
    offset > 0 ? h("a", { href: `#/runs?offset=${Math.max(0, offset - LIMIT)}` }, "← Previous") : null,
    h("span", {}, `${offset + 1}–${Math.min(total, offset + LIMIT)} of ${total}`),
    offset + LIMIT < total ? h("a", { href: `#/runs?offset=${offset + LIMIT}` }, "Next →") : null);
}
