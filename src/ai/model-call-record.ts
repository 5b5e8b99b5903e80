import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import type { DurableRun } from "../engine/durable-run.js";
import { encodeValue, hashText } from "../store/codec.js";
import type { WriteOp } from "../store/store.js";

/** What the `cairn_model_calls` row says of one response. */
export interface CallSummary {
  inputTokens: number;
  outputTokens: number;
  finishReason: string;
  excerpt: string;
  toolCallIds: string[];
  latencyMs: number;
  streamed: boolean;
}

export interface PromptRecord {
  hash: string;
  messages: string[];
  /** Payload rows for messages not stored yet. */
  payloads: WriteOp[];
}

export function callSummary(result: LanguageModelV3GenerateResult & { latencyMs?: number }, streamed: boolean): CallSummary {
  const text = result.content
    .map((part) => (part.type === "text" ? part.text : part.type === "tool-call" ? ` [${part.toolName}(${part.input})] ` : ""))
    .join("")
    .trim();
  return {
    inputTokens: result.usage.inputTokens.total ?? 0,
    outputTokens: result.usage.outputTokens.total ?? 0,
    finishReason: result.finishReason.unified,
    excerpt: text.length > 200 ? `${text.slice(0, 199)}…` : text,
    toolCallIds: result.content.flatMap((part) => (part.type === "tool-call" ? [part.toolCallId] : [])),
    latencyMs: result.latencyMs ?? 0,
    streamed,
  };
}

export function modelCallRow(
  run: DurableRun,
  seq: number,
  model: LanguageModelV3,
  prompt: PromptRecord,
  summary: CallSummary,
  cost: number,
): WriteOp {
  return {
    type: "insert",
    table: "cairn_model_calls",
    values: {
      run_id: run.runId,
      seq,
      provider: model.provider,
      model_id: model.modelId,
      prompt_hash: prompt.hash,
      prompt_messages: JSON.stringify(prompt.messages),
      finish_reason: summary.finishReason,
      text_excerpt: summary.excerpt,
      tool_call_ids: JSON.stringify(summary.toolCallIds),
      input_tokens: summary.inputTokens,
      output_tokens: summary.outputTokens,
      total_tokens: summary.inputTokens + summary.outputTokens,
      cost_usd: cost,
      latency_ms: summary.latencyMs,
      streamed: summary.streamed ? 1 : 0,
      created_at: run.clock.now(),
    },
    onConflict: { keys: ["run_id", "seq"], action: "ignore" },
  };
}

/**
 * The prompt, content-addressed message by message: each message is a payload stored once, so a
 * conversation of N turns stores O(N) messages, not N copies of a growing history. The prompt's
 * own hash is the hash of its message hashes.
 */
export function promptRecord(params: LanguageModelV3CallOptions, stored: Set<string>, at: number): PromptRecord {
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
