import { hashText } from "../store/value/index.js";

/**
 * A short fingerprint of what a durable operation was called with (a prompt, a tool's input): the
 * first 16 hex digits of the sha256 of its JSON. Recorded with the operation and compared on replay
 * (docs/replay.md). Not a content address: collisions only weaken the check, never change a value.
 */
export function fingerprintOf(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? `${v}n` : v)) ?? "undefined";
  } catch {
    text = String(value);
  }
  return hashText(text).slice(0, 16);
}
