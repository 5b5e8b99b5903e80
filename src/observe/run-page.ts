import { InvalidSpecError } from "../errors.js";
import type { RunStatus } from "../store/store.js";
import { hasAgentTables, num } from "./agent-tables.js";
import type { ReadStore } from "./read-store.js";
import { hasQueueTables } from "./run-queue.js";

/**
 * One page of the run list (the dashboard's runs page), newest first, read by keyset: a page
 * after the first starts below the last row of the one before, so page 1,000 costs what page 1
 * costs. The order is (created_at, id) descending; the ui layer's indexes (src/ui/schema.ts) serve
 * it with and without a status filter, and `cairn_runs_workflow` with a workflow filter. A queue
 * filter reads the queue's run ids from the ui layer's `cairn_queue_runs_queue` (queue, run_id) and
 * the runs by primary key.
 */
export interface RunPageQuery {
  status?: RunStatus | undefined;
  workflow?: string | undefined;
  /** An agent's name, or "*" for every run of any agent (a workflow that made a model call). */
  agent?: string | undefined;
  /** Runs enqueued on this queue (`cairn_queue_runs`); none on a database without queues. */
  queue?: string | undefined;
  /** Runs whose id starts with this text. */
  idPrefix?: string | undefined;
  /** The cursor of the previous page's last row (`RunPage.next`). */
  after?: string | undefined;
  /** Rows per page, 1..500; default 50. */
  limit?: number | undefined;
}

/** A run as the list shows it: no input, output or journal. */
export interface RunSummary {
  id: string;
  workflow: string;
  status: string;
  parentId: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  recoveries: number;
}

export interface RunPage {
  runs: RunSummary[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}

const STATUSES: readonly string[] = ["enqueued", "running", "waiting", "succeeded", "failed", "cancelled"];
export const MAX_RUN_PAGE = 500;

export async function listRunPage(store: ReadStore, query: RunPageQuery): Promise<RunPage> {
  const limit = query.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RUN_PAGE) {
    throw new InvalidSpecError("limit", limit, `give a whole number from 1 to ${MAX_RUN_PAGE}`);
  }
  if (query.status !== undefined && !STATUSES.includes(query.status)) {
    throw new InvalidSpecError("status", query.status, `use one of ${STATUSES.join(", ")}`);
  }
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (value: unknown): string => (params.push(value), `$${params.length}`);
  if (query.status !== undefined) where.push(`status = ${param(query.status)}`);
  if (query.workflow !== undefined) where.push(`workflow = ${param(query.workflow)}`);
  if (query.agent !== undefined) {
    const agents = query.agent === "*" ? await listAgentNames(store) : [query.agent];
    if (agents.length === 0) return { runs: [], next: null };
    where.push(`workflow IN (${agents.map((a) => param(a)).join(", ")})`);
  }
  if (query.queue !== undefined) {
    if (!(await hasQueueTables(store))) return { runs: [], next: null };
    where.push(`id IN (SELECT q.run_id FROM cairn_queue_runs q WHERE q.queue = ${param(query.queue)})`);
  }
  if (query.idPrefix !== undefined && query.idPrefix !== "") {
    where.push(`id LIKE ${param(`${query.idPrefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)} ESCAPE '\\'`);
  }
  if (query.after !== undefined) {
    const cursor = parseCursor(query.after);
    const at = param(cursor.createdAt);
    where.push(`(created_at < ${at} OR (created_at = ${at} AND id < ${param(cursor.id)}))`);
  }
  const rows = await store.select<Record<string, unknown>>(
    `SELECT id, workflow, status, parent_id, created_at, updated_at, finished_at, recoveries FROM cairn_runs
     ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`}
     ORDER BY created_at DESC, id DESC LIMIT ${param(limit + 1)}`,
    params,
  );
  const runs = rows.slice(0, limit).map((r): RunSummary => ({
    id: String(r.id),
    workflow: String(r.workflow),
    status: String(r.status),
    parentId: r.parent_id === null ? null : String(r.parent_id),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
    finishedAt: r.finished_at === null ? null : num(r.finished_at),
    recoveries: num(r.recoveries),
  }));
  const last = runs[runs.length - 1];
  return { runs, next: rows.length > limit && last !== undefined ? `${last.createdAt}:${last.id}` : null };
}

function parseCursor(text: string): { createdAt: number; id: string } {
  const colon = text.indexOf(":");
  const createdAt = Number(text.slice(0, colon));
  if (colon < 1 || !Number.isSafeInteger(createdAt)) {
    throw new InvalidSpecError("after", text, "pass the `next` value of the previous page as it was returned");
  }
  return { createdAt, id: text.slice(colon + 1) };
}

/**
 * Every workflow name, for the list's filter. A loose index scan: one probe of cairn_runs_workflow
 * per name (the next name after the last), so 100,000 runs of three workflows cost three probes,
 * where DISTINCT would read every row.
 */
export async function listWorkflowNames(store: ReadStore): Promise<string[]> {
  const rows = await store.select<{ name: string | null }>(
    `WITH RECURSIVE names (name) AS (
       SELECT MIN(workflow) FROM cairn_runs
       UNION ALL
       SELECT (SELECT MIN(r.workflow) FROM cairn_runs r WHERE r.workflow > n.name) FROM names n WHERE n.name IS NOT NULL
     )
     SELECT name FROM names WHERE name IS NOT NULL`,
  );
  return rows.map((r) => String(r.name));
}

/** The workflows that made a model call: agents (cairn.agent registers each as a workflow of its name). */
export async function listAgentNames(store: ReadStore): Promise<string[]> {
  if (!(await hasAgentTables(store))) return [];
  // From the model calls (few) to their runs by primary key: never a scan of every run.
  const rows = await store.select<{ workflow: string }>(
    "SELECT DISTINCT workflow FROM cairn_runs WHERE id IN (SELECT run_id FROM cairn_model_calls) ORDER BY workflow",
  );
  return rows.map((r) => r.workflow);
}
