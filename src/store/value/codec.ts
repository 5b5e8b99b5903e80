import { errorClassKey, isRegisteredErrorClass, makeError } from "../../error-registry.js";
import { CairnError, InvalidSpecError, UnserializableError, preview } from "../../errors.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * The journal's value encoding: JSON, with tagged objects for what JSON loses, so that a value
 * comes back from the journal as it went in — or is refused when it is written, never changed.
 *
 * Survives: strings, booleans, numbers (with -0, NaN and ±Infinity), BigInt, undefined, null;
 * arrays (holes included); plain and null-prototype objects, with their symbol-keyed properties
 * when the symbol is a global one (`Symbol.for`); Date (an Invalid Date too), Map, Set, Uint8Array,
 * Buffer (as a Buffer); errors (see "Errors in the journal" below). Shared references come back as copies.
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
interface EncodeContext {
  readonly where: string;
  /** The objects on the current path: a value that contains itself is a cycle. */
  readonly stack: Set<object>;
  /** The errors on the current path, outermost first: a `cause` that points back is recorded by distance. */
  readonly errors: Error[];
}

export function encodeValue(value: unknown, where: string): string {
  if (value === null || typeof value !== "object") return JSON.stringify(toJson(value, newContext(where), "value", 0));
  const shape = plainShape(value, 0, PLAIN_CHECK_DEPTH);
  if (shape === PLAIN) return JSON.stringify(value);
  // Plain but for undefined values (what the AI SDK's messages hold: `providerOptions: undefined`):
  // JSON.stringify writes the tag where each undefined is, the walk's text without its copy.
  if (shape === (PLAIN | WITH_UNDEFINED)) return JSON.stringify(value, tagUndefined);
  const context = newContext(where);
  return JSON.stringify(withStack(value, context, "value", 0, () => objectToJson(value, context, "value", 0)));
}

const UNDEFINED_TAG: Json = Object.freeze({ [TAG]: "undefined" });

/** `JSON.stringify`'s replacer for plain data with undefined values: each becomes its tag. */
function tagUndefined(_key: string, value: unknown): unknown {
  return value === undefined ? UNDEFINED_TAG : value;
}

