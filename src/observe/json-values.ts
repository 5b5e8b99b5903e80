/**
 * Stored values made readable: printable JSON for the types Cairn's codec keeps, and one-line
 * excerpts. Part of the read model because excerpts are part of what it returns (a prompt
 * message's excerpt in a provenance chain); the CLI prints them as they are.
 */

/**
 * Makes the types Cairn's codec keeps (BigInt, Map, Set, Date, bytes, Error, undefined, NaN)
 * printable as JSON: BigInt as a string, Map as an object (or an array of pairs), Set as an
 * array, bytes as base64, an Error as `{ name, message, code }`.
 */
export function jsonSafe(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value);
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : jsonSafe(item)));
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
  if (value instanceof Set) return [...value].map(jsonSafe);
  if (value instanceof Map) {
    const keys = [...value.keys()];
    if (keys.every((k) => typeof k === "string")) return Object.fromEntries([...value].map(([k, v]) => [k, jsonSafe(v)]));
    return [...value].map(([k, v]) => [jsonSafe(k), jsonSafe(v)]);
  }
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { name: value.name, message: value.message, ...(typeof code === "string" ? { code } : {}) };
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = jsonSafe(v);
  return out;
}

/** A decoded journal value on one line, cut to `max` characters. */
export function renderValue(value: unknown, max = 60): string {
  const text = value === undefined ? "undefined" : (JSON.stringify(jsonSafe(value)) ?? String(value));
  return truncate(text, max);
}

export function truncate(text: string, max: number): string {
  const flat = text.replace(/\s*\n\s*/g, " ");
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
