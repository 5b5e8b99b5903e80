import { createHash } from "node:crypto";
import { UnserializableError, type ErrorRecord } from "../errors.js";
import { errorFromRecord, errorToRecord } from "./error-codec.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * The journal's value encoding: JSON, with tagged objects for what JSON loses, so that a value
 * comes back from the journal as it went in — or is refused when it is written, never changed.
 *
 * Survives: strings, booleans, numbers (with -0, NaN and ±Infinity), BigInt, undefined, null;
 * arrays (holes included); plain and null-prototype objects, with their symbol-keyed properties
 * when the symbol is a global one (`Symbol.for`); Date (an Invalid Date too), Map, Set, Uint8Array,
 * Buffer (as a Buffer); errors (see `error-codec.ts`). Shared references come back as copies.
 *
 * Refused with an `UnserializableError` naming where the value came from and the path to the bad
 * part: functions, symbols, cycles (except through an error's `cause`), instances of other classes,
 * keys made of local symbols, an own "__proto__" key, and nesting deeper than `MAX_DEPTH`.
 *
 * A plain object that happens to own a "$c" key is escaped, so user data is never taken for a tag.
 */

const TAG = "$c";

/** Deeper values are refused: decoding them would risk the stack, and no real data is this deep. */
export const MAX_DEPTH = 1_000;

/** What an encoding in progress carries down the value. */
export interface EncodeContext {
  readonly where: string;
  /** The objects on the current path: a value that contains itself is a cycle. */
  readonly stack: Set<object>;
  /** The errors on the current path, outermost first: a `cause` that points back is recorded by distance. */
  readonly errors: Error[];
}

export function encodeValue(value: unknown, where: string): string {
  return JSON.stringify(toJson(value, newContext(where), "value", 0));
}

export function decodeValue(text: string): unknown {
  return fromJson(JSON.parse(text) as Json, []);
}

/** sha256 of the encoded text: the address of a content-addressed payload. */
export function hashText(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * A thrown value as the journal's error column keeps it: an error record, or — for a thrown
 * string, number, null, undefined or object — a record that carries the value itself (its `name`
 * and `message` only describe it for people and the CLI). Throws an `UnserializableError` for a
 * value that cannot come back the same.
 */
export function encodeThrown(thrown: unknown, where: string): string {
  const context = newContext(where);
  if (thrown instanceof Error) {
    return JSON.stringify(withStack(thrown, context, "error", 0, () => errorToRecord(thrown, context, "error", 0)));
  }
  const record: ErrorRecord = { name: `thrown ${thrown === null ? "null" : typeof thrown}`, message: describe(thrown), thrown: toJson(thrown, context, "thrown", 0) };
  return JSON.stringify(record);
}

/** What `encodeThrown` encoded; also reads every error record Cairn ever wrote. */
export function decodeThrown(text: string): unknown {
  const record = JSON.parse(text) as ErrorRecord;
  if ("thrown" in record) return fromJson(record.thrown as Json, []);
  return errorFromRecord(record, []);
}

function newContext(where: string): EncodeContext {
  return { where, stack: new Set(), errors: [] };
}

export function toJson(value: unknown, context: EncodeContext, path: string, depth: number): Json {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (Number.isFinite(value)) return value === 0 && 1 / value < 0 ? { [TAG]: "Number", v: "-0" } : value;
      return { [TAG]: "Number", v: String(value) };
    case "undefined":
      return { [TAG]: "undefined" };
    case "bigint":
      return { [TAG]: "BigInt", v: value.toString() };
    case "function":
    case "symbol":
      throw unserializable(context.where, path, `a ${typeof value}`);
  }
  if (value === null) return null;
  return withStack(value as object, context, path, depth, () => objectToJson(value as object, context, path, depth));
}

/** Guards the recursion: cycles and excessive depth are refused before descending. */
export function withStack<T>(object: object, context: EncodeContext, path: string, depth: number, encode: () => T): T {
  if (depth >= MAX_DEPTH) throw unserializable(context.where, path, `nested deeper than ${MAX_DEPTH} levels`);
  if (context.stack.has(object)) throw unserializable(context.where, path, "a cycle (an object that contains itself)");
  context.stack.add(object);
  try {
    return encode();
  } finally {
    context.stack.delete(object);
  }
}

function objectToJson(object: object, context: EncodeContext, path: string, depth: number): Json {
  if (Array.isArray(object)) return arrayToJson(object, context, path, depth);
  const proto = Object.getPrototypeOf(object) as object | null;
  if (proto === Object.prototype || proto === null) return plainToJson(object, proto === null, context, path, depth);
  if (object instanceof Error) return { [TAG]: "Error", v: errorToRecord(object, context, path, depth) as unknown as Json };
  if (proto === Date.prototype) {
    const time = (object as Date).getTime();
    return { [TAG]: "Date", v: Number.isNaN(time) ? null : time };
  }
  if (proto === Map.prototype) {
    return {
      [TAG]: "Map",
      v: [...(object as Map<unknown, unknown>)].map(([k, v], i) => [
        toJson(k, context, `${path}.key(${i})`, depth + 1),
        toJson(v, context, `${path}.get(${i})`, depth + 1),
      ]),
    };
  }
  if (proto === Set.prototype) {
    return { [TAG]: "Set", v: [...(object as Set<unknown>)].map((item, i) => toJson(item, context, `${path}.item(${i})`, depth + 1)) };
  }
  if (proto === Buffer.prototype || proto === Uint8Array.prototype) {
    const bytes = object as Uint8Array;
    return {
      [TAG]: proto === Buffer.prototype ? "Buffer" : "Bytes",
      v: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64"),
    };
  }
  const className = (proto?.constructor as { name?: string } | undefined)?.name ?? "anonymous";
  throw unserializable(context.where, path, `an instance of class ${className}`);
}

function arrayToJson(array: unknown[], context: EncodeContext, path: string, depth: number): Json {
  const out: Json[] = [];
  for (let i = 0; i < array.length; i++) {
    if (!(i in array)) return sparseToJson(array, context, path, depth);
    out.push(toJson(array[i], context, `${path}[${i}]`, depth + 1));
  }
  return out;
}

/** An array with holes: its length and the entries it has, so the holes stay holes. */
function sparseToJson(array: unknown[], context: EncodeContext, path: string, depth: number): Json {
  const entries: Json[] = [];
  for (const key of Object.keys(array)) {
    const i = Number(key);
    if (!Number.isInteger(i)) continue;
    entries.push([i, toJson(array[i], context, `${path}[${i}]`, depth + 1)]);
  }
  return { [TAG]: "Sparse", n: array.length, v: entries };
}

function plainToJson(object: object, nullProto: boolean, context: EncodeContext, path: string, depth: number): Json {
  const out: { [key: string]: Json } = {};
  for (const key of Object.keys(object)) {
    if (key === "__proto__") throw unserializable(context.where, `${path}["__proto__"]`, 'an own "__proto__" key (reading it back would set the prototype)');
    out[key] = toJson((object as Record<string, unknown>)[key], context, `${path}.${key}`, depth + 1);
  }
  const symbols = symbolsToJson(object, context, path, depth);
  if (!nullProto && symbols === undefined && !(TAG in out)) return out;
  const tagged: { [key: string]: Json } = { [TAG]: "Object", v: out };
  if (nullProto) tagged.np = true;
  if (symbols !== undefined) tagged.s = symbols;
  return tagged;
}

/**
 * Own enumerable properties keyed by global symbols (`Symbol.for(name)`), as [name, value] pairs —
 * how libraries brand objects (the AI SDK marks its errors this way). A local symbol cannot be
 * made again in another process, so a property keyed by one is refused.
 */
export function symbolsToJson(object: object, context: EncodeContext, path: string, depth: number): Json[] | undefined {
  const symbols = Object.getOwnPropertySymbols(object);
  if (symbols.length === 0) return undefined;
  let out: Json[] | undefined;
  for (const symbol of symbols) {
    if (!Object.prototype.propertyIsEnumerable.call(object, symbol)) continue;
    const name = Symbol.keyFor(symbol);
    const at = `${path}[${String(symbol)}]`;
    if (name === undefined) throw unserializable(context.where, at, "a property keyed by a local symbol (only Symbol.for keys can be made again)");
    (out ??= []).push([name, toJson((object as Record<symbol, unknown>)[symbol], context, at, depth + 1)]);
  }
  return out;
}

export function fromJson(json: Json, errors: Error[]): unknown {
  if (json === null || typeof json !== "object") return json;
  if (Array.isArray(json)) return json.map((item) => fromJson(item, errors));
  const tag = json[TAG];
  if (tag === undefined) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(json)) out[key] = fromJson(json[key] as Json, errors);
    return out;
  }
  const v = json.v;
  switch (tag) {
    case "undefined":
      return undefined;
    case "Number":
      return Number(v);
    case "BigInt":
      return BigInt(v as string);
    case "Date":
      return new Date(v === null ? NaN : (v as number));
    case "Map":
      return new Map((v as [Json, Json][]).map(([k, val]) => [fromJson(k, errors), fromJson(val, errors)]));
    case "Set":
      return new Set((v as Json[]).map((item) => fromJson(item, errors)));
    case "Bytes":
      return new Uint8Array(Buffer.from(v as string, "base64"));
    case "Buffer":
      return Buffer.from(v as string, "base64");
    case "Sparse": {
      const out: unknown[] = new Array(json.n as number);
      for (const [i, item] of v as [number, Json][]) out[i] = fromJson(item, errors);
      return out;
    }
    case "Error":
      return errorFromRecord(v as unknown as ErrorRecord, errors);
    case "Object": {
      const out: Record<string | symbol, unknown> = json.np === true ? (Object.create(null) as Record<string, unknown>) : {};
      const inner = v as { [key: string]: Json };
      for (const key of Object.keys(inner)) defineData(out, key, fromJson(inner[key] as Json, errors));
      symbolsFromJson(out, json.s as Json[] | undefined, errors);
      return out;
    }
    default:
      throw new Error(`unknown value tag ${JSON.stringify(tag)} in the journal: was it written by a newer Cairn?`);
  }
}

export function symbolsFromJson(target: object, symbols: Json[] | undefined, errors: Error[]): void {
  for (const [name, json] of (symbols ?? []) as [string, Json][]) defineData(target, Symbol.for(name), fromJson(json, errors));
}

/** An own data property, as assignment would make it — without running setters (or `__proto__`'s). */
export function defineData(target: object, key: string | symbol, value: unknown, enumerable = true): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable, configurable: true });
}

export function describe(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (value === undefined) return "undefined";
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "number" || typeof value === "symbol" || typeof value === "function") return String(value);
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 200 ? `${text.slice(0, 199)}…` : text;
  } catch {
    return Object.prototype.toString.call(value);
  }
}

export function unserializable(where: string, path: string, what: string): UnserializableError {
  const shown = path.length > 160 ? `${path.slice(0, 60)}…${path.slice(-60)}` : path;
  return new UnserializableError(
    `${where}: cannot store ${shown} — it is ${what}, which would not come back the same on replay. Use plain data ` +
      "(objects, arrays, strings, numbers, Date, BigInt, Map, Set, Uint8Array, Buffer, errors with plain-data fields).",
  );
}
