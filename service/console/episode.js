// One episode, replayed: its transcript, step rewards and score; for tic-tac-toe a board
// to step through move by move; for reverse_text and sql what the model was asked and did.

import { ApiError, query, request, segment, toJson } from "./api.js";
import { meter } from "./charts.js";
import { card, h, notice, num, table, when } from "./dom.js";
import { boardView, positions } from "./tictactoe.js";
import { argumentsText, transcript } from "./transcript.js";

const FILTERS = ["env", "status", "outcome", "min_reward", "max_reward"];
const SCAN_PAGES = 20;

/** The episode's record and where it came from. The API reads a live (or recently finished)
 * episode by id from the store; an archived one is read from its run's listing, at the
 * offset the run page linked, or found by paging through the run. */
async function find(id, params) {
  const run = params.get("run");
  if (run) {
    const base = `v1/runs/${segment(run)}/episodes`;
    if (params.has("offset")) {
      const filters = Object.fromEntries(FILTERS.map((name) => [name, params.get(name)]));
      const page = await request(`${base}${query({ ...filters, limit: 1, offset: params.get("offset") })}`);
      if (page.episodes[0]?.id === id) return { record: page.episodes[0], from: "archive" };
    }
    for (let offset = 0, page = 0; page < SCAN_PAGES; page += 1, offset += 1000) {
      const found = await request(`${base}${query({ limit: 1000, offset })}`);
      const record = found.episodes.find((e) => e.id === id);
      if (record) return { record, from: "archive" };
      if (offset + 1000 >= found.total) break;
    }
  }
  try {
    return { record: await request(`v1/episodes/${segment(id)}`), from: "store" };
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      throw new Error(`no episode ${id}${run ? ` in run ${run}` : ""}: not in the store (expired?)${run ? " nor in the run's archive" : ""}`);
    }
    throw error;
  }
}

export async function render(main, params) {
  const id = params.get("id");
  const { record, from } = await find(id, params);
  const raw = URL.createObjectURL(new Blob([toJson(record, 2)], { type: "application/json" }));
  const trail = record.run ? [h("a", { href: `#/run/${segment(record.run)}` }, record.run), " / "] : [];
  main.append(
    h("h1", {}, h("a", { href: "#/runs" }, "Runs"), " / ", trail, h("span", { class: "episode-id" }, record.id)),
    h("p", { class: "toolbar" },
      h("span", { class: `status ${record.status}` }, record.status), ` ${record.env} ${record.version} · ${record.split} example ${record.example} · seed ${record.seed} · ${record.turn} step${record.turn === 1 ? "" : "s"} · finished ${when(record.finished_at)} · read from the ${from} · `,
      h("a", { href: raw, target: "_blank", rel: "noopener" }, "raw JSON")),
  );
  const special = { tictactoe: ticTacToe, reverse_text: reverseText, sql }[record.env];
  const cleanup = special ? special(main, record) : null;
  main.append(h("div", { class: "cards" }, scoreCard(record.score), rewardsCard(record.step_rewards)));
  const marks = record.env === "tictactoe" ? positions(record.messages).filter((f) => f.mark === "X").map((f) => (f.invalid ? "invalid move" : null)) : [];
  main.append(card("Transcript", transcript(record.messages, { rewards: record.step_rewards, marks })));
  return () => {
    URL.revokeObjectURL(raw);
    cleanup?.();
  };
}

export function scoreCard(score) {
  if (!score) return card("Score", notice("info", "No score yet."));
  const components = Object.entries(score.components);
  const high = Math.max(...components.map(([, v]) => Math.abs(v)), 1e-9);
  return card("Score",
    h("p", { class: "big" }, "Total ", h("span", { dataset: { field: "score-total", value: score.total } }, num(score.total, 4)),
      score.done ? "" : " (so far)"),
    table(["Component", "Value", "", "Weight"], components.map(([name, value]) => h("tr", {},
      h("td", {}, name), h("td", { class: "num" }, num(value, 4)), h("td", { class: "meter-cell" }, meter(value, high)),
      h("td", { class: "num" }, num(score.weights?.[name]))))),
    h("h3", {}, "Metrics"),
    h("dl", { class: "metrics-list" }, Object.entries(score.metrics).map(([name, value]) => [
      h("dt", {}, name), h("dd", { dataset: { metric: name } }, typeof value === "number" ? num(value, 4) : typeof value === "string" ? value : toJson(value))])));
}

function rewardsCard(rewards) {
  const high = Math.max(...rewards.map((r) => Math.abs(r)), 1e-9);
  return card("Step rewards", rewards.length ? table(["Step", "Reward", ""], rewards.map((r, i) => h("tr", {},
    h("td", { class: "num" }, i + 1), h("td", { class: "num" }, num(r, 4)), h("td", { class: "meter-cell" }, meter(r, high)))))
    : notice("info", "No step was played."));
}

