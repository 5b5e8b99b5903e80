/**
 * The journal's values: the codec (what a value becomes as text, errors included) and the way a
 * value goes into a row and comes back (inline limit, content hash, error texts). The other layers
 * import this door, not the files behind it.
 */
export { MAX_DEPTH, decodeThrown, decodeValue, describe, encodeThrown, encodeValue, type ErrorRecord, type Json } from "./codec.js";
export { INLINE_LIMIT, errorFromText, errorText, fromStored, hashText, splitStored, storableThrown, storedText, toStored } from "./journal-value.js";
export type { StoredValue } from "../store.js";
