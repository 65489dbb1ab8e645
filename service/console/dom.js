// A few helpers to build the pages' DOM without a framework.

const SVG = "http://www.w3.org/2000/svg";

function build(element, props, children) {
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** An HTML element: h("a", {href: "#/runs", class: "x"}, "text", child, ...). */
export function h(tag, props = {}, ...children) {
  return build(document.createElement(tag), props, children);
}

/** An SVG element, as h. */
export function s(tag, props = {}, ...children) {
  return build(document.createElementNS(SVG, tag), props, children);
}

/** A number for people: at most `digits` decimals, no trailing zeros. */
export function num(value, digits = 3) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return String(value);
  return String(Number(value.toFixed(digits)));
}

export function percent(value) {
  return value === null || value === undefined ? "–" : `${num(value * 100, 1)}%`;
}

/** An RFC 3339 time, in the visitor's time zone. */
export function when(iso) {
  if (!iso) return "–";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** The time between two RFC 3339 times, roughly: "3 s", "4 min", "2.5 h". */
export function duration(from, to) {
  if (!from || !to) return "–";
  const seconds = (new Date(to) - new Date(from)) / 1000;
  if (seconds < 90) return `${num(seconds, 1)} s`;
  if (seconds < 5400) return `${num(seconds / 60, 1)} min`;
  if (seconds < 172800) return `${num(seconds / 3600, 1)} h`;
  return `${num(seconds / 86400, 1)} d`;
}

/** A table that scrolls sideways on a narrow screen rather than overflow the page. */
export function table(headings, rows, props = {}) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      props,
      h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col" }, text)))),
      h("tbody", {}, rows),
    ),
  );
}

export function card(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** A notice: kind "error", "info" or "warn". */
export function notice(kind, ...children) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, ...children);
}
