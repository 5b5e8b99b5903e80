/**
 * What never reaches the database: credentials in the headers, URLs and request bodies a provider
 * hands back (response headers, an `APICallError`'s `url`, `responseHeaders` and
 * `requestBodyValues`). Their values are replaced by `REDACTED` before anything is recorded; the
 * names stay, so a reader of the record can tell a credential was there.
 */

export const REDACTED = "[redacted by cairn]";

/** Header names that carry credentials or session state. */
const SECRET_HEADER =
  /^(authorization|proxy-authorization|cookie|set-cookie|www-authenticate|proxy-authenticate)$|(^|[-_])(api[-_]?key|auth[-_]?token|access[-_]?token|secret|password|signature|session)($|[-_])/i;

/** Query parameters and body keys that carry credentials (`key=` is how some providers take the API key). */
const SECRET_PARAM = /^(key|api[-_]?key|apikey|token|access[-_]?token|auth|authorization|secret|client[-_]?secret|password|sig|signature)$/i;

export function redactHeaders(headers: Record<string, string | undefined> | undefined): Record<string, string | undefined> | undefined {
  if (headers === undefined || headers === null || typeof headers !== "object") return headers;
  const out: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(headers)) out[name] = SECRET_HEADER.test(name) && value !== undefined ? REDACTED : value;
  return out;
}

export function redactUrl(url: unknown): unknown {
  if (typeof url !== "string") return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  let changed = false;
  if (parsed.username !== "" || parsed.password !== "") {
    parsed.username = "";
    parsed.password = "";
    changed = true;
  }
  for (const name of [...parsed.searchParams.keys()]) {
    if (SECRET_PARAM.test(name)) {
      parsed.searchParams.set(name, REDACTED);
      changed = true;
    }
  }
  return changed ? parsed.toString() : url;
}

/** Body keys that carry credentials (narrower than URL parameters: `token`, `signature` are content in bodies). */
const SECRET_BODY_KEY = /^(api[-_]?key|apikey|client[-_]?secret|secret[-_]?key|password|authorization|access[-_]?token)$/i;

/** A JSON value with every credential-named key's value replaced (request bodies). */
export function redactJson(value: unknown, depth = 0): unknown {
  if (depth > 64 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => redactJson(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value))
    out[key] = SECRET_BODY_KEY.test(key) && item !== undefined && item !== null ? REDACTED : redactJson(item, depth + 1);
  return out;
}
