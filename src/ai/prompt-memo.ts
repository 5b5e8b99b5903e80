import { createHash, type Hash } from "node:crypto";
import { fingerprintOf } from "../engine/fingerprint.js";

/**
 * What a run's model calls already know about the prompts they were sent, so that a conversation
 * growing turn by turn costs each call the messages it adds, not the whole history again: the AI
 * SDK rebuilds every message object of the prompt on every call, so identity says nothing, and
 * re-encoding, re-hashing and re-fingerprinting the whole prompt at every call made an N-turn
 * conversation cost O(N²) CPU (most of a model call's checkpoint time at 50 turns).
 *
 * Each message seen is kept as a snapshot: a copy of its plain structure (arrays and plain objects
 * copied, strings and other primitives shared — strings are immutable, so the copy costs the
 * number of nodes, not the bytes). A new prompt's message equal to the snapshot at the same index
 * is the same message: its content hash and its share of the fingerprint are reused. Comparing
 * against a snapshot, not the previous object, sees a message mutated in place between two calls.
 * Strings the SDK passes through unchanged are the same string objects, so most comparisons are a
 * pointer check.
 *
 * The fingerprint (`fingerprintOf(prompt)`: sha256 of the prompt's JSON, 16 hex digits) is
 * computed incrementally from the same bytes: the hash state after `[m0,m1,…,mk` is kept, copied
 * (`Hash.copy()`) and continued with the messages added. It is the same value, byte for byte, as
 * `fingerprintOf` — a recorded fingerprint is compared on replay, and journals written before
 * this must replay. A prompt with anything but plain data (arrays, plain objects, strings,
 * numbers, booleans, null, undefined, bigints, Uint8Array, URL, Date) is fingerprinted by
 * `fingerprintOf` itself and nothing of it is reused.
 */
export interface PromptView {
  /** `fingerprintOf(prompt)`. */
  fingerprint: string;
  /** The prompt compared against (the one seen before), and how many leading messages it shares. */
  previous: readonly unknown[] | undefined;
  common: number;
  /**
   * Each message's content hash (sha256 of its encoded text), where already known; filled in by
   * whoever computes one, and read by the next prompt's view while it is the memo's latest.
   */
  hashes: (string | undefined)[];
}

/** A copy of a message's structure, or NOT_PLAIN. */
type Snapshot = unknown;

const NOT_PLAIN: unique symbol = Symbol("not plain data");
const MAX_SNAPSHOT_DEPTH = 64;

/** Marks a URL's snapshot (its href) apart from a string. */
class UrlSnapshot {
  constructor(readonly href: string) {}
}
/** Marks a Date's snapshot (its time value) apart from a number. */
class DateSnapshot {
  constructor(readonly time: number) {}
}
/** A plain object's own keys, in order, and their values' snapshots: compared without allocating. */
class ObjectSnapshot {
  constructor(
    readonly keys: string[],
    readonly values: Snapshot[],
  ) {}
}

export class PromptMemo {
  private prompt: readonly unknown[] | undefined;
  private snapshots: Snapshot[] = [];
  private hashes: (string | undefined)[] = [];
  /** The fingerprint's hash state after `[` and every message's JSON, comma-separated; none: not resumable. */
  private state: Hash | undefined;

  /** Compares `prompt` with the last prompt seen, makes it the last, and returns what is known of it. */
  see(prompt: readonly unknown[]): PromptView {
    const previous = this.prompt;
    let common = 0;
    const limit = Math.min(prompt.length, this.snapshots.length);
    while (common < limit && sameAsSnapshot(prompt[common], this.snapshots[common], 0)) common++;
    const snapshots = this.snapshots.slice(0, common);
    const hashes = this.hashes.slice(0, common);
    let plain = true;
    for (let i = common; i < prompt.length; i++) {
      const snapshot = snapshotOf(prompt[i], 0);
      if (snapshot === NOT_PLAIN) plain = false;
      snapshots.push(snapshot);
      hashes.push(undefined);
    }
    let fingerprint: string;
    let state: Hash | undefined;
    if (!plain) {
      fingerprint = fingerprintOf(prompt);
    } else {
      const resumed = common === this.snapshots.length && common > 0 && this.state !== undefined;
      // Continued in place: the state after the previous prompt is needed only by a prompt that
      // extends it, and this one replaces it as the memo's latest. Until it does, the memo has no
      // state to resume from (were anything below to throw, the next prompt starts afresh).
      state = resumed ? this.state! : createHash("sha256");
      this.state = undefined;
      for (let i = resumed ? common : 0; i < prompt.length; i++) {
        state.update(i === 0 ? "[" : ",");
        state.update(elementJson(prompt[i]));
      }
      const final = state.copy();
      final.update(prompt.length === 0 ? "[]" : "]");
      fingerprint = final.digest("hex").slice(0, 16);
    }
    this.prompt = prompt;
    this.snapshots = snapshots;
    this.hashes = hashes;
    this.state = state;
    return { fingerprint, previous, common, hashes };
  }
}

