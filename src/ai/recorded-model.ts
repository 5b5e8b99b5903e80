import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import { BudgetExceededError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { StepOptions } from "../engine/context.js";
import type { WriteOp } from "../store/store.js";
import { fingerprintOf } from "../engine/fingerprint.js";
import { agentState, type AgentRunState } from "./agent-state.js";
import { chargeOp, exceeded, scopeChain } from "./budget.js";
import { askForMoreIfSpent } from "./budget-approval.js";
import { callSummary, modelCallRow, promptRecord, type CallSummary, type PromptRecord } from "./model-call-record.js";
import { costUsd } from "./pricing.js";
import { appendChunk, streamBand, streamChunkOps } from "./stream-chunks.js";

export interface RecordedModelOptions {
  /** The budget scope charged (an agent's run id); none: no budget. */
  scopeId?: string | undefined;
  /** Attempts after a failed provider call (HTTP 5xx, timeouts, malformed responses). Default 2. */
  retries?: number;
  /** Per attempt. Default: none. */
  timeoutMs?: number;
  /** "fail" (default): a spent budget fails the run. "ask": wait for an approval to raise it. */
  onBudgetExceeded?: "fail" | "ask";
}

/** What a streamed call records: every part, in order. */
interface RecordedStream {
  parts: LanguageModelV3StreamPart[];
  latencyMs: number;
}

/**
 * A language model whose calls are durable steps of the run (kind "model"). The AI SDK's
 * `generateText` / `streamText` loops can use it unchanged.
 *
 * Failure semantics: the response (content, tool calls, finish reason, usage, provider metadata)
 * is committed — together with a `cairn_model_calls` row and the budget charge — before the SDK
 * sees it. On recovery a recorded call returns its record and the provider is not contacted. A
 * crash while the provider is answering calls it again on recovery (the answer was never seen).
 * Provider errors are retried (`retries`), and a call that still fails is recorded as failed, so
 * replay fails the same way. Model calls take their seq when the SDK calls the model, in program
 * order, so concurrent calls in one run replay deterministically.
 *
 * Streaming: parts reach the SDK as they arrive, and text deltas reach readers in other processes
 * through `cairn.stream(runId)`; the `finish` part is held back until the call's checkpoint
 * commits, and the commit rewrites the stream's rows from the record, so a stream cut by a crash is
 * rebuilt whole. A stream that already delivered parts is not retried within the attempt loop
 * (the reader would see them twice); a crash retries it from the top.
 */
export function recordedModel(run: DurableRun, model: LanguageModelV3, options: RecordedModelOptions = {}): LanguageModelV3 {
  const state = agentState(run);
  const name = `${model.provider}:${model.modelId}`;
  const stepOptions = (streamStarted: () => boolean): StepOptions => ({
    retries: options.retries ?? 2,
    shouldRetry: (error) => !streamStarted() && retryableProviderError(error),
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

  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: "v3",
      wrapGenerate: async ({ params, model: inner }) => {
        const release = await inOrder();
        let chain: string[] = [];
        let prompt: PromptRecord | undefined;
        const previous = state.lastPrompt;
        const call = run.operation<LanguageModelV3GenerateResult & { latencyMs?: number }>({
          kind: "model",
          name,
          fingerprint: promptFingerprint(params),
          options: stepOptions(() => false),
          execute: async ({ signal }) => {
            chain = await admit();
            prompt ??= promptRecord(params, state.storedMessages, previous, run.clock.now());
            const started = run.clock.now();
            const result = await inner.doGenerate({ ...params, abortSignal: withSignal(params, signal) });
            return { ...keepable(result), latencyMs: run.clock.now() - started };
          },
          alsoWrite: (outcome, seq) => (outcome.ok && prompt !== undefined ? rows(seq, prompt, callSummary(outcome.value, false), chain) : []),
          onRecorded: (result, seq) => remember(state, seq, callSummary(result, false), params, prompt),
        });
        release(); // the call has its seq
        return call;
      },

      wrapStream: async ({ params, model: inner }) => {
        const release = await inOrder();
        let chain: string[] = [];
        let delivered = false;
        let band = streamBand(run);
        let live = false;
        let consumer!: ReadableStreamDefaultController<LanguageModelV3StreamPart>;
        const stream = new ReadableStream<LanguageModelV3StreamPart>({ start: (c) => void (consumer = c) });
        let prompt: PromptRecord | undefined;
        const previous = state.lastPrompt;
        const recorded = run.operation<RecordedStream>({
          kind: "model",
          name,
          fingerprint: promptFingerprint(params),
          options: stepOptions(() => delivered),
          execute: async ({ signal, seq }) => {
            live = true;
            chain = await admit();
            prompt ??= promptRecord(params, state.storedMessages, previous, run.clock.now());
            const started = run.clock.now();
            const result = await inner.doStream({ ...params, abortSignal: withSignal(params, signal) });
            const parts: LanguageModelV3StreamPart[] = [];
            band = streamBand(run);
            appendChunk(run, seq, band, "reset", "");
            let position = band + 1;
            for await (const part of result.stream) {
              if (part.type === "error") throw part.error;
              if (part.type === "raw") continue;
              parts.push(part);
              if (part.type === "finish") continue; // held until the checkpoint commits
              delivered = true;
              consumer.enqueue(part);
              if (part.type === "text-delta") appendChunk(run, seq, position++, "text", part.delta);
            }
            return { parts, latencyMs: run.clock.now() - started };
          },
          alsoWrite: (outcome, seq) => {
            if (!outcome.ok || prompt === undefined) return [];
            const summary = streamSummary(outcome.value);
            return [...rows(seq, prompt, summary, chain), ...streamChunkOps(run, seq, band, outcome.value.parts)];
          },
          onRecorded: (value, seq) => remember(state, seq, streamSummary(value), params, prompt),
        });
        release(); // the call has its seq
        recorded
          .then(
            (value) => {
              for (const part of value.parts) if (!live || part.type === "finish") consumer.enqueue(part);
              consumer.close();
            },
            (error: unknown) => consumer.error(error),
          )
          // The reader went away (cancelled the stream) before the record committed: nothing to deliver.
          .catch(() => undefined);
        return { stream };
      },
    },
  });
}

