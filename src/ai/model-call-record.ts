import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import type { DurableRun } from "../engine/durable-run.js";
import { encodeValue, hashText } from "../store/value/index.js";
import type { WriteOp } from "../store/store.js";
import type { PromptView } from "./prompt-memo.js";

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
  /** Every message's hash, in order. */
  messages: string[];
  /** What the row stores: the full list, or the previous call's seq plus the messages added since. */
  stored: string;
  /** Payload rows for messages not stored yet. */
  payloads: WriteOp[];
  /** Their hashes: add them to the run's stored set once the record commits. */
  added: string[];
}

/** The last prompt a run sent, kept to store the next one as a delta and to skip re-hashing. */
export interface LastPrompt {
  seq: number;
  messages: readonly unknown[];
  hashes: string[] | undefined;
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

export function modelCallRow(run: DurableRun, seq: number, model: LanguageModelV3, prompt: PromptRecord, summary: CallSummary, cost: number): WriteOp {
  return {
    type: "insert",
    table: "cairn_model_calls",
    values: {
      run_id: run.runId,
      seq,
      provider: model.provider,
      model_id: model.modelId,
      prompt_hash: prompt.hash,
      prompt_messages: prompt.stored,
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
 * conversation of N turns stores O(N) messages. When the prompt extends the run's previous one (a
 * conversation growing turn by turn), the row stores `{"after": seq, "add": [...]}` — the previous
 * call's seq and the hashes of the messages added since — so the rows grow O(N) too, not O(N²).
 * Messages the run's prompt memo already knows (prompt-memo.ts: equal to the same message of the
 * prompt before) reuse their hash, so a call encodes and hashes only the messages it adds. The
 * prompt's own hash is the hash of all its message hashes. `expandPromptMessages` reads either
 * form back.
 *
 * `stored` holds the hashes of payloads already committed by this run (see `PromptRecord.added`):
 * a message whose payload a failed call held, uncommitted, is written again by the next call.
 */
export function promptRecord(
  params: LanguageModelV3CallOptions,
  stored: Set<string>,
  previous: LastPrompt | undefined,
  view: PromptView,
  at: number,
): PromptRecord {
  const payloads: WriteOp[] = [];
  const added: string[] = [];
  const messages = params.prompt.map((message, i) => {
    let hash = view.hashes[i];
    let text: string | undefined;
    if (hash === undefined) {
      text = safeEncode(message);
      hash = hashText(text);
      view.hashes[i] = hash;
    }
    if (!stored.has(hash) && !added.includes(hash)) {
      text ??= safeEncode(message);
      added.push(hash);
      payloads.push({
        type: "insert",
        table: "cairn_payloads",
        values: { hash, body: text, size: text.length, created_at: at },
        onConflict: { keys: ["hash"], action: "ignore" },
      });
    }
    return hash;
  });
  let extends_: boolean;
  if (previous === undefined) {
    extends_ = false;
  } else if (previous.messages === view.previous) {
    // The memo compared this prompt with the previous call's: it extends it if it shares all of it.
    extends_ = view.common === previous.messages.length;
  } else {
    const before = (previous.hashes ??= previous.messages.map((m) => hashText(safeEncode(m))));
    extends_ = before.length <= messages.length && before.every((h, i) => messages[i] === h);
  }
  const storedForm =
    previous !== undefined && extends_ ? JSON.stringify({ after: previous.seq, add: messages.slice(previous.messages.length) }) : JSON.stringify(messages);
  return { hash: hashText(messages.join(",")), messages, stored: storedForm, payloads, added };
}

/**
 * Reads a `prompt_messages` value back into the full list of message hashes, following
 * `{"after": seq, "add": [...]}` links to earlier calls of the same run through `lookUp`.
 */
export async function expandPromptMessages(stored: string, lookUp: (seq: number) => Promise<string | undefined>): Promise<string[]> {
  const tail: string[][] = [];
  let current: unknown = JSON.parse(stored);
  for (let hops = 0; hops < 100_000; hops++) {
    if (Array.isArray(current)) return [...(current as string[]), ...tail.reverse().flat()];
    const link = current as { after: number; add: string[] };
    tail.push(link.add);
    const earlier = await lookUp(link.after);
    if (earlier === undefined) return tail.reverse().flat();
    current = JSON.parse(earlier);
  }
  throw new Error("prompt_messages links form a cycle");
}

function safeEncode(value: unknown): string {
  try {
    return encodeValue(value, "a prompt message");
  } catch {
    return JSON.stringify(value, (_key, v: unknown) => (v instanceof URL ? v.href : typeof v === "bigint" ? v.toString() : v));
  }
}
