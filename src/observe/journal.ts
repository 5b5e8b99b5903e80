import { RunNotFoundError } from "../errors.js";
import { decodeValue, type ErrorRecord } from "../store/value/index.js";
import { toStepRow } from "../store/rows.js";
import type { RunRow, StepRow } from "../store/store.js";
import { agentTreeJson, loadAgentTree, type AgentTreeRun } from "./agent-tree.js";
import type { ReadStore } from "./read-store.js";
import { runJson } from "./runs.js";

/** Everything `cairn show` shows about a run (the header, one page of the journal, the agent tree), read in one go. */
export interface RunView {
  run: RunRow;
  children: RunRow[];
  /** One page of the journal: entries with seq ≥ page.from, at most page.limit of them. */
  journal: StepRow[];
  page: JournalPage;
  /** The run's tree of descendants with model calls, tokens and cost; only for a run with children or model calls. */
  agents?: AgentTreeRun[] | undefined;
}

export interface JournalPage {
  from: number;
  limit: number;
  /** Journal entries of the whole run. */
  total: number;
}

/** Entries shown when `--limit` is not given: a page reads and prints in well under a second. */
export const DEFAULT_JOURNAL_LIMIT = 1000;

export async function loadRunView(store: ReadStore, runId: string, paging: { from?: number; limit?: number } = {}): Promise<RunView> {
  const run = await store.getRun(runId);
  if (run === undefined) throw new RunNotFoundError(runId);
  const from = paging.from ?? 0;
  const limit = paging.limit ?? DEFAULT_JOURNAL_LIMIT;
  const [children, journal, counted, agents] = await Promise.all([
    store.listRuns({ parentId: runId, limit: 1000 }),
    store.select<Record<string, unknown>>(
      `SELECT s.*, COALESCE(s.output, p.body) AS output_text FROM cairn_steps s
       LEFT JOIN cairn_payloads p ON p.hash = s.output_hash WHERE s.run_id = $1 AND s.seq >= $2 ORDER BY s.seq LIMIT $3`,
      [runId, from, limit],
    ),
    store.select<{ n: number | string }>("SELECT count(*) AS n FROM cairn_steps WHERE run_id = $1", [runId]),
    loadAgentTree(store, run),
  ]);
  children.sort((a, b) => (a.parentSeq ?? 0) - (b.parentSeq ?? 0));
  return { run, children, journal: journal.map(toStepRow), page: { from, limit, total: Number(counted[0]?.n ?? 0) }, agents };
}

/** A run view as JSON (`cairn show --json`, the dashboard): values decoded, errors as `{ name, message, code }`. */
export function runViewJson({ run, children, journal, page, agents }: RunView): Record<string, unknown> {
  return {
    ...runJson(run),
    input: decodeOrText(run.input),
    output: run.status === "succeeded" ? decodeOrText(run.output) : null,
    error: run.error === null ? null : errorRecord(run.error),
    parentSeq: run.parentSeq,
    children: children.map((c) => ({ id: c.id, workflow: c.workflow, status: c.status, parentSeq: c.parentSeq })),
    journalPage: page,
    journal: journal.map((step) => ({
      seq: step.seq,
      name: step.name,
      kind: step.kind,
      status: step.status,
      startedAt: new Date(step.startedAt).toISOString(),
      durationMs: step.finishedAt === null ? null : step.finishedAt - step.startedAt,
      attempts: step.attempts,
      output: step.status === "succeeded" ? decodeOrText(step.output) : null,
      error: step.error === null ? null : errorRecord(step.error),
    })),
    ...(agents === undefined ? {} : { agents: agentTreeJson(agents) }),
  };
}

/** The stored error, or as much of it as parses. */
export function errorRecord(text: string): { name: string; message: string; code?: string } {
  try {
    const record = JSON.parse(text) as ErrorRecord;
    return { name: record.name, message: record.message, ...(record.code === undefined ? {} : { code: record.code }) };
  } catch {
    return { name: "Error", message: text };
  }
}

/** A stored value decoded with the journal's codec; the raw text if it does not decode. */
export function decodeOrText(text: string | null): unknown {
  if (text === null) return null;
  const decoded = decodeStored(text);
  return decoded.ok ? decoded.value : text;
}

/** A stored value decoded with the journal's codec, or `{ ok: false }` when the text does not decode. */
export function decodeStored(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: decodeValue(text) };
  } catch {
    return { ok: false };
  }
}
