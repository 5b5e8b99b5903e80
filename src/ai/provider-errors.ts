import { sdk } from "./sdk.js";
import { decodeValue, encodeValue } from "../store/value/index.js";
import { redactHeaders, redactUrl } from "./credentials.js";

/**
 * Provider errors as the journal keeps them, and as the AI SDK sees them again on replay: an
 * `APICallError` comes back an `APICallError` (`APICallError.isInstance(e)` and `instanceof`), with
 * its `statusCode`, `isRetryable`, `responseBody`, `url`, `responseHeaders`, `data` and
 * `requestBodyValues`; every other AI SDK error with its class marker (so `X.isInstance(e)` holds)
 * and its own fields; a `DOMException` (an abort) as a `DOMException` of the same name; other
 * errors with their name, message, stack and own fields; a thrown non-error as itself. Credentials
 * are taken out first (credentials.ts), and the request body is recorded the way model calls
 * record it (request-body.ts), so a failed call costs no copy of the conversation either.
 *
 * The record travels through the engine's journal as the `cause` of the step's error (a message of
 * JSON under the name `CairnProviderErrorRecord`), so it survives whatever the engine's own error
 * encoding keeps; `providerError` turns the step's error back into the SDK's — live and on replay
 * alike, so both see the same thing.
 */
export type ProviderErrorRecord =
  | {
      kind: "error";
      name: string;
      message: string;
      stack?: string;
      as: "sdk" | "dom" | "plain";
      fields: Record<string, string>;
      cause?: ProviderErrorRecord;
    }
  | { kind: "value"; value: string };

const RECORD_NAME = "CairnProviderErrorRecord";

/** Field names handled apart from the others. */
const SKIP = new Set(["name", "message", "stack", "cause"]);

export interface BodyCodec {
  /** The stored form of a request body, in the record (see request-body.ts). */
  encode(body: unknown): unknown;
  decode(form: unknown): Promise<unknown>;
}

export function providerErrorRecord(error: unknown, body: BodyCodec, depth = 0, seen = new Set<unknown>()): ProviderErrorRecord {
  if (!(error instanceof Error) && !(typeof DOMException !== "undefined" && error instanceof DOMException)) {
    return { kind: "value", value: encodeOrText(error) };
  }
  const e = error as Error & Record<string, unknown>;
  seen.add(error);
  const fields: Record<string, string> = {};
  for (const key of Object.keys(e)) {
    if (SKIP.has(key)) continue;
    let value: unknown = e[key];
    if (key === "responseHeaders") value = redactHeaders(value as Record<string, string>);
    else if (key === "url") value = redactUrl(value);
    else if (key === "requestBodyValues") value = { $cairnBody: body.encode(value) };
    fields[key] = encodeOrText(value);
  }
  const as = sdk().provider.AISDKError.isInstance(error) ? "sdk" : typeof DOMException !== "undefined" && error instanceof DOMException ? "dom" : "plain";
  const record: ProviderErrorRecord = { kind: "error", name: e.name, message: e.message, as, fields };
  if (typeof e.stack === "string") record.stack = e.stack;
  if (e.cause !== undefined && depth < 8 && !seen.has(e.cause)) record.cause = providerErrorRecord(e.cause, body, depth + 1, seen);
  return record;
}

/** The error a failed model call's step records: the original message, with the record as its cause. */
export function journalError(original: unknown, record: ProviderErrorRecord): Error {
  const error = new Error(record.kind === "error" ? record.message : "a model call threw a value that is not an Error");
  error.name = record.kind === "error" ? record.name : "Error";
  if (record.kind === "error" && record.stack !== undefined) error.stack = record.stack;
  const carrier = new Error(JSON.stringify(record));
  carrier.name = RECORD_NAME;
  Object.defineProperty(error, "cause", { value: carrier, enumerable: false, writable: true, configurable: true });
  // For the retry decision, live: not enumerable, so no encoder looks at it.
  Object.defineProperty(error, "original", { value: original, enumerable: false });
  return error;
}

/** The provider's own error behind a step error made by `journalError` (live only). */
export function originalError(error: unknown): unknown {
  return error !== null && typeof error === "object" && "original" in error ? (error as { original: unknown }).original : error;
}

/** The record inside a step's error, if the step was a model call that failed at the provider. */
export function recordIn(error: unknown): ProviderErrorRecord | undefined {
  const cause = (error as { cause?: unknown } | null)?.cause as { name?: unknown; message?: unknown } | undefined;
  if (cause === undefined || cause === null || cause.name !== RECORD_NAME || typeof cause.message !== "string") return undefined;
  try {
    return JSON.parse(cause.message) as ProviderErrorRecord;
  } catch {
    return undefined;
  }
}

