// The v1 API, from the browser: relative URLs (so the console works behind a proxy or
// under a root path) and the visitor's key, kept for this tab only (sessionStorage).

const KEY = "wander.key";

/** An answer of the API that is not a success: its status and the error envelope. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export function getKey() {
  return sessionStorage.getItem(KEY);
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key.trim());
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

/** `path` is relative to the API's root ("v1/runs", "metrics"). */
export function url(path) {
  return new URL(`../${path}`, document.baseURI).href;
}

/** JSON (or text) of a request to the API; an ApiError for any answer but a success. */
export async function request(path, { method = "GET", body, text = false } = {}) {
  const headers = { Accept: text ? "text/plain" : "application/json" };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url(path), {
    method,
    headers,
    body: body === undefined ? undefined : toJson(body),
  });
  if (!response.ok) {
    let error = { code: "http_error", message: `${response.status} ${response.statusText}` };
    try {
      error = (await response.json()).error ?? error;
    } catch {
      // not the API's error envelope: keep the status line
    }
    throw new ApiError(response.status, error.code, error.message, error.details);
  }
  if (response.status === 204) return null;
  return text ? response.text() : parseJson(await response.text());
}

/** Seeds are 63-bit integers, and a JavaScript number holds 53 bits: an integer past
 * that is read as a BigInt, from its digits (JSON.parse's source text), and written
 * back as its digits (JSON.rawJSON), so a seed shown or sent is the seed stored. */
export function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && !Number.isSafeInteger(value) && /^-?\d+$/.test(context?.source ?? "")
      ? BigInt(context.source)
      : value);
}

/** JSON of `value`, its BigInts as their digits (see parseJson). */
export function toJson(value, indent = undefined) {
  return JSON.stringify(value, (key, item) => (typeof item === "bigint" ? JSON.rawJSON(item.toString()) : item), indent);
}

/** A query string from an object, leaving out empty values; arrays repeat the key. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== "") search.append(name, String(one));
    }
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** A run label or episode id as one path segment (labels may hold slashes). */
export const segment = encodeURIComponent;
