import { expandPromptMessages } from "../ai/model-call-record.js";
import { CairnError, RunNotFoundError } from "../errors.js";
import type { RunRow } from "../store/store.js";
import { hasAgentTables, num } from "./agent-tables.js";
import { decodeOrText } from "./journal.js";
import { renderValue } from "./json-values.js";
import type { ReadStore } from "./read-store.js";

/**
 * The provenance of one step, as `cairn why` prints it: a chain of links, each the cause of the
 * one before. A tool call ← the model response that requested it ← the prompt that model call saw
 * ← the run ← the run that started it ← ... up to the root. A model call starts at its response;
 * any other step starts at the step itself.
 */
export type ProvenanceLink = ToolLink | ModelLink | PromptLink | StepLink | RunLink;

export interface ToolLink {
  kind: "tool";
  seq: number;
  toolCallId: string;
  toolName: string;
  /** The input as recorded (JSON text, cut at 4,000 characters). */
  input: string | null;
  outputExcerpt: string | null;
  status: string;
  permission: string;
  decidedBy: string | null;
  decidedAt: number | null;
  /** Why a human denied it, when one did. */
  reason: string | null;
}

export interface ModelLink {
  kind: "model";
  seq: number;
  provider: string;
  modelId: string;
  excerpt: string | null;
  finishReason: string | null;
  toolCallIds: string[];
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  costUsd: number;
  latencyMs: number;
}

export interface PromptLink {
  kind: "prompt";
  hash: string;
  /** Every message of the prompt, oldest first (text output shows the last few). */
  messages: { role: string; excerpt: string; hash: string }[];
}

export interface StepLink {
  kind: "step";
  seq: number;
  name: string;
  stepKind: string;
  status: string;
  /** The step's output (decoded), or its error record. */
  output: unknown;
  error: string | null;
}

export interface RunLink {
  kind: "run";
  runId: string;
  workflow: string;
  status: string;
  input: unknown;
  /** The step of the parent run that started this one; null for a root run. */
  startedBy: { runId: string; seq: number | null; name: string | null; stepKind: string | null } | null;
}

/** The run has no step (and no tool call) at that seq. */
export class NoSuchStepError extends CairnError {
  declare readonly runId: string;
  declare readonly seq: number;

  constructor(
    runId: string,
    seq: number,
    /** The run's last seq; null when it has no steps yet. */
    readonly lastSeq: number | null,
  ) {
    super(`run ${runId} has no step at seq ${seq}`, { runId, seq });
  }
}

/** Ancestors followed before stopping: a guard against a parent_id cycle in a hand-edited database. */
const MAX_DEPTH = 100;

interface ToolRow {
  seq: unknown;
  tool_call_id: string;
  tool_name: string;
  model_seq: unknown;
  input: string | null;
  output_excerpt: string | null;
  status: string;
  permission: string;
  decided_by: string | null;
  decided_at: unknown;
  reason: string | null;
}

interface ModelRow {
  seq: unknown;
  provider: string;
  model_id: string;
  prompt_hash: string;
  prompt_messages: string;
  finish_reason: string | null;
  text_excerpt: string | null;
  tool_call_ids: string | null;
  input_tokens: unknown;
  output_tokens: unknown;
  total_tokens: unknown;
  cost_usd: unknown;
  latency_ms: unknown;
}

interface StepRowLite {
  seq: unknown;
  name: string;
  kind: string;
  status: string;
  output: string | null;
  error: string | null;
}