/** Rebuilds the error with the AI SDK's own constructors. */
export async function rebuildProviderError(record: ProviderErrorRecord, body: BodyCodec): Promise<unknown> {
  if (record.kind === "value") return decodeOrText(record.value);
  const fields: Record<string, unknown> = {};
  for (const [key, text] of Object.entries(record.fields)) {
    const value = decodeOrText(text);
    fields[key] =
      key === "requestBodyValues" && value !== null && typeof value === "object" && "$cairnBody" in value
        ? await body.decode((value as { $cairnBody: unknown }).$cairnBody)
        : value;
  }
  const cause = record.cause === undefined ? undefined : await rebuildProviderError(record.cause, body);
  let error: Error;
  if (record.as === "dom") {
    error = new DOMException(record.message, record.name);
  } else if (record.as === "sdk") {
    error = sdkError(record.name, record.message, fields, cause);
  } else {
    const Known = ({ TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError } as Record<string, ErrorConstructor>)[record.name] ?? Error;
    error = new Known(record.message, cause === undefined ? undefined : { cause });
    error.name = record.name;
  }
  for (const [key, value] of Object.entries(fields)) {
    if (Object.getOwnPropertyDescriptor(error, key)?.writable !== false) (error as unknown as Record<string, unknown>)[key] = value;
  }
  if (record.stack !== undefined) Object.defineProperty(error, "stack", { value: record.stack, writable: true, configurable: true, enumerable: false });
  return error;
}

function sdkError(name: string, message: string, f: Record<string, unknown>, cause: unknown): Error {
  const {
    AISDKError,
    APICallError,
    EmptyResponseBodyError,
    InvalidArgumentError,
    InvalidPromptError,
    InvalidResponseDataError,
    JSONParseError,
    LoadAPIKeyError,
    LoadSettingError,
    NoContentGeneratedError,
    NoSuchModelError,
    TypeValidationError,
    UnsupportedFunctionalityError,
  } = sdk().provider;
  switch (name) {
    case "AI_APICallError":
      return new APICallError({
        message,
        url: f.url as string,
        requestBodyValues: f.requestBodyValues,
        statusCode: f.statusCode as number | undefined,
        responseHeaders: f.responseHeaders as Record<string, string> | undefined,
        responseBody: f.responseBody as string | undefined,
        cause,
        isRetryable: f.isRetryable as boolean,
        data: f.data,
      });
    case "AI_EmptyResponseBodyError":
      return new EmptyResponseBodyError({ message });
    case "AI_InvalidArgumentError":
      return new InvalidArgumentError({ message, cause, argument: f.argument as string });
    case "AI_InvalidPromptError":
      return Object.assign(new InvalidPromptError({ prompt: f.prompt, message, cause }), { message });
    case "AI_InvalidResponseDataError":
      return new InvalidResponseDataError({ data: f.data, message });
    case "AI_JSONParseError":
      return Object.assign(new JSONParseError({ text: f.text as string, cause }), { message });
    case "AI_LoadAPIKeyError":
      return new LoadAPIKeyError({ message });
    case "AI_LoadSettingError":
      return new LoadSettingError({ message });
    case "AI_NoContentGeneratedError":
      return new NoContentGeneratedError({ message });
    case "AI_NoSuchModelError":
      return new NoSuchModelError({ modelId: f.modelId as string, modelType: f.modelType as "languageModel", message });
    case "AI_TypeValidationError":
      return Object.assign(new TypeValidationError({ value: f.value, cause }), { message });
    case "AI_UnsupportedFunctionalityError":
      return new UnsupportedFunctionalityError({ functionality: f.functionality as string, message });
    default: {
      // An AI SDK error Cairn has no constructor for (a provider's own, RetryError, ...): the base
      // class with the subclass's marker, which is all its `isInstance` checks.
      const error = new AISDKError({ name, message, cause });
      Object.defineProperty(error, Symbol.for(`vercel.ai.error.${name}`), { value: true, enumerable: false });
      return error;
    }
  }
}

function encodeOrText(value: unknown): string {
  try {
    return encodeValue(value, "a provider error");
  } catch {
    return encodeValue(String(value), "a provider error");
  }
}

function decodeOrText(text: string): unknown {
  try {
    return decodeValue(text);
  } catch {
    return text;
  }
}