export function decodeValue(text: string): unknown {
  return fromJson(JSON.parse(text) as Json, []);
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
  const record: ErrorRecord = {
    name: `thrown ${thrown === null ? "null" : typeof thrown}`,
    message: describe(thrown),
    thrown: toJson(thrown, context, "thrown", 0),
  };
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

/** For tests: `encodeValue` with the plain-data shortcut off, every value walked and copied. */
export function encodeValueWalked(value: unknown, where: string): string {
  const context = newContext(where);
  walkedOnly.add(context);
  return JSON.stringify(toJson(value, context, "value", 0));
}

const walkedOnly = new WeakSet<EncodeContext>();

function toJson(value: unknown, context: EncodeContext, path: string, depth: number): Json {
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
  // Plain data (most of what steps return, model messages) is its own JSON form: no copy is made of
  // it, and JSON.stringify writes the same text the copy would have given.
  if (!walkedOnly.has(context) && plainShape(value, depth, Math.min(depth + PLAIN_CHECK_DEPTH, MAX_DEPTH)) === PLAIN) return value as Json;
  return withStack(value as object, context, path, depth, () => objectToJson(value as object, context, path, depth));
}

/** How deep `plainShape` looks before leaving a value to the encoder's own walk. */
const PLAIN_CHECK_DEPTH = 64;

/** `plainShape`'s answers: bits, or NOT_PLAIN. */
const NOT_PLAIN = 0;
const PLAIN = 1;
const WITH_UNDEFINED = 2;

/**
 * Whether `value` is data JSON keeps as it is, so that `JSON.stringify(value)` is exactly the text
 * `toJson` would give (PLAIN): strings, booleans, null, finite numbers other than -0, arrays without
 * holes and plain objects (Object.prototype) with no "$c", "__proto__" or "toJSON" key and no
 * symbol keys, nested less than `stop` deep. `PLAIN | WITH_UNDEFINED`: the same, with undefined
 * values among them (each encodes as its tag). Anything else — -0, a Date, a cycle (it reaches
 * `stop`) — is NOT_PLAIN, left to the encoder, which tags or refuses it as before. No allocation
 * but `Object.keys`.
 */
function plainShape(value: unknown, depth: number, stop: number): number {
  switch (typeof value) {
    case "string":
    case "boolean":
      return PLAIN;
    case "number":
      return Number.isFinite(value) && !(value === 0 && 1 / value < 0) ? PLAIN : NOT_PLAIN;
    case "undefined":
      return PLAIN | WITH_UNDEFINED;
    case "object":
      break;
    default:
      return NOT_PLAIN;
  }
  if (value === null) return PLAIN;
  if (depth >= stop) return NOT_PLAIN;
  let shape = PLAIN;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === Array.prototype) {
    const array = value as unknown[];
    for (let i = 0; i < array.length; i++) {
      if (!(i in array)) return NOT_PLAIN;
      const item = plainShape(array[i], depth + 1, stop);
      if (item === NOT_PLAIN) return NOT_PLAIN;
      shape |= item;
    }
    return shape;
  }
  if (proto !== Object.prototype || Object.getOwnPropertySymbols(value).length > 0) return NOT_PLAIN;
  for (const key of Object.keys(value)) {
    if (key === TAG || key === "__proto__" || key === "toJSON") return NOT_PLAIN;
    const item = plainShape((value as Record<string, unknown>)[key], depth + 1, stop);
    if (item === NOT_PLAIN) return NOT_PLAIN;
    shape |= item;
  }
  return shape;
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
    if (key === "__proto__")
      throw unserializable(context.where, `${path}["__proto__"]`, 'an own "__proto__" key (reading it back would set the prototype)');
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
function symbolsToJson(object: object, context: EncodeContext, path: string, depth: number): Json[] | undefined {
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

function fromJson(json: Json, errors: Error[]): unknown {
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

function symbolsFromJson(target: object, symbols: Json[] | undefined, errors: Error[]): void {
  for (const [name, json] of (symbols ?? []) as [string, Json][]) defineData(target, Symbol.for(name), fromJson(json, errors));
}

/** An own data property, as assignment would make it — without running setters (or `__proto__`'s). */
function defineData(target: object, key: string | symbol, value: unknown, enumerable = true): void {
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

function unserializable(where: string, path: string, what: string): UnserializableError {
  const shown = path.length > 160 ? `${path.slice(0, 60)}…${path.slice(-60)}` : path;
  return new UnserializableError(
    `${where}: cannot store ${shown} — it is ${what}, which would not come back the same on replay. Use plain data ` +
      "(objects, arrays, strings, numbers, Date, BigInt, Map, Set, Uint8Array, Buffer, errors with plain-data fields).",
  );
}

/**
 * The shape an error takes in the journal (the `error` columns, and errors inside values). The
 * first fields are what Cairn 0.1 wrote and what the CLI reads; the rest came later and are
 * optional, so every record ever written still reads. Values inside are in the codec's tagged JSON.
 */
export interface ErrorRecord {
  name: string;
  message: string;
  code?: string;
  stack?: string;
  runId?: string;
  seq?: number;
  /** The cause, when it is an error. */
  cause?: ErrorRecord;
  /** The key of the error's registered class (see `registerErrorClass`); absent in old records. */
  class?: string;
  /** Own enumerable fields (`statusCode`, `isRetryable`, ...), by name. */
  props?: Record<string, unknown>;
  /** Own enumerable fields keyed by global symbols, as [Symbol.keyFor name, value] pairs. */
  symbols?: unknown[];
  /** An AggregateError's `errors`. */
  errors?: unknown;
  /** The cause, when it is not an error (a string, an object, undefined). */
  causeValue?: unknown;
  /** The cause is the error this many levels up the cause chain (0: the error itself). */
  causeRef?: number;
  /** The cause was an enumerable own property (assigned, not given to the constructor). */
  causeEnumerable?: true;
  /** What was thrown, when it was not an error at all; `name` and `message` then describe it. */
  thrown?: unknown;
}

/**
 * Errors in the journal. An error comes back with its class (when registered: see
 * `registerErrorClass`), `name`, `message`, `stack`, `code`, its own enumerable fields (with
 * global-symbol keys, which is how the AI SDK's `isInstance` markers live), an AggregateError's
 * `errors`, and its `cause` — an error, any storable value, or a pointer back up the cause chain,
 * so an error that is its own cause is stored (and comes back as its own cause) instead of looping.
 *
 * A field that cannot be stored (a function, a socket, a response object) refuses the whole error
 * with an `UnserializableError` naming the path, as for any value: the engine then fails the step
 * with that refusal live too, so replay never differs from what the workflow saw.
 */

/** Fields the record keeps apart from `props`. */
const SPECIAL = new Set(["name", "message", "stack", "cause"]);

function errorToRecord(error: Error, context: EncodeContext, path: string, depth: number): ErrorRecord {
  context.errors.push(error);
  try {
    const record: ErrorRecord = { name: String(error.name), message: String(error.message) };
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string") record.code = code;
    if (typeof error.stack === "string") record.stack = error.stack;
    const cairn = error instanceof CairnError;
    if (cairn) {
      if (error.runId !== undefined) record.runId = error.runId;
      if (error.seq !== undefined) record.seq = error.seq;
    }
    record.class = errorClassKey(error);
    let props: Record<string, Json> | undefined;
    for (const key of Object.keys(error)) {
      if (SPECIAL.has(key) || (key === "code" && record.code !== undefined) || (cairn && (key === "runId" || key === "seq"))) continue;
      if (key === "__proto__") throw unserializable(context.where, `${path}["__proto__"]`, 'an own "__proto__" key');
      const value = (error as unknown as Record<string, unknown>)[key];
      (props ??= {})[key] =
        error instanceof InvalidSpecError && key === "value"
          ? diagnostic(value, context, path, depth)
          : toJson(value, context, `${path}.${key}`, depth + 1);
    }
    if (props !== undefined) record.props = props;
    const symbols = symbolsToJson(error, context, path, depth);
    if (symbols !== undefined) record.symbols = symbols;
    const errors = Object.getOwnPropertyDescriptor(error, "errors");
    if (errors !== undefined && !errors.enumerable && "value" in errors) record.errors = toJson(errors.value, context, `${path}.errors`, depth + 1);
    if ("cause" in error) {
      causeToRecord(record, error.cause, context, `${path}.cause`, depth + 1);
      // Set by assignment (`this.cause = cause`, as the AI SDK does) rather than by the constructor.
      if (Object.getOwnPropertyDescriptor(error, "cause")?.enumerable === true) record.causeEnumerable = true;
    }
    return record;
  } finally {
    context.errors.pop();
  }
}

function causeToRecord(record: ErrorRecord, cause: unknown, context: EncodeContext, path: string, depth: number): void {
  if (!(cause instanceof Error)) {
    record.causeValue = toJson(cause, context, path, depth);
    return;
  }
  const up = context.errors.lastIndexOf(cause);
  if (up >= 0) {
    record.causeRef = context.errors.length - 1 - up;
    return;
  }
  record.cause = withStack(cause, context, path, depth, () => errorToRecord(cause, context, path, depth));
}

/** InvalidSpecError's `value` is a diagnostic (often the very function that was refused): kept if storable, else previewed. */
function diagnostic(value: unknown, context: EncodeContext, path: string, depth: number): Json {
  try {
    return toJson(value, context, `${path}.value`, depth + 1);
  } catch {
    return preview(value);
  }
}

/**
 * Rebuilds an error. Old records (no `class`) are rebuilt by `name` when a class is registered
 * under it, else as an `Error` with that name, as Cairn 0.1 did. `errors` holds the errors being
 * rebuilt around this one, outermost first, for `causeRef`.
 */
function errorFromRecord(record: ErrorRecord, errors: Error[]): Error {
  const key = record.class ?? (isRegisteredErrorClass(record.name) ? record.name : "Error");
  const error = makeError(key, String(record.message));
  errors.push(error);
  try {
    if (error.name !== record.name) defineData(error, "name", record.name);
    if (record.stack !== undefined) defineData(error, "stack", record.stack, false);
    if (record.code !== undefined && (error as { code?: unknown }).code !== record.code) defineData(error, "code", record.code);
    if (error instanceof CairnError) {
      defineData(error, "runId", record.runId);
      defineData(error, "seq", record.seq);
    }
    for (const [name, json] of Object.entries(record.props ?? {})) defineData(error, name, fromJson(json as Json, errors));
    symbolsFromJson(error, record.symbols as Json[] | undefined, errors);
    if (record.errors !== undefined) defineData(error, "errors", fromJson(record.errors as Json, errors), false);
    const enumerable = record.causeEnumerable === true;
    if (record.cause !== undefined) defineData(error, "cause", errorFromRecord(record.cause, errors), enumerable);
    else if (record.causeRef !== undefined) defineData(error, "cause", errors[errors.length - 1 - record.causeRef], enumerable);
    else if ("causeValue" in record) defineData(error, "cause", fromJson(record.causeValue as Json, errors), enumerable);
    return error;
  } finally {
    errors.pop();
  }
}
