import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import { BudgetExceededError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { StepOptions } from "../engine/context.js";
import type { WriteOp } from "../store/store.js";
import { agentState, type AgentRunState } from "./agent-state.js";
import { chargeOp, exceeded, scopeChain } from "./budget.js";
import { askForMoreIfSpent } from "./budget-approval.js";
import { callSummary, modelCallRow, promptRecord, type CallSummary, type PromptRecord } from "./model-call-record.js";
import { generateRecord, metadataPart, type GenerateRecord, type RecordedPart, type StreamRecord } from "./model-response.js";
import { redactHeaders } from "./credentials.js";
import { costUsd } from "./pricing.js";
import {
  journalError,
  originalError,
  providerErrorRecord,
  rebuildProviderError,
  recordIn,
  type BodyCodec,
  type ProviderErrorRecord,
} from "./provider-errors.js";
import { modelCallReturned } from "./replayable-ids.js";
import { generateSpan, streamSpan } from "./gen-ai-spans.js";
import { decodeBody, encodeBody, recordedBodyForm, type BodyForm, type EncodedBody } from "./request-body.js";
import { appendChunk, chunkOf, streamBand, streamChunkOps } from "./stream-chunks.js";
import { sdk } from "./sdk.js";
import {
  canonicalCallOptions,
  canonicalGenerateResult,
  canonicalStreamPart,
  sdkGenerateResult,
  sdkStreamPart,
  specOf,
  type CairnLanguageModel,
} from "./sdk-version.js";

export interface RecordedModelOptions {
  /** The budget scope charged (an agent's run id); none: no budget. */
  scopeId?: string | undefined;
  /**
   * Further attempts within one model call, by Cairn, after a provider failure that says it is
   * retryable (`APICallError.isRetryable`, network errors, timeouts). Default 0: the AI SDK's own
   * `maxRetries` (default 2) is the one retry layer, and each of its attempts is a recorded call of
   * its own. Setting `retries` makes Cairn the retry layer: pass `maxRetries: 0` to the SDK then
   * (`cairn.agent` does), or the two multiply.
   */
  retries?: number;
  /** Per attempt. Default: none. */
  timeoutMs?: number;
  /** "fail" (default): a spent budget fails the run. "ask": wait for an approval to raise it. */
  onBudgetExceeded?: "fail" | "ask";
  /**
   * External synchrony for model calls. Default false: each call's record waits for its fsync
   * (SQLite, synchronous=FULL) or WAL flush (PostgreSQL) before the SDK sees the response, as every
   * record does. True: a `generateText` call's record (the step, its `cairn_model_calls` row and
   * budget charge) commits without waiting; the run forces the fsync before its next operation that
   * can act on the world — a step or tool execution, a message sent, an approval requested, an event
   * set, a child started, a sleep, any other durable operation — and before its result is returned
   * (the finish commit waits, as ever). Streamed calls (`doStream`) always wait: their parts reach
   * readers. Calls made inside a step's or tool's function always wait: code there may act directly.
   *
   * Failure semantics: a process crash loses nothing (the commit reached the WAL). A power loss of
   * the machine (SQLite), or a crash or power loss of the database server (PostgreSQL), can erase the
   * records of model calls made since the last forced fsync: on recovery those calls run again —
   * charged twice by the provider, and possibly answering differently — but never after anything
   * that depended on them reached the world, since that waited for the fsync first. Readers of the
   * database (the dashboard, `cairn sql`, spans already exported) may see a record that is then erased.
   * Code that acts without `ctx` (a `fetch` in an SDK callback) is not covered.
   */
  deferModelCallFsync?: boolean;
}

/**
 * A language model whose calls are durable steps of the run (kind "model"). The AI SDK's
 * `generateText` / `streamText` loops can use it unchanged, and see on replay what they saw live.
 *
 * Failure semantics: the response (content, tool calls, finish reason, usage, provider metadata,
 * response id, timestamp, headers and body; the request body by reference, see request-body.ts) is
 * committed — together with a `cairn_model_calls` row and the budget charge — before the SDK sees
 * it. On recovery a recorded call returns its record and the provider is not contacted. A crash
 * while the provider is answering calls it again on recovery (the answer was never seen). A call
 * that fails at the provider is recorded as failed with its error's class and fields
 * (provider-errors.ts), so replay throws an equal error (`APICallError.isInstance`, `statusCode`,
 * `isRetryable`, ...), and the SDK's own retries go on to the next recorded attempt just as live.
 * Aborts through the caller's `abortSignal` are never retried; a call's own signal combines the
 * caller's with the step's (run cancelled, deadline, attempt timeout). Model calls take their seq
 * when the SDK calls the model, in program order.
 *
 * Streaming: parts reach the SDK as they arrive, and reach readers in other processes through
 * `cairn.stream(runId)`; the `finish` part is held back until the call's checkpoint commits, and
 * the commit rewrites the stream's rows from the record, so a stream cut by a crash is rebuilt
 * whole. An in-band `error` part is recorded and delivered like any other part (the SDK goes on and
 * finishes with `finishReason: "error"`), live and on replay. A stream that breaks is recorded with
 * the parts it delivered and the error, and replays breaking there, as the SDK sees a broken stream
 * without Cairn — unless it broke before its first part and Cairn's own `retries` has attempts left,
 * then it is tried again. Raw chunks are recorded when the call asks for them
 * (`includeRawChunks`).
 *
 * Both AI SDK majors: the model returned implements the specification of the model given (v3 or
 * v4); calls are recorded in the v3 form whichever it is (sdk-version.ts), so records do not depend
 * on the major that wrote them. The wrapper is Cairn's own (what `wrapLanguageModel` builds, without
 * loading `ai`).
 */
export function recordedModel<M extends CairnLanguageModel>(run: DurableRun, given: M, options: RecordedModelOptions = {}): M {
  const spec = specOf(given);
  // Called with the SDK's own (v3 or v4) options; its results are made canonical where they arrive.
  const model = given as unknown as LanguageModelV3;
  const state = agentState(run);
  const name = `${model.provider}:${model.modelId}`;
  const stepOptions = (params: LanguageModelV3CallOptions, streamStarted: () => boolean): StepOptions => ({
    retries: options.retries ?? 0,
    shouldRetry: (error) => !streamStarted() && params.abortSignal?.aborted !== true && retryableProviderError(originalError(error)),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });

  /** Checks the budget chain (live only) and returns the scopes to charge. */
  async function admit(): Promise<string[]> {
    if (options.scopeId === undefined) return [];
    const scopes = await scopeChain(run, options.scopeId);
    const over = exceeded(scopes, run.clock.now(), run.runId);
    if (over !== null) throw over;
    return scopes.map((s) => s.run_id);
  }

  /**
   * In "ask" mode a budget check (a database read, perhaps an approval) comes before a model call
   * takes its seq. Concurrent calls go through a per-run queue in call order, and each takes its seq
   * before the next may check, so seqs follow call order on every replay. Returns the release.
   */
  async function inOrder(): Promise<() => void> {
    if (options.onBudgetExceeded !== "ask" || options.scopeId === undefined) return () => undefined;
    await state.modelOrder.acquire();
    try {
      await askForMoreIfSpent(run, options.scopeId);
    } catch (error) {
      state.modelOrder.release();
      throw error;
    }
    return () => state.modelOrder.release();
  }

  function rows(seq: number, prompt: PromptRecord, summary: CallSummary, chain: string[]): WriteOp[] {
    const cost = costUsd(state.pricing, summary.inputTokens, summary.outputTokens);
    const out: WriteOp[] = [...prompt.payloads, modelCallRow(run, seq, model, prompt, summary, cost)];
    const charge = chargeOp(chain, summary.inputTokens + summary.outputTokens, cost);
    if (charge !== null) out.push(charge);
    return out;
  }

  /** Request bodies in errors and error parts: never the base of a later call's delta (seq -1). */
  function bodies(params: LanguageModelV3CallOptions): BodyCodec {
    return {
      encode: (body) => encodeBody(run, -1, body, params.prompt).form,
      decode: (form) => decodeBody(run, -1, form, params.prompt, (at) => recordedBodyForm(run, at)),
    };
  }

  /** A provider failure, as the step records it. */
  function failure(error: unknown, params: LanguageModelV3CallOptions): Error {
    return journalError(error, providerErrorRecord(error, bodies(params)));
  }

  /** The step's error as the SDK gets it: live, the provider's own; replayed, rebuilt from its record. */
  async function sdkError(error: unknown, params: LanguageModelV3CallOptions): Promise<unknown> {
    const original = originalError(error);
    if (original !== error) return original;
    const record = recordIn(error);
    return record === undefined ? error : rebuildProviderError(record, bodies(params));
  }

  /** Live, the body the provider reported; replayed, rebuilt from the record and the call's prompt. */
  async function requestBodyOf(
    live: { body: unknown } | undefined,
    form: BodyForm | undefined,
    seq: number,
    params: LanguageModelV3CallOptions,
  ): Promise<unknown> {
    if (live !== undefined) return live.body;
    return form === undefined ? undefined : decodeBody(run, seq, form, params.prompt, (at) => recordedBodyForm(run, at));
  }

  const inner = model;
  const wrapped = {
    specificationVersion: spec,
    provider: model.provider,
    modelId: model.modelId,
    supportedUrls: model.supportedUrls,
    doGenerate: async (sdkParams: unknown): Promise<unknown> => {
      const params = canonicalCallOptions(sdkParams, spec);
      const release = await inOrder();
      let chain: string[] = [];
      let prompt: PromptRecord | undefined;
      // Per attempt, by its record: an attempt abandoned at its timeout may still answer later.
      const attempts = new WeakMap<GenerateRecord, { body: EncodedBody | undefined; live: { body: unknown } | undefined; summary?: CallSummary }>();
      // The row's summary of a live record, made once for both the row and the run's state.
      const summaryOf = (record: GenerateRecord): CallSummary => {
        const attempt = attempts.get(record);
        if (attempt === undefined) return callSummary(record, false);
        return (attempt.summary ??= callSummary(record, false));
      };
      let live: { body: unknown } | undefined;
      let recordedSeq: number | undefined;
      const previous = state.lastPrompt;
      const view = state.promptMemo.see(params.prompt);
      const call = run.operation<GenerateRecord>({
        kind: "model",
        name,
        fingerprint: view.fingerprint,
        options: stepOptions(params, () => false),
        trace: generateSpan(model, params),
        deferDurability: options.deferModelCallFsync === true,
        execute: async ({ signal, seq }) => {
          recordedSeq = seq;
          chain = await admit();
          prompt ??= promptRecord(params, state.storedMessages, previous, view, run.clock.now());
          const started = run.clock.now();
          let result: LanguageModelV3GenerateResult;
          try {
            result = canonicalGenerateResult(
              await inner.doGenerate({ ...(sdkParams as LanguageModelV3CallOptions), abortSignal: withSignal(params, signal) }),
              spec,
            );
          } catch (error) {
            throw failure(error, params);
          }
          const requestBody = result.request?.body;
          const body = requestBody === undefined ? undefined : encodeBody(run, seq, requestBody, params.prompt, view);
          const record = generateRecord(result, model, run.clock.now(), run.clock.now() - started, body?.form);
          attempts.set(record, { body, live: requestBody === undefined ? undefined : { body: requestBody } });
          return record;
        },
        alsoWrite: (outcome, seq) => (outcome.ok && prompt !== undefined ? rows(seq, prompt, summaryOf(outcome.value), chain) : []),
        onRecorded: (result, seq) => {
          recordedSeq = seq;
          remember(state, seq, summaryOf(result), params, prompt);
          const attempt = attempts.get(result);
          attempt?.body?.remember();
          live = attempt?.live;
          modelCallReturned(run, seq);
        },
      });
      release(); // the call has its seq
      let record: GenerateRecord;
      try {
        record = await call;
      } catch (error) {
        throw await sdkError(error, params);
      }
      const { latencyMs: _latency, requestBody, ...result } = record;
      void _latency;
      const requestBodyValue = await requestBodyOf(live, requestBody, recordedSeq ?? -1, params);
      return sdkGenerateResult(
        { ...result, ...(requestBodyValue === undefined ? {} : { request: { body: requestBodyValue } }) } as LanguageModelV3GenerateResult,
        spec,
      );
    },

    doStream: async (sdkParams: unknown): Promise<unknown> => {
      const params = canonicalCallOptions(sdkParams, spec);
      const release = await inOrder();
      let chain: string[] = [];
      let delivered = false;
      let band = streamBand(run);
      let liveCall = false;
      let sdkConsumer!: ReadableStreamDefaultController<unknown>;
      const stream = new ReadableStream<unknown>({ start: (c) => void (sdkConsumer = c) });
      // Parts reach the SDK in the model's own specification.
      const consumer = {
        enqueue: (part: LanguageModelV3StreamPart) => sdkConsumer.enqueue(sdkStreamPart(part, spec)),
        error: (error: unknown) => sdkConsumer.error(error),
        close: () => sdkConsumer.close(),
      };
      let prompt: PromptRecord | undefined;
      let body: EncodedBody | undefined;
      let live: { body: unknown; headers: Record<string, string> | undefined; thrown?: unknown } | undefined;
      let inBand: BodyCodec | undefined;
      let recordedSeq: number | undefined;
      // The SDK gets the stream once the attempt that will be recorded has delivered its first part.
      let opened!: (head: { request?: { body: unknown }; response?: { headers?: Record<string, string> } }) => void;
      const head = new Promise<{ request?: { body: unknown }; response?: { headers?: Record<string, string> } }>((resolve) => (opened = resolve));
      const previous = state.lastPrompt;
      const view = state.promptMemo.see(params.prompt);
      const recorded = run.operation<StreamRecord>({
        kind: "model",
        name,
        fingerprint: view.fingerprint,
        options: stepOptions(params, () => delivered),
        trace: streamSpan(model, params),
        execute: async ({ signal, seq, attempt }) => {
          liveCall = true;
          recordedSeq = seq;
          chain = await admit();
          prompt ??= promptRecord(params, state.storedMessages, previous, view, run.clock.now());
          const started = run.clock.now();
          let result: Awaited<ReturnType<LanguageModelV3["doStream"]>>;
          try {
            result = await inner.doStream({ ...(sdkParams as LanguageModelV3CallOptions), abortSignal: withSignal(params, signal) });
          } catch (error) {
            throw failure(error, params);
          }
          modelCallReturned(run, seq);
          const requestBody = result.request?.body;
          live = { body: requestBody, headers: result.response?.headers };
          band = streamBand(run);
          appendChunk(run, seq, band, "reset", "");
          let position = band + 1;
          const deliver = (part: LanguageModelV3StreamPart, recordedPart: RecordedPart): void => {
            if (!delivered) {
              delivered = true;
              opened(liveHead(live!));
            }
            consumer.enqueue(part);
            const chunk = chunkOf(recordedPart as { type: string } & Record<string, unknown>);
            if (chunk !== null) appendChunk(run, seq, position++, chunk.kind, chunk.text, chunk.part);
          };
          const parts: RecordedPart[] = [];
          let first = true;
          inBand = bodies(params);
          let thrown: ProviderErrorRecord | undefined;
          try {
            for await (const sdkPart of result.stream) {
              const part = canonicalStreamPart(sdkPart, spec);
              if (part === null) continue;
              if (part.type === "raw" && params.includeRawChunks !== true) continue;
              if (first) {
                first = false;
                // The SDK would stamp a response id and time of its own: give it recorded ones.
                const metadata = metadataPart(model, run.clock.now());
                if (part.type === "stream-start") {
                  parts.push(part, metadata);
                  deliver(part, part);
                  deliver(metadata, metadata);
                  continue;
                }
                parts.push(metadata);
                deliver(metadata, metadata);
              }
              const kept: RecordedPart = part.type === "error" ? { type: "error", error: { $cairnError: providerErrorRecord(part.error, inBand) } } : part;
              parts.push(kept);
              if (part.type === "finish") continue; // held until the checkpoint commits
              deliver(part, kept);
            }
          } catch (error) {
            // Before any part, with attempts left, Cairn's retry layer tries again. Otherwise the
            // break is the caller's, as without Cairn (the SDK does not retry a stream that broke):
            // recorded with the parts delivered, and replayed as a stream that breaks there.
            if (!delivered && attempt <= (options.retries ?? 0) && params.abortSignal?.aborted !== true && retryableProviderError(error)) {
              throw failure(error, params);
            }
            thrown = providerErrorRecord(error, inBand);
            live.thrown = error;
          }
          if (first) {
            // Not a single part: the SDK would still stamp the step's response itself.
            const metadata = metadataPart(model, run.clock.now());
            parts.unshift(metadata);
            if (thrown !== undefined) deliver(metadata, metadata);
            else consumer.enqueue(metadata);
          }
          body = requestBody === undefined ? undefined : encodeBody(run, seq, requestBody, params.prompt, view);
          const headers = redactHeadersOf(result.response?.headers);
          const value: StreamRecord = { parts, latencyMs: run.clock.now() - started };
          if (body !== undefined) value.requestBody = body.form;
          if (headers !== undefined) value.responseHeaders = headers;
          if (thrown !== undefined) value.thrown = thrown;
          return value;
        },
        alsoWrite: (outcome, seq) => {
          if (!outcome.ok || prompt === undefined) return [];
          const summary = streamSummary(outcome.value);
          return [
            ...rows(seq, prompt, summary, chain),
            ...streamChunkOps(run, seq, band, outcome.value.parts as ({ type: string } & Record<string, unknown>)[]),
          ];
        },
        onRecorded: (value, seq) => {
          recordedSeq = seq;
          remember(state, seq, streamSummary(value), params, prompt);
          body?.remember();
          modelCallReturned(run, seq);
        },
      });
      release(); // the call has its seq
      const finished = recorded.then(
        async (value) => {
          const seq = recordedSeq ?? -1;
          if (!liveCall) {
            const requestBody = await requestBodyOf(undefined, value.requestBody, seq, params);
            opened({
              ...(requestBody === undefined ? {} : { request: { body: requestBody } }),
              ...(value.responseHeaders === undefined ? {} : { response: { headers: value.responseHeaders as Record<string, string> } }),
            });
          } else if (!delivered) {
            opened(liveHead(live!));
          }
          for (const part of value.parts) {
            if (liveCall && part.type !== "finish") continue;
            consumer.enqueue(part.type === "error" ? { type: "error", error: await rebuildPart(part.error, params) } : part);
          }
          if (value.thrown !== undefined) {
            consumer.error(liveCall ? live?.thrown : await rebuildProviderError(value.thrown, bodies(params)));
          } else {
            consumer.close();
          }
        },
        async (error: unknown) => {
          const sdk = await sdkError(error, params);
          // Before any part, the SDK learns of the failure as doStream's own rejection, as without Cairn.
          if (!delivered) throw sdk;
          consumer.error(sdk);
        },
      );
      // The reader went away (cancelled the stream) before the record committed: nothing to deliver.
      finished.catch(() => undefined);
      const opening = await Promise.race([head, finished.then(() => head)]);
      return { stream, ...opening };
    },
  };
  return wrapped as unknown as M;

  async function rebuildPart(error: unknown, params: LanguageModelV3CallOptions): Promise<unknown> {
    const record = (error as { $cairnError?: ProviderErrorRecord } | null)?.$cairnError;
    return record === undefined ? error : rebuildProviderError(record, bodies(params));
  }
}

function liveHead(live: { body: unknown; headers: Record<string, string> | undefined }): {
  request?: { body: unknown };
  response?: { headers?: Record<string, string> };
} {
  return {
    ...(live.body === undefined ? {} : { request: { body: live.body } }),
    ...(live.headers === undefined ? {} : { response: { headers: redactHeadersOf(live.headers) as Record<string, string> } }),
  };
}

function redactHeadersOf(headers: Record<string, string | undefined> | undefined): Record<string, string | undefined> | undefined {
  return headers === undefined ? undefined : redactHeaders(headers);
}

function remember(state: AgentRunState, seq: number, summary: CallSummary, params: LanguageModelV3CallOptions, prompt: PromptRecord | undefined): void {
  state.lastPrompt = { seq, messages: params.prompt, hashes: prompt?.messages };
  // Committed now: later calls need not write these payloads again.
  for (const hash of prompt?.added ?? []) state.storedMessages.add(hash);
  for (const id of summary.toolCallIds) state.toolCallModelSeq.set(id, seq);
  state.costUsd += costUsd(state.pricing, summary.inputTokens, summary.outputTokens);
}

function streamSummary(value: StreamRecord): CallSummary {
  const finish = value.parts.find((p) => p.type === "finish");
  const erred = value.thrown !== undefined || value.parts.some((p) => p.type === "error");
  const content: LanguageModelV3Content[] = value.parts.flatMap((p): LanguageModelV3Content[] =>
    p.type === "text-delta" ? [{ type: "text", text: p.delta }] : p.type === "tool-call" ? [p] : [],
  );
  return callSummary(
    {
      content,
      finishReason: finish?.finishReason ?? { unified: erred ? "error" : "other", raw: undefined },
      usage: finish?.usage ?? {
        inputTokens: { total: 0, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 0, text: undefined, reasoning: undefined },
      },
      warnings: [],
      latencyMs: value.latencyMs,
    } as LanguageModelV3GenerateResult & { latencyMs: number },
    true,
  );
}

/** The caller's signal and the step's, combined: either aborts the call. */
function withSignal(params: LanguageModelV3CallOptions, signal: AbortSignal): AbortSignal {
  return params.abortSignal === undefined ? signal : AbortSignal.any([params.abortSignal, signal]);
}

const RETRYABLE_SDK_ERRORS = new Set(["AI_EmptyResponseBodyError", "AI_InvalidResponseDataError", "AI_JSONParseError", "AI_TypeValidationError"]);

/**
 * Provider failures worth another attempt within the call (`retries`): what the provider marks
 * retryable (`APICallError.isRetryable`: 408, 409, 429, 5xx), network errors, timeouts and
 * responses that did not parse outside an APICallError. Never an abort, a spent budget, a call the
 * provider marks not retryable (a 4xx, an invalid JSON body it answered with 200), or an AI SDK
 * error about the request itself (invalid prompt or argument, missing key, unknown model).
 */
function retryableProviderError(error: unknown): boolean {
  if (error instanceof BudgetExceededError) return false;
  const { AISDKError, APICallError } = sdk().provider;
  if (APICallError.isInstance(error)) return error.isRetryable;
  // Other AI SDK errors: a response that did not parse or validate may come right next time; a bad
  // prompt, argument, key or model will not.
  if (AISDKError.isInstance(error)) return RETRYABLE_SDK_ERRORS.has(error.name);
  if (error !== null && typeof error === "object" && (error as { name?: unknown }).name === "AbortError") return false;
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) return status === 408 || status === 409 || status === 429;
  return true;
}
