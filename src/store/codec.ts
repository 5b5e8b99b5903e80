import { createHash } from "node:crypto";
import { UnserializableError, errorFromRecord, errorToRecord, type ErrorRecord } from "../errors.js";

/**
 * The journal's value encoding: JSON, with tagged objects for the types JSON loses.
 * Date, BigInt, Map, Set, Uint8Array (and Buffer), Error, undefined, NaN and ±Infinity survive the
 * round trip. Functions, symbols, cycles and class instances are refused up front with an
 * `UnserializableError` naming where the value came from and the path to the bad part — a value
 * that could not be rebuilt the same way on replay must never reach the journal.
 *
 * A plain object that happens to own a "$c" key is escaped, so user data can never be mistaken
 * for a tag.
 */

const TAG = "$c";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function encodeValue(value: unknown, where: string): string {
  return JSON.stringify(toJson(value, where, "value", new Set()));
}

export function decodeValue(text: string): unknown {
  return fromJson(JSON.parse(text) as Json);
}

/** sha256 of the encoded text: the address of a content-addressed payload. */
export function hashText(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function toJson(value: unknown, where: string, path: string, stack: Set<object>): Json {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (Number.isFinite(value)) return value;
      return { [TAG]: "Number", v: String(value) };
    case "undefined":
      return { [TAG]: "undefined" };
    case "bigint":
      return { [TAG]: "BigInt", v: value.toString() };
    case "function":
    case "symbol":
      throw unserializable(where, path, typeof value);
  }
  if (value === null) return null;
  const object = value as object;
  if (stack.has(object)) throw unserializable(where, path, "a cycle (an object that contains itself)");
  stack.add(object);
  try {
    if (Array.isArray(object)) return object.map((item, i) => toJson(item, where, `${path}[${i}]`, stack));
    if (object instanceof Date) return { [TAG]: "Date", v: object.getTime() };
    if (object instanceof Map) {
      return {
        [TAG]: "Map",
        v: [...object].map(([k, v], i) => [toJson(k, where, `${path}.key(${i})`, stack), toJson(v, where, `${path}.get(${i})`, stack)]),
      };
    }
    if (object instanceof Set) {
      return { [TAG]: "Set", v: [...object].map((item, i) => toJson(item, where, `${path}.item(${i})`, stack)) };
    }
    if (object instanceof Uint8Array) return { [TAG]: "Bytes", v: Buffer.from(object.buffer, object.byteOffset, object.byteLength).toString("base64") };
    if (object instanceof Error) return { [TAG]: "Error", v: errorToRecord(object) as unknown as Json };
    const proto = Object.getPrototypeOf(object) as object | null;
    if (proto !== Object.prototype && proto !== null) {
      const className = (proto.constructor as { name?: string } | undefined)?.name ?? "anonymous";
      throw unserializable(where, path, `an instance of class ${className}`);
    }
    const out: { [key: string]: Json } = {};
    for (const key of Object.keys(object)) {
      out[key] = toJson((object as Record<string, unknown>)[key], where, `${path}.${key}`, stack);
    }
    return TAG in out ? { [TAG]: "Object", v: out } : out;
  } finally {
    stack.delete(object);
  }
}

function fromJson(json: Json): unknown {
  if (json === null || typeof json !== "object") return json;
  if (Array.isArray(json)) return json.map(fromJson);
  const tag = json[TAG];
  if (tag === undefined) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(json)) out[key] = fromJson(json[key] as Json);
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
      return new Date(v as number);
    case "Map":
      return new Map((v as [Json, Json][]).map(([k, val]) => [fromJson(k), fromJson(val)]));
    case "Set":
      return new Set((v as Json[]).map(fromJson));
    case "Bytes":
      return new Uint8Array(Buffer.from(v as string, "base64"));
    case "Error":
      return errorFromRecord(v as unknown as ErrorRecord);
    case "Object": {
      const out: Record<string, unknown> = {};
      const inner = v as { [key: string]: Json };
      for (const key of Object.keys(inner)) out[key] = fromJson(inner[key] as Json);
      return out;
    }
    default:
      throw new Error(`unknown value tag ${JSON.stringify(tag)} in the journal: was it written by a newer Cairn?`);
  }
}

function unserializable(where: string, path: string, what: string): UnserializableError {
  return new UnserializableError(
    `${where}: cannot store ${path} — it is ${what}. Return plain data (objects, arrays, strings, numbers, ` +
      "Date, BigInt, Map, Set, Uint8Array, Error) from durable operations.",
  );
}
