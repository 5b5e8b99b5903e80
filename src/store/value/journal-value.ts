import { hash } from "node:crypto";
import { UnserializableError } from "../../errors.js";
import type { StoredValue } from "../store.js";
import { decodeThrown, decodeValue, describe, encodeThrown, encodeValue } from "./codec.js";

/**
 * A value on its way to the journal, and back: encoded by the codec, kept inline in its row when
 * short, else content-addressed by its hash (see ARCHITECTURE.md, 8). Every layer that writes a
 * value (the engine's operations, the agents' memory and artifacts) goes through here, so the
 * inline limit and the hash rule exist once.
 */

/** Values whose encoded text is longer than this are stored by content address, not inline. */
export const INLINE_LIMIT = 256;

/**
 * sha256 of the encoded text: the address of a content-addressed payload. The one-shot `hash`
 * (Node ≥ 20.12) makes no Hash object: a third of the cost for the short texts of a journal.
 */
export function hashText(text: string): string {
  return hash("sha256", text, "hex");
}

/** Encodes a value for the journal; long values get a content address. */
export function toStored(value: unknown, where: string): StoredValue {
  return storedText(encodeValue(value, where));
}

/** An already encoded text (another run's output, say) as the journal keeps it. */
export function storedText(text: string): StoredValue {
  return { text, hash: text.length > INLINE_LIMIT ? hashText(text) : null };
}

export function fromStored(text: string | null): unknown {
  return text === null ? undefined : decodeValue(text);
}

/** Inline column value and hash column value for a stored value. */
export function splitStored(value: StoredValue | null): [string | null, string | null] {
  if (value === null) return [null, null];
  return value.hash === null ? [value.text, null] : [null, value.hash];
}

/**
 * The journal text of a thrown value, whatever it is: the value itself when it can be stored (an
 * error with its class and fields, or a thrown string, number, null, undefined...), else the
 * `UnserializableError` that `storableThrown` substitutes for it. Never throws.
 */
export function errorText(thrown: unknown, where = "error"): string {
  try {
    return encodeThrown(thrown, where);
  } catch (refusal) {
    return encodeThrown(substitute(thrown, refusal), where);
  }
}

/** What `errorText` stored, rebuilt: the thrown value as it was (not necessarily an Error). */
export function errorFromText(text: string): unknown {
  return decodeThrown(text);
}

/**
 * What the workflow must see live so that replay matches: `thrown` itself when the journal can
 * keep it, else an `UnserializableError` naming the part it cannot (the same error replay will
 * rebuild). The engine throws this, not the original, when it records a failure.
 */
export function storableThrown(thrown: unknown, where: string): unknown {
  try {
    encodeThrown(thrown, where);
    return thrown;
  } catch (refusal) {
    return substitute(thrown, refusal);
  }
}

function substitute(thrown: unknown, refusal: unknown): UnserializableError {
  const reason = refusal instanceof Error ? refusal.message : String(refusal);
  return new UnserializableError(`${reason} What was thrown: ${describe(thrown)}`);
}
