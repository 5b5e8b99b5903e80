import { decodeThrown, decodeValue, describe, encodeThrown, encodeValue, hashText } from "../store/codec.js";
import { INLINE_LIMIT } from "../store/migrations.js";
import type { StoredValue } from "../store/store.js";
import { UnserializableError } from "../errors.js";

/** Encodes a value for the journal; long values get a content address (see ARCHITECTURE.md, 8). */
export function toStored(value: unknown, where: string): StoredValue {
  const text = encodeValue(value, where);
  return { text, hash: text.length > INLINE_LIMIT ? hashText(text) : null };
}

export function fromStored(text: string | null): unknown {
  return text === null ? undefined : decodeValue(text);
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

/**
 * A finished operation as the journal records it. `failed` is its own flag because anything can be
 * thrown — `undefined` too — so "has an error" cannot tell a failure from a success.
 */
export type RecordedOutcome = { failed: false; value: unknown } | { failed: true; error: unknown };
