import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import { BudgetExceededError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import { encodeValue, hashText } from "../store/codec.js";
import type { WriteOp } from "../store/store.js";
import { agentState } from "./agent-state.js";
import { chargeOp, exceeded, scopeChain } from "./budget.js";
import { costUsd } from "./pricing.js";

export interface RecordedModelOptions {
  /** The budget scope charged (an agent's run id); none: no budget. */
  scopeId?: string | undefined;
  /** Attempts after a failed provider call (HTTP 5xx, timeouts, malformed responses). Default 2. */
  retries?: number;
  /** Per attempt. Default: none. */
  timeoutMs?: number;
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
 */
export function recordedModel(run: DurableRun, model: LanguageModelV3, options: RecordedModelOptions = {}): LanguageModelV3 {
  const state = agentState(run);
  const name = `${model.provider}:${model.modelId}`;
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: "v3",
      wrapGenerate: async ({ params, model: inner }) => {
        let chain: string[] = [];
        let prompt: { hash: string; messages: string[]; payloads: WriteOp[] } | null = null;
        const stepOptions = {
          retries: options.retries ?? 2,
          shouldRetry: retryableProviderError,
          ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        };
        return run.operation<LanguageModelV3GenerateResult>({
          kind: "model",
          name,
          options: stepOptions,
          execute: async ({ signal }) => {
            if (options.scopeId !== undefined) {
              const scopes = await scopeChain(run, options.scopeId);
              const over = exceeded(scopes, run.clock.now(), run.runId);
              if (over !== null) throw over;
              chain = scopes.map((s) => s.run_id);
            }
            prompt ??= promptRecord(params, state.storedMessages, run.clock.now());
            const started = run.clock.now();
            // The attempt's signal (timeout, cancel) aborts the HTTP request too.
            const abortSignal = params.abortSignal === undefined ? signal : AbortSignal.any([params.abortSignal, signal]);
            const result = await inner.doGenerate({ ...params, abortSignal });
            return { ...keepable(result), latencyMs: run.clock.now() - started } as LanguageModelV3GenerateResult;
          },
          alsoWrite: (outcome, seq) => {
            if (!outcome.ok) return [];
            const result = outcome.value as LanguageModelV3GenerateResult & { latencyMs?: number };
            const inputTokens = result.usage.inputTokens.total ?? 0;
            const outputTokens = result.usage.outputTokens.total ?? 0;
            const cost = costUsd(state.pricing, inputTokens, outputTokens);
            const p = prompt ?? promptRecord(params, state.storedMessages, run.clock.now());
            const rows: WriteOp[] = [
              ...p.payloads,
              {
                type: "insert",
                table: "cairn_model_calls",
                values: {
                  run_id: run.runId,
                  seq,
                  provider: model.provider,
                  model_id: model.modelId,
                  prompt_hash: p.hash,
                  prompt_messages: JSON.stringify(p.messages),
                  finish_reason: result.finishReason.unified,
                  text_excerpt: excerpt(result),
                  tool_call_ids: JSON.stringify(toolCallIds(result)),
                  input_tokens: inputTokens,
                  output_tokens: outputTokens,
                  total_tokens: inputTokens + outputTokens,
                  cost_usd: cost,
                  latency_ms: result.latencyMs ?? 0,
                  streamed: 0,
                  created_at: run.clock.now(),
                },
                onConflict: { keys: ["run_id", "seq"], action: "ignore" },
              },
            ];
            const charge = chargeOp(chain, inputTokens + outputTokens, cost);
            if (charge !== null) rows.push(charge);
            return rows;
          },
          onRecorded: (result, seq) => {
            for (const id of toolCallIds(result)) state.toolCallModelSeq.set(id, seq);
            state.costUsd += costUsd(state.pricing, result.usage.inputTokens.total ?? 0, result.usage.outputTokens.total ?? 0);
          },
        });
      },
    },
  });
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

/**
 * The prompt, content-addressed message by message: each message is a payload stored once, so a
 * conversation of N turns stores O(N) messages, not N copies of a growing history.
 */
function promptRecord(
  params: LanguageModelV3CallOptions,
  stored: Set<string>,
  at: number,
): { hash: string; messages: string[]; payloads: WriteOp[] } {
  const payloads: WriteOp[] = [];
  const messages = params.prompt.map((message) => {
    const text = safeEncode(message);
    const hash = hashText(text);
    if (!stored.has(hash)) {
      stored.add(hash);
      payloads.push({
        type: "insert",
        table: "cairn_payloads",
        values: { hash, body: text, size: text.length, created_at: at },
        onConflict: { keys: ["hash"], action: "ignore" },
      });
    }
    return hash;
  });
  return { hash: hashText(messages.join(",")), messages, payloads };
}

function safeEncode(value: unknown): string {
  try {
    return encodeValue(value, "a prompt message");
  } catch {
    return JSON.stringify(value, (_key, v: unknown) => (v instanceof URL ? v.href : typeof v === "bigint" ? v.toString() : v));
  }
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

function toolCallIds(result: LanguageModelV3GenerateResult): string[] {
  return result.content.flatMap((part) => (part.type === "tool-call" ? [part.toolCallId] : []));
}

function excerpt(result: LanguageModelV3GenerateResult): string {
  const text = result.content
    .map((part) => (part.type === "text" ? part.text : part.type === "tool-call" ? `[${part.toolName}(${part.input})]` : ""))
    .join(" ")
    .trim();
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}