/** The board, stepped with buttons or the arrow keys (Home and End for the ends). */
function ticTacToe(main, record) {
  const frames = positions(record.messages);
  let at = frames.length - 1;
  const boardBox = h("div", { class: "board-box" });
  const caption = h("p", { class: "caption", "aria-live": "polite" });
  const thought = h("div", { class: "thought" });
  const counter = h("span", { dataset: { field: "position" } });
  const go = (to) => { at = Math.max(0, Math.min(frames.length - 1, to)); show(); };
  const buttons = {
    first: h("button", { type: "button", "aria-label": "First position", onclick: () => go(0) }, "«"),
    back: h("button", { type: "button", "aria-label": "Previous move", onclick: () => go(at - 1) }, "‹"),
    next: h("button", { type: "button", "aria-label": "Next move", onclick: () => go(at + 1) }, "›"),
    last: h("button", { type: "button", "aria-label": "Final position", onclick: () => go(frames.length - 1) }, "»"),
  };
  const moves = h("ol", { class: "moves" }, frames.map((frame, i) => h("li", { dataset: { frame: i } },
    h("button", { type: "button", class: `link${frame.invalid ? " invalid" : ""}`, onclick: () => go(i) }, frame.caption),
    frame.thought ? h("div", { class: "think" }, frame.thought) : null)));
  function show() {
    const frame = frames[at];
    boardBox.replaceChildren(boardView(frame.board, { last: frame.cell, invalid: frame.invalid }));
    caption.replaceChildren(frame.invalid ? h("span", { class: "flag" }, "invalid") : "", ` ${frame.caption}`);
    thought.replaceChildren(...(frame.thought ? [h("span", { class: "label" }, "the model's thinking"), frame.thought] : []));
    counter.textContent = `move ${at} / ${frames.length - 1}`;
    buttons.first.disabled = buttons.back.disabled = at === 0;
    buttons.next.disabled = buttons.last.disabled = at === frames.length - 1;
    for (const item of moves.children) item.classList.toggle("current", Number(item.dataset.frame) === at);
  }
  show();
  const keys = (event) => {
    if (event.target.closest?.("input, textarea, select")) return;
    const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: frames.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    go(to);
  };
  document.addEventListener("keydown", keys);
  main.append(card("Game",
    h("div", { class: "replay" },
      h("div", {}, boardBox, h("div", { class: "stepper" }, buttons.first, buttons.back, counter, buttons.next, buttons.last),
        h("p", { class: "muted" }, "Arrow keys step through the game; Home and End jump to its ends.")),
      h("div", { class: "replay-side" }, caption, thought, h("h3", {}, "Moves"), moves))));
  return () => document.removeEventListener("keydown", keys);
}

function reverseText(main, record) {
  const text = record.state?.text ?? record.messages.find((m) => m.role === "user")?.content ?? "";
  const reply = record.messages.find((m) => m.role === "assistant")?.content ?? "";
  const found = [...String(reply).matchAll(/<reversed_text>\n?([\s\S]*?)\n?<\/reversed_text>/g)];
  const answer = found.length ? found[found.length - 1][1] : null;
  main.append(card("Reverse the text", h("div", { class: "columns" },
    h("div", {}, h("h3", {}, "Text"), h("pre", { class: "wrap" }, text)),
    h("div", {}, h("h3", {}, "Its reversal"), h("pre", { class: "wrap" }, [...text].reverse().join(""))),
    h("div", {}, h("h3", {}, "The model's answer"), answer === null ? notice("warn", "no <reversed_text> answer") : h("pre", { class: "wrap" }, answer))),
  h("p", { class: "big" }, `LCS ratio ${num(record.score?.metrics?.lcs_ratio, 4)}`)));
  return null;
}

function sql(main, record) {
  const results = Object.fromEntries(record.messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]));
  const calls = record.messages.flatMap((m) => m.tool_calls ?? []);
  const question = record.messages.find((m) => m.role === "user")?.content ?? "";
  const last = [...record.messages].reverse().find((m) => m.role === "assistant" && !m.tool_calls?.length);
  const answer = String(last?.content ?? "").match(/<answer>([\s\S]*?)<\/answer>/)?.[1];
  main.append(card("Queries",
    h("p", {}, h("strong", {}, "Question: "), question),
    calls.length ? h("ol", { class: "queries" }, calls.map((call) => h("li", {},
      h("code", { class: "tool-name" }, call.function?.name), h("pre", {}, argumentsText(call.function?.arguments)),
      h("pre", { class: "result" }, results[call.id] ?? "(no result)")))) : notice("info", "No tool was called."),
    h("p", {}, h("strong", {}, "Answer: "), answer ?? "none")));
  return null;
}