/**
 * An element's text inside the prompt's JSON, as `fingerprintOf`'s `JSON.stringify` writes it. Its
 * replacer changes only bigints, which `JSON.stringify` without one refuses: so a message without
 * one is written by the replacer-free (several times faster) path, with the same text.
 */
function elementJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "null";
  } catch {
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? `${v}n` : v)) ?? "null";
  }
}

function snapshotOf(value: unknown, depth: number): Snapshot {
  if (value === null || typeof value !== "object") return typeof value === "function" || typeof value === "symbol" ? NOT_PLAIN : value;
  if (depth > MAX_SNAPSHOT_DEPTH) return NOT_PLAIN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return NOT_PLAIN;
    const out: Snapshot[] = new Array(value.length);
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) return NOT_PLAIN; // a hole: the codec keeps it, JSON writes null
      const item = snapshotOf(value[i], depth + 1);
      if (item === NOT_PLAIN) return NOT_PLAIN;
      out[i] = item;
    }
    return out;
  }
  if (value instanceof Uint8Array) return value.constructor === Uint8Array ? Uint8Array.prototype.slice.call(value) : NOT_PLAIN;
  if (value instanceof URL) return new UrlSnapshot(value.href);
  if (value instanceof Date) return Object.getPrototypeOf(value) === Date.prototype ? new DateSnapshot(value.getTime()) : NOT_PLAIN;
  // A null-prototype object encodes apart from a plain one (codec.ts): not reused.
  if (Object.getPrototypeOf(value) !== Object.prototype) return NOT_PLAIN;
  if (Object.getOwnPropertySymbols(value).length > 0) return NOT_PLAIN;
  const keys = Object.keys(value);
  const values: Snapshot[] = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (key === "__proto__" || key === "toJSON") return NOT_PLAIN;
    const item = snapshotOf((value as Record<string, unknown>)[key], depth + 1);
    if (item === NOT_PLAIN) return NOT_PLAIN;
    values[i] = item;
  }
  return new ObjectSnapshot(keys, values);
}

/** True only when `value` would encode exactly as the message `snapshot` was taken of did. */
function sameAsSnapshot(value: unknown, snapshot: Snapshot, depth: number): boolean {
  if (snapshot === NOT_PLAIN) return false;
  if (value === null || typeof value !== "object") return Object.is(value, snapshot);
  if (snapshot === null || typeof snapshot !== "object" || depth > MAX_SNAPSHOT_DEPTH) return false;
  if (Array.isArray(value)) {
    if (!Array.isArray(snapshot) || Object.getPrototypeOf(value) !== Array.prototype || value.length !== snapshot.length) return false;
    for (let i = 0; i < value.length; i++) {
      if (!(i in value) || !sameAsSnapshot(value[i], snapshot[i], depth + 1)) return false;
    }
    return true;
  }
  if (value instanceof Uint8Array) {
    return (
      value.constructor === Uint8Array && snapshot instanceof Uint8Array && Buffer.from(value.buffer, value.byteOffset, value.byteLength).equals(snapshot)
    );
  }
  if (value instanceof URL) return snapshot instanceof UrlSnapshot && value.href === snapshot.href;
  if (value instanceof Date)
    return snapshot instanceof DateSnapshot && Object.getPrototypeOf(value) === Date.prototype && Object.is(value.getTime(), snapshot.time);
  if (!(snapshot instanceof ObjectSnapshot) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  // Key order is part of the encoding: the keys must come in the snapshot's order. for-in yields
  // the own enumerable keys in Object.keys' order (then inherited enumerable ones, which no
  // snapshot has: a mismatch, so no reuse) without allocating an array of them.
  const { keys, values } = snapshot;
  let i = 0;
  for (const key in value) {
    if (key !== keys[i] || !sameAsSnapshot((value as Record<string, unknown>)[key], values[i], depth + 1)) return false;
    i++;
  }
  return i === keys.length && Object.getOwnPropertySymbols(value).length === 0;
}