/** Reads the chain for step `seq` of `runId` with plain SELECTs over Cairn's tables. */
export async function loadProvenance(store: ReadStore, runId: string, seq: number): Promise<ProvenanceLink[]> {
  const run = await store.getRun(runId);
  if (run === undefined) throw new RunNotFoundError(runId);
  const agentTables = await hasAgentTables(store);
  const [step] = await store.select<StepRowLite>("SELECT seq, name, kind, status, output, error FROM cairn_journal WHERE run_id = $1 AND seq = $2", [
    runId,
    seq,
  ]);
  const tool = agentTables ? await selectTool(store, runId, seq) : undefined;
  const model = agentTables ? await selectModel(store, runId, tool === undefined ? seq : tool.model_seq) : undefined;
  if (step === undefined && tool === undefined) throw await noSuchStep(store, runId, seq);

  const chain: ProvenanceLink[] = [];
  if (tool !== undefined) chain.push(toolLink(tool));
  if (model !== undefined) chain.push(modelLink(model), await promptLink(store, runId, model));
  if (tool === undefined && model === undefined) chain.push(stepLink(step!));
  chain.push(...(await runChain(store, run)));
  return chain;
}

async function selectTool(store: ReadStore, runId: string, seq: number): Promise<ToolRow | undefined> {
  const [row] = await store.select<ToolRow>(
    `SELECT t.seq, t.tool_call_id, t.tool_name, t.model_seq, t.input, t.output_excerpt, t.status, t.permission,
            COALESCE(t.decided_by, a.decided_by) AS decided_by, a.decided_at, a.reason
     FROM cairn_tool_calls t
     LEFT JOIN cairn_approvals a ON a.run_id = t.run_id AND a.tool_call_id = t.tool_call_id
     WHERE t.run_id = $1 AND t.seq = $2`,
    [runId, seq],
  );
  return row;
}

async function selectModel(store: ReadStore, runId: string, seq: unknown): Promise<ModelRow | undefined> {
  if (seq === null || seq === undefined) return undefined;
  const [row] = await store.select<ModelRow>(
    `SELECT seq, provider, model_id, prompt_hash, prompt_messages, finish_reason, text_excerpt, tool_call_ids,
            input_tokens, output_tokens, total_tokens, cost_usd, latency_ms
     FROM cairn_model_calls WHERE run_id = $1 AND seq = $2`,
    [runId, num(seq)],
  );
  return row;
}

async function noSuchStep(store: ReadStore, runId: string, seq: number): Promise<NoSuchStepError> {
  const [row] = await store.select<{ n: unknown; last: unknown }>("SELECT count(*) AS n, MAX(seq) AS last FROM cairn_steps WHERE run_id = $1", [runId]);
  const steps = num(row?.n);
  return new NoSuchStepError(runId, seq, steps === 0 ? null : num(row?.last));
}

function toolLink(row: ToolRow): ToolLink {
  return {
    kind: "tool",
    seq: num(row.seq),
    toolCallId: row.tool_call_id,
    toolName: row.tool_name,
    input: row.input,
    outputExcerpt: row.output_excerpt,
    status: row.status,
    permission: row.permission,
    decidedBy: row.decided_by,
    decidedAt: row.decided_at === null || row.decided_at === undefined ? null : num(row.decided_at),
    reason: row.reason,
  };
}

function modelLink(row: ModelRow): ModelLink {
  return {
    kind: "model",
    seq: num(row.seq),
    provider: row.provider,
    modelId: row.model_id,
    excerpt: row.text_excerpt,
    finishReason: row.finish_reason,
    toolCallIds: parseStrings(row.tool_call_ids),
    inputTokens: num(row.input_tokens),
    outputTokens: num(row.output_tokens),
    totalTokens: num(row.total_tokens),
    costUsd: num(row.cost_usd),
    latencyMs: num(row.latency_ms),
  };
}

