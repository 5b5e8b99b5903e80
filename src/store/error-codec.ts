import { errorClassKey, isRegisteredErrorClass, makeError } from "../error-registry.js";
import { CairnError, InvalidSpecError, preview, type ErrorRecord } from "../errors.js";
import {
  defineData,
  fromJson,
  symbolsFromJson,
  symbolsToJson,
  toJson,
  unserializable,
  withStack,
  type EncodeContext,
  type Json,
} from "./codec.js";

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

export function errorToRecord(error: Error, context: EncodeContext, path: string, depth: number): ErrorRecord {
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
      (props ??= {})[key] = error instanceof InvalidSpecError && key === "value" ? diagnostic(value, context, path, depth) : toJson(value, context, `${path}.${key}`, depth + 1);
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
export function errorFromRecord(record: ErrorRecord, errors: Error[]): Error {
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
