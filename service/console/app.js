// The console's shell: the page named by the URL's hash, the navigation, and the key.

import { ApiError, forgetKey, getKey, setKey } from "./api.js";
import { h, notice } from "./dom.js";
import * as episode from "./episode.js";
import * as live from "./live.js";
import * as play from "./play.js";
import * as run from "./run.js";
import * as runs from "./runs.js";

// "#/runs", "#/run/<label>", "#/episode/<id>?run=...", "#/play", "#/live"
const PAGES = { runs, run, episode, play, live };

const main = document.getElementById("main");
let cleanup = null;

/** The page and its parameters: the path after "#/" and the query after "?". */
function route() {
  const [path, search = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const [name, ...rest] = path.split("/");
  const params = new URLSearchParams(search);
  if (rest.length) params.set("id", decodeURIComponent(rest.join("/")));
  return { name: PAGES[name] ? name : "runs", params };
}

/** What the page says when the API refused it: a key form for 401, the reason otherwise. */
export function showError(where, error) {
  if (error instanceof ApiError && error.status === 401) {
    where.append(notice("warn", getKey() ? "This key was refused (unknown or revoked). Enter another." : "This service wants an API key."), keyForm());
  } else if (error instanceof ApiError && error.status === 403) {
    where.append(notice("error", `Your key may not do this: ${error.message}.`));
  } else {
    where.append(notice("error", error instanceof ApiError ? `${error.code}: ${error.message}` : String(error?.message ?? error)));
  }
}

function keyForm() {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", placeholder: "wdr_…", required: true, "aria-label": "API key" });
  return h("form", { class: "key-form", onsubmit: (event) => {
    event.preventDefault();
    setKey(input.value);
    render();
  } }, input, h("button", { type: "submit" }, "Use key"),
  h("small", {}, "Kept in this tab only (sessionStorage), sent as Authorization: Bearer."));
}

function keyBar() {
  const bar = document.getElementById("key");
  bar.replaceChildren();
  if (getKey()) {
    bar.append(h("span", {}, "key set"), h("button", { type: "button", class: "link", onclick: () => { forgetKey(); render(); } }, "Forget key"));
  }
}

let shown = 0;

async function render() {
  if (cleanup) cleanup();
  cleanup = null;
  keyBar();
  const { name, params } = route();
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.toggleAttribute("aria-current", link.dataset.nav === (name === "run" || name === "episode" ? "runs" : name));
  }
  // A page of its own: one still loading when the visitor moves on writes into a
  // detached element, and its timers are stopped as soon as it is done.
  const view = h("div");
  const mine = ++shown;
  main.replaceChildren(view);
  main.dataset.page = name;
  main.setAttribute("aria-busy", "true");
  let stop = null;
  try {
    stop = (await PAGES[name].render(view, params, { showError })) ?? null;
  } catch (error) {
    showError(view, error);
  }
  if (mine !== shown) {
    stop?.();
    return;
  }
  cleanup = stop;
  main.removeAttribute("aria-busy");
}

window.addEventListener("hashchange", render);
render();