/** The prompt's messages, read back from their content-addressed payloads. */
async function promptLink(store: ReadStore, runId: string, model: ModelRow): Promise<PromptLink> {
  const hashes = await expandPromptMessages(model.prompt_messages, async (seq) => {
    const [row] = await store.select<{ prompt_messages: string }>("SELECT prompt_messages FROM cairn_model_calls WHERE run_id = $1 AND seq = $2", [
      runId,
      seq,
    ]);
    return row?.prompt_messages;
  });
  const unique = [...new Set(hashes)];
  const bodies = new Map<string, string>();
  if (unique.length > 0) {
    const placeholders = unique.map((_, i) => `$${i + 1}`).join(", ");
    const rows = await store.select<{ hash: string; body: string }>(`SELECT hash, body FROM cairn_payloads WHERE hash IN (${placeholders})`, unique);
    for (const row of rows) bodies.set(row.hash, row.body);
  }
  return {
    kind: "prompt",
    hash: model.prompt_hash,
    messages: hashes.map((hash) => {
      const body = bodies.get(hash);
      if (body === undefined) return { role: "?", excerpt: "(payload missing)", hash };
      const message = decodeOrText(body);
      return { role: roleOf(message), excerpt: messageExcerpt(message), hash };
    }),
  };
}

function stepLink(row: StepRowLite): StepLink {
  return {
    kind: "step",
    seq: num(row.seq),
    name: row.name,
    stepKind: row.kind,
    status: row.status,
    output: row.output === null ? null : decodeOrText(row.output),
    error: row.error,
  };
}

/** The run, then its parent, grandparent, ... up to the root, each with the step that started the one before. */
async function runChain(store: ReadStore, start: RunRow): Promise<RunLink[]> {
  const links: RunLink[] = [];
  const seen = new Set<string>();
  let run: RunRow | undefined = start;
  while (run !== undefined && !seen.has(run.id) && links.length < MAX_DEPTH) {
    seen.add(run.id);
    let startedBy: RunLink["startedBy"] = null;
    if (run.parentId !== null) {
      const [step] =
        run.parentSeq === null
          ? []
          : await store.select<{ name: string; kind: string }>("SELECT name, kind FROM cairn_steps WHERE run_id = $1 AND seq = $2", [
              run.parentId,
              run.parentSeq,
            ]);
      startedBy = { runId: run.parentId, seq: run.parentSeq, name: step?.name ?? null, stepKind: step?.kind ?? null };
    }
    links.push({ kind: "run", runId: run.id, workflow: run.workflow, status: run.status, input: decodeOrText(run.input), startedBy });
    run = run.parentId === null ? undefined : await store.getRun(run.parentId);
  }
  return links;
}

function parseStrings(text: string | null): string[] {
  if (text === null) return [];
  try {
    const value = JSON.parse(text) as unknown;
    return Array.isArray(value) ? value.map(String) : [];
  } catch {
    return [];
  }
}

function roleOf(message: unknown): string {
  const role = (message as { role?: unknown } | null)?.role;
  return typeof role === "string" ? role : "?";
}

/**
 * A prompt message (AI SDK `LanguageModelV3Message`) on one line: its text, tool calls as
 * `name(input)`, tool results as `name → output`, anything else by its type.
 */
function messageExcerpt(message: unknown): string {
  const content = (message as { content?: unknown } | null)?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return renderValue(message, 200);
  return content.map((part) => partExcerpt(part as Record<string, unknown>)).join(" ");
}

function partExcerpt(part: Record<string, unknown>): string {
  switch (part.type) {
    case "text":
    case "reasoning":
      return part.type === "text" ? String(part.text) : `[reasoning: ${String(part.text)}]`;
    case "tool-call":
      return `${String(part.toolName)}(${typeof part.input === "string" ? part.input : renderValue(part.input, 200)})`;
    case "tool-result": {
      const output = part.output as { type?: unknown; value?: unknown } | undefined;
      const value = output?.type === "text" || output?.type === "error-text" ? String(output.value) : renderValue(output?.value ?? output, 200);
      return `${String(part.toolName)} → ${value}`;
    }
    case "file":
      return `[file ${String(part.mediaType ?? "")}]`.replace(" ]", "]");
    default:
      return `[${String(part.type)}]`;
  }
}

export function provenanceJson(runId: string, seq: number, chain: readonly ProvenanceLink[]): Record<string, unknown> {
  return { runId, seq, chain };
}
