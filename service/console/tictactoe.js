// Tic-tac-toe from the transcript: the boards the environment wrote into its messages
// and the model's moves, as positions to step through.

import { h } from "./dom.js";
import { thinkParts } from "./transcript.js";

const ROW = /^\s*([XO0-8]) \| ([XO0-8]) \| ([XO0-8])\s*$/gm;

/** The last board drawn in a message ("X | 1 | O" rows), as 9 cells "X", "O" or ".". */
export function boardOf(text) {
  const rows = [...String(text ?? "").matchAll(ROW)];
  if (rows.length < 3) return null;
  return rows.slice(-3).map((row) => row.slice(1, 4).map((cell) => ("XO".includes(cell) ? cell : ".")).join("")).join("");
}

/** The cell of the last <move>N</move> outside <think>, or null. */
export function moveOf(text) {
  const said = thinkParts(String(text ?? "")).filter((part) => !part.think).map((part) => part.text).join("");
  const moves = [...said.matchAll(/<move>\s*(\d+)\s*<\/move>/g)];
  if (!moves.length) return null;
  const cell = Number(moves[moves.length - 1][1]);
  return cell <= 8 ? cell : null;
}

function thoughtOf(text) {
  return thinkParts(String(text ?? "")).filter((part) => part.think).map((part) => part.text.trim()).join("\n");
}

const place = (board, cell, mark) => board.slice(0, cell) + mark + board.slice(cell + 1);

/** The game's positions, one per move: {board, cell, mark, caption, thought, invalid, step}. */
export function positions(messages) {
  let board = ".........";
  const frames = [{ board, cell: null, mark: null, caption: "Empty board", thought: null, invalid: false, step: null }];
  const opening = messages.find((m) => m.role === "user");
  const first = boardOf(opening?.content);
  if (first && first !== board) {
    const cell = [...first].findIndex((c, i) => c !== board[i]);
    board = first;
    frames.push({ board, cell, mark: "O", caption: `O (the opponent) opens in ${cell}`, thought: null, invalid: false, step: null });
  }
  let step = 0;
  messages.forEach((message, index) => {
    if (message.role !== "assistant") return;
    const answer = messages.slice(index + 1).find((m) => m.role === "user" || m.role === "assistant");
    const reply = answer?.role === "user" ? answer.content : "";
    const cell = moveOf(message.content);
    const thought = thoughtOf(message.content);
    if (reply.startsWith("Invalid move")) {
      frames.push({ board, cell, mark: "X", invalid: true, thought, step,
        caption: `X (the model): ${reply.split("\n")[0]}` });
    } else if (cell !== null) {
      board = place(board, cell, "X");
      frames.push({ board, cell, mark: "X", invalid: false, thought, step, caption: `X (the model) plays ${cell}` });
      const after = boardOf(reply);
      if (after && after !== board) {
        const reply_cell = [...after].findIndex((c, i) => c !== board[i]);
        board = after;
        frames.push({ board, cell: reply_cell, mark: "O", invalid: false, thought: null, step,
          caption: `O (the opponent) plays ${reply_cell}` });
      }
    }
    const ending = reply.match(/Game over\. (.*)/);
    if (ending) frames[frames.length - 1].caption += ` · ${ending[1]}`;
    step += 1;
  });
  return frames;
}

/** A board of 9 cells; `onPick(cell)` makes the empty ones buttons (the Play page). */
export function boardView(board, { last = null, invalid = false, onPick = null } = {}) {
  return h("div", { class: `board${invalid ? " invalid" : ""}`, role: "group", "aria-label": "Tic-tac-toe board" },
    [...board].map((mark, cell) => {
      const empty = mark === ".";
      const classes = ["cell", cell === last ? "last" : "", mark === "X" ? "x" : mark === "O" ? "o" : ""].filter(Boolean).join(" ");
      return h("button", {
        class: classes,
        type: "button",
        dataset: { cell, mark: empty ? "" : mark },
        disabled: !(onPick && empty),
        "aria-label": `cell ${cell}: ${empty ? "empty" : mark}`,
        onclick: onPick && empty ? () => onPick(cell) : undefined,
      }, empty ? h("span", { class: "number" }, cell) : mark);
    }));
}
