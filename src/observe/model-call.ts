import { expandPromptMessages } from "../ai/model-call-record.js";
import { RunNotFoundError } from "../errors.js";
import { hasAgentTables, num } from "./agent-tables.js";
import { decodeOrText } from "./journal.js";
import { jsonSafe } from "./json-values.js";
import { NoSuchStepError } from "./provenance.js";
import type { ReadStore } from "./read-store.js";

/** One model call in full (the dashboard's model call page): what it was asked, what it answered, what it cost. */
export interface ModelCallView {
  runId: string;
  seq: number;
  provider: string;
  modelId: string;
  promptHash: string;
  /** Every message of the prompt, oldest first, decoded. */
  messages: { role: string; hash: string; message: unknown }[];
  /**
   * How many leading messages the previous model call of this run also sent: messages from this
   * index on are the prompt's delta. 0 for the run's first call.
   */
  sharedWithPrevious: number;
  previousSeq: number | null;
  nextSeq: number | null;
  /** The response as the journal recorded it (the step's output), decoded. */
  response: unknown;
  finishReason: string | null;
  toolCalls: { seq: number; toolCallId: string; toolName: string; input: unknown; status: string; permission: string; decidedBy: string | null }[];
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  costUsd: number;
  latencyMs: number;
  streamed: boolean;
  createdAt: number;
}

interface CallRow {
  seq: unknown;
  provider: string;
  model_id: string;
  prompt_hash: string;
  prompt_messages: string;
  finish_reason: string | null;
  input_tokens: unknown;
  output_tokens: unknown;
  total_tokens: unknown;
  cost_usd: unknown;
  latency_ms: unknown;
  streamed: unknown;
  created_at: unknown;
}

export async function loadModelCall(store: ReadStore, runId: string, seq: number): Promise<ModelCallView> {
  if ((await store.getRun(runId)) === undefined) throw new RunNotFoundError(runId);
  const call = (await hasAgentTables(store)) ? await selectCall(store, runId, seq) : undefined;
  if (call === undefined) throw new NoSuchStepError(runId, seq, null);
  const [neighbours, output, tools] = await Promise.all([
    store.select<{ prev: unknown; next: unknown }>(
      `SELECT (SELECT MAX(seq) FROM cairn_model_calls WHERE run_id = $1 AND seq < $2) AS prev,
              (SELECT MIN(seq) FROM cairn_model_calls WHERE run_id = $1 AND seq > $2) AS next`,
      [runId, seq],
    ),
    store.select<{ output: string | null }>("SELECT output FROM cairn_journal WHERE run_id = $1 AND seq = $2", [runId, seq]),
    store.select<Record<string, unknown>>(
      `SELECT t.seq, t.tool_call_id, t.tool_name, t.input, t.status, t.permission, COALESCE(t.decided_by, a.decided_by) AS decided_by
       FROM cairn_tool_calls t LEFT JOIN cairn_approvals a ON a.run_id = t.run_id AND a.tool_call_id = t.tool_call_id
       WHERE t.run_id = $1 AND t.model_seq = $2 ORDER BY t.seq`,
      [runId, seq],
    ),
  ]);
  const previousSeq = neighbours[0]?.prev === null || neighbours[0]?.prev === undefined ? null : num(neighbours[0].prev);
  const nextSeq = neighbours[0]?.next === null || neighbours[0]?.next === undefined ? null : num(neighbours[0].next);
  const hashes = await promptHashes(store, runId, call.prompt_messages);
  const previous = previousSeq === null ? undefined : await selectCall(store, runId, previousSeq);
  const before = previous === undefined ? [] : await promptHashes(store, runId, previous.prompt_messages);
  let shared = 0;
  while (shared < before.length && shared < hashes.length && before[shared] === hashes[shared]) shared++;
  const bodies = await payloads(store, hashes);
  return {
    runId,
    seq,
    provider: call.provider,
    modelId: call.model_id,
    promptHash: call.prompt_hash,
    messages: hashes.map((hash) => {
      const body = bodies.get(hash);
      const message = body === undefined ? "(payload missing)" : jsonSafe(decodeOrText(body));
      const role = (message as { role?: unknown } | null)?.role;
      return { role: typeof role === "string" ? role : "?", hash, message };
    }),
    sharedWithPrevious: shared,
    previousSeq,
    nextSeq,
    response: jsonSafe(decodeOrText(output[0]?.output ?? null)),
    finishReason: call.finish_reason,
    toolCalls: tools.map((t) => ({
      seq: num(t.seq),
      toolCallId: String(t.tool_call_id),
      toolName: String(t.tool_name),
      input: parseJson(t.input as string | null),
      status: String(t.status),
      permission: String(t.permission),
      decidedBy: t.decided_by === null ? null : String(t.decided_by),
    })),
    usage: { inputTokens: num(call.input_tokens), outputTokens: num(call.output_tokens), totalTokens: num(call.total_tokens) },
    costUsd: num(call.cost_usd),
    latencyMs: num(call.latency_ms),
    streamed: num(call.streamed) !== 0,
    createdAt: num(call.created_at),
  };
}

async function selectCall(store: ReadStore, runId: string, seq: number): Promise<CallRow | undefined> {
  const [row] = await store.select<CallRow>(
    `SELECT seq, provider, model_id, prompt_hash, prompt_messages, finish_reason, input_tokens, output_tokens, total_tokens,
            cost_usd, latency_ms, streamed, created_at FROM cairn_model_calls WHERE run_id = $1 AND seq = $2`,
    [runId, seq],
  );
  return row;
}

function promptHashes(store: ReadStore, runId: string, stored: string): Promise<string[]> {
  return expandPromptMessages(stored, async (seq) => (await selectCall(store, runId, seq))?.prompt_messages);
}

async function payloads(store: ReadStore, hashes: readonly string[]): Promise<Map<string, string>> {
  const unique = [...new Set(hashes)];
  const bodies = new Map<string, string>();
  if (unique.length === 0) return bodies;
  const rows = await store.select<{ hash: string; body: string }>(
    `SELECT hash, body FROM cairn_payloads WHERE hash IN (${unique.map((_, i) => `$${i + 1}`).join(", ")})`,
    unique,
  );
  for (const row of rows) bodies.set(row.hash, row.body);
  return bodies;
}

function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
