import type { LanguageModelV3, LanguageModelV3GenerateResult, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { randomFillSync } from "node:crypto";
import { encodeValue } from "../store/value/index.js";
import { redactHeaders } from "./credentials.js";
import type { ProviderErrorRecord } from "./provider-errors.js";
import type { BodyForm } from "./request-body.js";

/**
 * What a model call's record holds, and how the response is completed before it is recorded.
 *
 * The AI SDK fills in what a provider leaves out — a response id from `Math.random`, a timestamp
 * from the wall clock — after the model returns, so those would differ on replay. The recorded
 * model fills them in itself, before recording (a response id like the SDK's, the run clock's
 * time, the model id), and the SDK keeps what it is given. Response headers (credentials out) and
 * body are kept; the request body is kept in its content-addressed form (request-body.ts).
 */
export interface GenerateRecord extends Omit<LanguageModelV3GenerateResult, "request"> {
  latencyMs: number;
  requestBody?: BodyForm;
}

/** A streamed call's record: every part, in order, with the stream's request and response. */
export interface StreamRecord {
  parts: RecordedPart[];
  latencyMs: number;
  requestBody?: BodyForm;
  responseHeaders?: Record<string, string | undefined>;
  /** The stream broke after parts had reached the caller: what it broke with. */
  thrown?: ProviderErrorRecord;
}

/** A stream part as recorded: an in-band error part holds its error's record. */
export type RecordedPart = LanguageModelV3StreamPart | { type: "error"; error: { $cairnError: ProviderErrorRecord } };

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/**
 * A response id in the form the AI SDK's own generator makes (`aitxt-` and 24 of [0-9A-Za-z]),
 * without loading `ai`. Each character from one random byte of a pool refilled 4 KB at a time,
 * bytes of 248 and above skipped (248 = 4 × 62, so every character stays equally likely): 24
 * `randomInt` calls, or a `randomBytes` per id, cost more than the rest of the record.
 */
export function responseId(): string {
  let id = "aitxt-";
  while (id.length < 30) {
    if (poolAt === pool.length) {
      randomFillSync(pool);
      poolAt = 0;
    }
    const byte = pool[poolAt++]!;
    if (byte < 248) id += ALPHABET[byte % ALPHABET.length];
  }
  return id;
}

const pool = new Uint8Array(4096);
let poolAt = pool.length;

export function generateRecord(
  result: LanguageModelV3GenerateResult,
  model: LanguageModelV3,
  now: number,
  latencyMs: number,
  requestBody: BodyForm | undefined,
): GenerateRecord {
  const { request: _request, response, ...rest } = result;
  void _request;
  const headers = redactHeaders(response?.headers);
  const body = storable(response?.body);
  const record: GenerateRecord = {
    ...rest,
    response: {
      ...response,
      id: response?.id ?? responseId(),
      timestamp: response?.timestamp ?? new Date(now),
      modelId: response?.modelId ?? model.modelId,
      ...(headers === undefined ? {} : { headers: headers as Record<string, string> }),
      ...(body === undefined ? {} : { body }),
    },
    latencyMs,
  };
  if (headers === undefined) delete record.response!.headers;
  if (body === undefined) delete record.response!.body;
  if (requestBody !== undefined) record.requestBody = requestBody;
  return record;
}

/** The response metadata a stream gets when its provider sends none (see the top of this file). */
export function metadataPart(model: LanguageModelV3, now: number): LanguageModelV3StreamPart {
  return { type: "response-metadata", id: responseId(), timestamp: new Date(now), modelId: model.modelId };
}

/** A value as the journal can keep it: itself, or its JSON form, or nothing. */
export function storable(value: unknown): unknown {
  if (value === undefined) return undefined;
  try {
    encodeValue(value, "a model response");
    return value;
  } catch {
    try {
      return JSON.parse(JSON.stringify(value)) as unknown;
    } catch {
      return undefined;
    }
  }
}
