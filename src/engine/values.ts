import { decodeValue, encodeValue, hashText } from "../store/codec.js";
import { INLINE_LIMIT } from "../store/migrations.js";
import type { StoredValue } from "../store/store.js";
import { errorFromRecord, errorToRecord, type ErrorRecord } from "../errors.js";

/** Encodes a value for the journal; long values get a content address (see ARCHITECTURE.md, 8). */
export function toStored(value: unknown, where: string): StoredValue {
  const text = encodeValue(value, where);
  return { text, hash: text.length > INLINE_LIMIT ? hashText(text) : null };
}

export function fromStored(text: string | null): unknown {
  return text === null ? undefined : decodeValue(text);
}

export function errorText(error: unknown): string {
  return JSON.stringify(errorToRecord(error));
}

export function errorFromText(text: string): Error {
  return errorFromRecord(JSON.parse(text) as ErrorRecord);
}
