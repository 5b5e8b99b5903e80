import { hasAgentTables, num } from "./agent-tables.js";
import { decodeOrText } from "./journal.js";
import { jsonSafe } from "./json-values.js";
import type { ReadStore } from "./read-store.js";

/**
 * What the dashboard's run page shows beside the journal (`loadRunView`): the events the run set,
 * the messages sent to it, its agent calls, and errors with their stacks. Reads only.
 */
export interface RunDetails {
  events: { key: string; value: unknown; updatedAt: number }[];
  messages: { id: string; topic: string; body: unknown; sender: string | null; createdAt: number; consumedAt: number | null }[];
  /** Model calls by seq: the timeline links each to its page. */
  modelCalls: { seq: number; modelId: string; totalTokens: number; costUsd: number; latencyMs: number }[];
  /** Tool calls by seq, with the input the step was given. */
  toolCalls: { seq: number; toolCallId: string; toolName: string; input: unknown; status: string; modelSeq: number | null }[];
  /** Pending approval requests of this run. */
  approvals: { toolCallId: string; toolName: string; status: string; decidedBy: string | null; reason: string | null }[];
}

/** Rows of one run's messages and events read at most (a run page reads in well under a second). */
const MAX_ROWS = 500;

export async function loadRunDetails(store: ReadStore, runId: string): Promise<RunDetails> {
  const agents = await hasAgentTables(store);
  const [events, messages, models, tools, approvals] = await Promise.all([
    store.select<Record<string, unknown>>(
      `SELECT e.key, COALESCE(e.value, p.body) AS value, e.updated_at FROM cairn_events e LEFT JOIN cairn_payloads p ON p.hash = e.value_hash
       WHERE e.run_id = $1 ORDER BY e.key LIMIT ${MAX_ROWS}`,
      [runId],
    ),
    store.select<Record<string, unknown>>(
      `SELECT m.id, m.topic, COALESCE(m.body, p.body) AS body, m.sender, m.created_at, m.consumed_at FROM cairn_messages m
       LEFT JOIN cairn_payloads p ON p.hash = m.body_hash WHERE m.run_id = $1 ORDER BY m.position LIMIT ${MAX_ROWS}`,
      [runId],
    ),
    agents
      ? store.select<Record<string, unknown>>(
          "SELECT seq, model_id, total_tokens, cost_usd, latency_ms FROM cairn_model_calls WHERE run_id = $1 ORDER BY seq",
          [runId],
        )
      : [],
    agents
      ? store.select<Record<string, unknown>>(
          "SELECT seq, tool_call_id, tool_name, input, status, model_seq FROM cairn_tool_calls WHERE run_id = $1 ORDER BY seq",
          [runId],
        )
      : [],
    agents
      ? store.select<Record<string, unknown>>(
          "SELECT tool_call_id, tool_name, status, decided_by, reason FROM cairn_approvals WHERE run_id = $1 ORDER BY request_seq",
          [runId],
        )
      : [],
  ]);
  return {
    events: events.map((e) => ({ key: String(e.key), value: readable(e.value), updatedAt: num(e.updated_at) })),
    messages: messages.map((m) => ({
      id: String(m.id),
      topic: String(m.topic),
      body: readable(m.body),
      sender: m.sender === null ? null : String(m.sender),
      createdAt: num(m.created_at),
      consumedAt: m.consumed_at === null ? null : num(m.consumed_at),
    })),
    modelCalls: models.map((m) => ({
      seq: num(m.seq),
      modelId: String(m.model_id),
      totalTokens: num(m.total_tokens),
      costUsd: num(m.cost_usd),
      latencyMs: num(m.latency_ms),
    })),
    toolCalls: tools.map((t) => ({
      seq: num(t.seq),
      toolCallId: String(t.tool_call_id),
      toolName: String(t.tool_name),
      input: parse(t.input),
      status: String(t.status),
      modelSeq: t.model_seq === null ? null : num(t.model_seq),
    })),
    approvals: approvals.map((a) => ({
      toolCallId: String(a.tool_call_id),
      toolName: String(a.tool_name),
      status: String(a.status),
      decidedBy: a.decided_by === null ? null : String(a.decided_by),
      reason: a.reason === null ? null : String(a.reason),
    })),
  };
}

/** A stored error record in full, its stack included (the CLI's `errorRecord` keeps one line). */
export function errorDetail(text: string): { name: string; message: string; code?: string; stack?: string; cause?: unknown } {
  try {
    const record = JSON.parse(text) as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown; cause?: unknown };
    return {
      name: String(record.name ?? "Error"),
      message: String(record.message ?? ""),
      ...(typeof record.code === "string" ? { code: record.code } : {}),
      ...(typeof record.stack === "string" ? { stack: record.stack } : {}),
      ...(record.cause === undefined ? {} : { cause: record.cause }),
    };
  } catch {
    return { name: "Error", message: text };
  }
}

/** Pending approval requests across runs, oldest first (the dashboard's inbox); `cairn approvals` reads the same rows. */
export async function listPendingApprovals(
  store: ReadStore,
): Promise<{ runId: string; toolCallId: string; kind: string; toolName: string; input: unknown; requestedAt: number; workflow: string }[]> {
  if (!(await hasAgentTables(store))) return [];
  const rows = await store.select<Record<string, unknown>>(
    `SELECT a.run_id, a.tool_call_id, a.kind, a.tool_name, a.input, a.requested_at, r.workflow FROM cairn_approvals a
     JOIN cairn_runs r ON r.id = a.run_id WHERE a.status = 'pending' ORDER BY a.requested_at, a.run_id, a.request_seq LIMIT 1000`,
  );
  return rows.map((r) => ({
    runId: String(r.run_id),
    toolCallId: String(r.tool_call_id),
    kind: String(r.kind),
    toolName: String(r.tool_name),
    input: readable(r.input),
    requestedAt: num(r.requested_at),
    workflow: String(r.workflow),
  }));
}

function readable(text: unknown): unknown {
  return text === null || text === undefined ? null : jsonSafe(decodeOrText(String(text)));
}

function parse(text: unknown): unknown {
  if (text === null || text === undefined) return null;
  try {
    return JSON.parse(String(text)) as unknown;
  } catch {
    return text;
  }
}

/**
 * What people did to this run from the dashboard (cairn_operator_actions, the ui layer's table),
 * newest first; empty when the dashboard never opened this database.
 */
export async function listOperatorActions(store: ReadStore, runId: string): Promise<{ action: string; actor: string; detail: unknown; at: number }[]> {
  const [layer] = await store
    .select<{ v: unknown }>("SELECT MAX(version) AS v FROM cairn_layer_migrations WHERE layer = 'ui'")
    .catch(() => [] as { v: unknown }[]);
  if (layer === undefined || layer.v === null) return [];
  const rows = await store.select<Record<string, unknown>>(
    `SELECT action, actor, detail, at FROM cairn_operator_actions WHERE run_id = $1 ORDER BY at DESC LIMIT ${MAX_ROWS}`,
    [runId],
  );
  return rows.map((r) => ({ action: String(r.action), actor: String(r.actor), detail: parse(r.detail), at: num(r.at) }));
}
