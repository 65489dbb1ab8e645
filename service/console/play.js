// A person plays an environment against the service: tic-tac-toe by clicking cells,
// the others by typing the model's part. The episode carries a run label, so it is
// archived and summarised like any other.

import { request, segment } from "./api.js";
import { card, h, notice, num } from "./dom.js";
import { scoreCard } from "./episode.js";
import { boardView } from "./tictactoe.js";
import { transcript } from "./transcript.js";

const PLAYABLE = ["multi_turn", "single_turn", "tool"];

export async function render(main, params, { showError }) {
  const { environments } = await request("v1/environments");
  const playable = environments.filter((e) => PLAYABLE.includes(e.kind));
  const chosen = params.get("env") ?? (playable.some((e) => e.name === "tictactoe") ? "tictactoe" : playable[0]?.name);
  const game = h("div", { class: "game" });
  main.append(h("h1", {}, "Play"), setupForm(playable, chosen, params, game, showError), game);
}

function setupForm(playable, chosen, params, game, showError) {
  const envSelect = h("select", { name: "env" }, playable.map((e) => h("option", { value: e.name, selected: e.name === chosen }, e.name)));
  const strength = h("input", { name: "strength", type: "range", min: 0, max: 1, step: 0.05, value: params.get("random") ?? 0 });
  const strengthText = h("output", {}, "");
  const describe = () => {
    const p = Number(strength.value);
    strengthText.textContent = p === 0 ? "perfect (minimax)" : p === 1 ? "random" : `random ${Math.round(p * 100)}% of the time`;
  };
  strength.addEventListener("input", describe);
  describe();
  const tictactoeOnly = h("label", { class: "only-tictactoe" }, "Opponent ", strength, " ", strengthText);
  const info = h("p", { class: "muted" });
  const showInfo = () => {
    const env = playable.find((e) => e.name === envSelect.value);
    info.textContent = env ? `${env.kind.replace("_", "-")}: ${env.description}` : "";
    tictactoeOnly.hidden = envSelect.value !== "tictactoe";
  };
  envSelect.addEventListener("change", showInfo);
  showInfo();
  const form = h("form", { class: "setup", onsubmit: async (event) => {
    event.preventDefault();
    game.replaceChildren();
    try {
      await start(game, form, Number(strength.value), playable, showError);
    } catch (error) {
      showError(game, error);
    }
  } },
  h("label", {}, "Environment ", envSelect), tictactoeOnly,
  h("label", {}, "Example ", h("input", { name: "example", type: "number", min: 0, step: 1, placeholder: "random", value: params.get("example") ?? "", size: 7 })),
  h("label", {}, "Seed ", h("input", { name: "seed", type: "text", inputmode: "numeric", pattern: "\\d{1,19}", title: "a whole number, 0 to 2^63 - 1", placeholder: "the example's", value: params.get("seed") ?? "", size: 20 })),
  h("label", {}, "Run ", h("input", { name: "run", type: "text", value: params.get("run") ?? "console", size: 14, required: true })),
  h("details", {}, h("summary", {}, "Config (JSON)"), h("textarea", { name: "config", rows: 3, cols: 40, spellcheck: "false" }, "{}")),
  h("button", { type: "submit" }, "Start"), info);
  return form;
}

