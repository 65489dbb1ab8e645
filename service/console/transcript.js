// A conversation as people read it: each message with its role, the model's <think>
// apart from what it said, tool calls with their arguments, tool results, and the reward
// of each step next to the model's message that earned it.

import { h, num } from "./dom.js";

/** Text split into its <think>...</think> parts and the rest. */
export function thinkParts(text) {
  const parts = [];
  const pattern = /<think>([\s\S]*?)<\/think>/g;
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > at) parts.push({ think: false, text: text.slice(at, match.index) });
    parts.push({ think: true, text: match[1] });
    at = match.index + match[0].length;
  }
  if (at < text.length) parts.push({ think: false, text: text.slice(at) });
  return parts;
}

function content(text, role) {
  if (text === null || text === undefined || text === "") return null;
  if (role !== "assistant") return h("div", { class: "content" }, String(text));
  return h("div", { class: "content" }, thinkParts(String(text)).map((part) =>
    part.think ? h("div", { class: "think" }, h("span", { class: "label" }, "thinking"), part.text.trim())
      : h("div", { class: "said" }, part.text.trim())));
}

/** The arguments of a tool call, pretty-printed when they are JSON. */
export function argumentsText(text) {
  try {
    const parsed = JSON.parse(text || "{}");
    if (parsed && typeof parsed === "object" && Object.keys(parsed).length === 1 && typeof parsed.query === "string") {
      return parsed.query;
    }
    return JSON.stringify(parsed, null, 2);
  } catch {
    return String(text);
  }
}

function toolCalls(calls) {
  if (!calls?.length) return null;
  return h("ul", { class: "tool-calls" }, calls.map((call) =>
    h("li", {}, h("code", { class: "tool-name" }, call.function?.name ?? "?"),
      h("pre", {}, argumentsText(call.function?.arguments)))));
}

/** Each message of `messages`; `rewards[k]` is shown with the k-th assistant message, and
 * `marks[k]` (optional) is a note on it, such as an invalid move. */
export function transcript(messages, { rewards = [], marks = [] } = {}) {
  let step = 0;
  return h("ol", { class: "transcript" }, messages.map((message) => {
    const extra = [];
    if (message.role === "assistant") {
      if (step < rewards.length) extra.push(h("span", { class: "reward", dataset: { step } }, `step ${step + 1} · reward ${num(rewards[step], 4)}`));
      if (marks[step]) extra.push(h("span", { class: "flag" }, marks[step]));
      step += 1;
    }
    const from = message.role === "tool" && message.tool_call_id ? ` · ${message.tool_call_id}` : "";
    return h("li", { class: `message ${message.role}` },
      h("div", { class: "meta" }, h("span", { class: "role" }, message.role + (message.name ? ` (${message.name})` : "") + from), extra),
      message.role === "tool" ? h("pre", { class: "result" }, message.content ?? "") : content(message.content, message.role),
      toolCalls(message.tool_calls));
  }));
}