function remember(state: AgentRunState, seq: number, summary: CallSummary, params: LanguageModelV3CallOptions, prompt: PromptRecord | undefined): void {
  state.lastPrompt = { seq, messages: params.prompt, hashes: prompt?.messages };
  for (const id of summary.toolCallIds) state.toolCallModelSeq.set(id, seq);
  state.costUsd += costUsd(state.pricing, summary.inputTokens, summary.outputTokens);
}

function streamSummary(value: RecordedStream): CallSummary {
  const finish = value.parts.find((p) => p.type === "finish");
  const content: LanguageModelV3Content[] = value.parts.flatMap((p): LanguageModelV3Content[] =>
    p.type === "text-delta" ? [{ type: "text", text: p.delta }] : p.type === "tool-call" ? [p] : [],
  );
  return callSummary(
    {
      content,
      finishReason: finish?.finishReason ?? { unified: "other", raw: undefined },
      usage: finish?.usage ?? { inputTokens: { total: 0, noCache: undefined, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 0, text: undefined, reasoning: undefined } },
      warnings: [],
      latencyMs: value.latencyMs,
    } as LanguageModelV3GenerateResult & { latencyMs: number },
    true,
  );
}

function withSignal(params: LanguageModelV3CallOptions, signal: AbortSignal): AbortSignal {
  return params.abortSignal === undefined ? signal : AbortSignal.any([params.abortSignal, signal]);
}

/**
 * Provider failures worth another attempt: server errors, timeouts, rate limits and responses that
 * did not parse. A spent budget or a request the provider rejects (4xx) would fail the same way again.
 */
function retryableProviderError(error: unknown): boolean {
  if (error instanceof BudgetExceededError) return false;
  const status = (error as { statusCode?: unknown }).statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) return status === 408 || status === 409 || status === 429;
  return true;
}

/** What is worth keeping of a response: no raw HTTP bodies or headers (large, and in the record twice). */
function keepable(result: LanguageModelV3GenerateResult): LanguageModelV3GenerateResult {
  const { request: _request, response, ...rest } = result;
  void _request;
  if (response === undefined) return rest;
  const { body: _body, headers: _headers, ...meta } = response;
  void _body;
  void _headers;
  return { ...rest, response: meta };
}

/**
 * What a model call is asked, in 16 hex digits: recorded with the call and compared on replay, so a
 * prompt that changed (or a call that took another branch's record) fails loudly instead of
 * returning another call's answer.
 */
function promptFingerprint(params: LanguageModelV3CallOptions): string {
  return fingerprintOf(params.prompt);
}