async function start(game, form, randomness, environments, showError) {
  const fields = form.elements;
  const env = fields.env.value;
  let config = JSON.parse(fields.config.value.trim() || "{}");
  if (env === "tictactoe") config = { min_random_move_prob: randomness, max_random_move_prob: randomness, ...config };
  const body = { env, config, run: fields.run.value.trim() };
  if (fields.example.value !== "") body.example = Number(fields.example.value);
  if (fields.seed.value.trim() !== "") body.seed = BigInt(fields.seed.value.trim());  // 63 bits, exactly
  const { episodes: [episode] } = await request("v1/episodes", { method: "POST", body });
  const tools = environments.find((e) => e.name === env)?.tools ?? null;
  const messages = [...episode.observation];
  const rewards = [];
  let { turn, info, done } = episode;
  const heading = h("p", { class: "toolbar", dataset: { episode: episode.id } }, `Episode ${episode.id} · example ${episode.example} · seed ${episode.seed} · run ${episode.run}`);
  const area = h("div");
  const result = h("div", { class: "result-box", "aria-live": "polite" });
  const log = h("div");
  game.append(heading, area, result, card("Transcript", log));

  async function act(action) {
    area.querySelectorAll("button, textarea, input").forEach((el) => { el.disabled = true; });
    try {
      const step = await request(`v1/episodes/${segment(episode.id)}/step`, { method: "POST", body: { action, turn } });
      messages.push(typeof action === "string" ? { role: "assistant", content: action } : action, ...step.observation);
      rewards.push(step.reward);
      ({ turn, info, done } = step);
      await show();
    } catch (error) {
      result.replaceChildren();
      showError(result, error);
      controls(); // as they were: the step was not applied
    }
  }

  const controls = () => area.replaceChildren(env === "tictactoe" ? ticTacToe(info, done, act, messages)
    : tools ? toolCalls(tools, done, act, turn) : typed(done, act));

  async function show() {
    result.replaceChildren();
    log.replaceChildren(transcript(messages, { rewards }));
    controls();
    if (!done) return;
    const score = await request(`v1/episodes/${segment(episode.id)}/score`);
    result.replaceChildren(
      notice("info", "Game over. ", h("a", { href: `#/episode/${segment(episode.id)}?run=${encodeURIComponent(episode.run)}` }, "Replay it"),
        ` (archived in run ${episode.run} a moment after it ended).`),
      scoreCard(score));
  }
  await show();
}

function ticTacToe(info, done, act, messages) {
  const news = messages[messages.length - 1]?.content?.split("\n")[0] ?? "";
  const thinking = h("input", { type: "text", name: "thinking", placeholder: "your thinking (optional, sent inside <think>)", size: 40 });
  // A blank thought is sent as none: an empty <think> earns no format credit anyway.
  const pick = (cell) => act(thinking.value.trim()
    ? `<think>${thinking.value}</think><move>${cell}</move>` : `<move>${cell}</move>`);
  return h("div", { class: "replay" },
    boardView(info.board, { onPick: done ? null : pick }),
    h("div", { class: "replay-side" }, h("p", { class: "caption", "aria-live": "polite" }, news),
      done ? null : [h("p", {}, "You are X: click an empty cell."), thinking],
      h("p", { class: "muted" }, `invalid moves so far: ${num(info.invalid_moves)}`)));
}

/** A tool environment: call one of its tools (arguments as JSON), or reply in text. */
function toolCalls(tools, done, act, turn) {
  if (done) return h("p", {}, "The episode has ended.");
  const names = tools.map((tool) => tool.function.name);
  const template = (name) => {
    const properties = tools.find((tool) => tool.function.name === name)?.function.parameters?.properties ?? {};
    return JSON.stringify(Object.fromEntries(Object.keys(properties).map((key) => [key, ""])));
  };
  const name = h("select", { name: "tool" }, names.map((n) => h("option", { value: n }, n)));
  const args = h("textarea", { name: "arguments", rows: 2, cols: 60, spellcheck: "false" }, template(names[0]));
  name.addEventListener("change", () => { args.value = template(name.value); });
  const call = (event) => {
    event.preventDefault();
    try {
      JSON.parse(args.value || "{}"); // refused here, before it costs a turn
      args.setCustomValidity("");
    } catch {
      args.setCustomValidity("The arguments are not JSON.");
      args.reportValidity();
      return;
    }
    act({ role: "assistant", content: null, tool_calls: [{ id: `call_${turn}`, type: "function",
      function: { name: name.value, arguments: args.value || "{}" } }] });
  };
  return h("div", { class: "columns" },
    h("form", { class: "typed", onsubmit: call }, h("label", {}, "Tool ", name),
      h("label", {}, "Arguments (JSON)", args), h("button", { type: "submit" }, "Call tool")),
    typed(done, act));
}

function typed(done, act) {
  if (done) return h("p", {}, "The episode has ended.");
  const text = h("textarea", { name: "action", rows: 4, cols: 60, placeholder: "The model's reply", required: true });
  return h("form", { class: "typed", onsubmit: (event) => { event.preventDefault(); act(text.value); } },
    text, h("button", { type: "submit" }, "Send"));
}
