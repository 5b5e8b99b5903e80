import { InvalidSpecError } from "../errors.js";
import type { LayerRegistry } from "./extension.js";
import { TERMINAL_STATUSES, type RunStatus } from "./store.js";

/**
 * Deleting finished runs and collecting the payloads nobody names any more, written once for both
 * backends (`$n` placeholders) over {@link RetentionSql}; each store supplies the transactions and
 * the locking, and the registered layers their tables ({@link LayerDeletion}, from each layer's
 * `onDelete` hook in the extension contract).
 *
 * What a deleted run takes with it: its row, its journal (`cairn_steps`), its inbox
 * (`cairn_messages` addressed to it — messages it *sent* belong to their receivers), its events,
 * and its rows in the tables the layers name as keyed by run — and all of that for every
 * descendant (children, grandchildren). A layer's table it does not name there (state that
 * outlives a run, which later runs read) is left alone, though the payloads it names are kept.
 *
 * What is never deleted: a run that is not finished (`succeeded`, `failed` or `cancelled`), a run
 * with an unfinished descendant, a child whose ancestor is unfinished (the parent may still need the
 * child's row). A fork shares payloads with its origin by hash, and its journal rows are its own
 * copies, so deleting either leaves the other whole: a payload is deleted only when no row of any
 * table names it.
 */
export interface RunDeleteFilter {
  /** Exactly these runs (each with its descendants). Without `ids`, only top-level runs match. */
  ids?: string[];
  /** Finished statuses to match; default all three. */
  status?: FinishedStatus | FinishedStatus[];
  workflow?: string;
  /** Only runs that finished before this time (ms since the epoch). */
  finishedBefore?: number;
  /** At most this many matching runs (each with its descendants) per call. Default 100. */
  limit?: number;
}

export type FinishedStatus = "succeeded" | "failed" | "cancelled";

export interface DeletedRuns {
  /** Every run deleted, descendants included. */
  runIds: string[];
  /** Runs that matched but were kept: an unfinished descendant or ancestor. */
  skipped: string[];
  /** `cairn_payloads` rows deleted because nothing named them any more. */
  payloads: number;
}

/** How retention talks to one transaction of either backend. */
export interface RetentionSql {
  all<Row = Record<string, unknown>>(text: string, params: unknown[]): Promise<Row[]>;
  run(text: string, params: unknown[]): Promise<number>;
}

export const DEFAULT_DELETE_LIMIT = 100;
const MAX_DELETE_LIMIT = 10_000;
/** Hashes checked per statement. */
const HASH_BATCH = 500;

/** The engine's tables keyed by run id that a deleted run's rows are removed from (cairn_runs last). */
const RUN_TABLES = ["cairn_steps", "cairn_messages", "cairn_events"] as const;

/** The layers' part of retention: every registered layer's `onDelete` hook, merged. */
export type LayerDeletion = ReturnType<LayerRegistry["deletion"]>;

export function validateDeleteFilter(filter: RunDeleteFilter): Required<Pick<RunDeleteFilter, "limit">> & { statuses: FinishedStatus[] } {
  if (filter === null || typeof filter !== "object") throw new InvalidSpecError("filter", filter, "runs.delete needs a filter object");
  const statuses = filter.status === undefined ? [...TERMINAL_STATUSES] : Array.isArray(filter.status) ? filter.status : [filter.status];
  for (const status of statuses) {
    if (!(TERMINAL_STATUSES as readonly string[]).includes(status)) {
      throw new InvalidSpecError("status", status, "only finished runs can be deleted: succeeded, failed or cancelled");
    }
  }
  const limit = filter.limit ?? DEFAULT_DELETE_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DELETE_LIMIT) {
    throw new InvalidSpecError("limit", limit, `must be an integer from 1 to ${MAX_DELETE_LIMIT}`);
  }
  if (filter.finishedBefore !== undefined && !Number.isFinite(filter.finishedBefore)) {
    throw new InvalidSpecError("finishedBefore", filter.finishedBefore, "must be a time in ms since the epoch");
  }
  if (filter.ids !== undefined && (!Array.isArray(filter.ids) || filter.ids.length > MAX_DELETE_LIMIT)) {
    throw new InvalidSpecError("ids", filter.ids, `must be an array of at most ${MAX_DELETE_LIMIT} run ids`);
  }
  return { limit, statuses: statuses as FinishedStatus[] };
}

/** The finished runs the filter matches, oldest first (ids only). `lockSuffix` is PostgreSQL's `FOR UPDATE SKIP LOCKED`. */
export async function matchingRuns(sql: RetentionSql, filter: RunDeleteFilter, lockSuffix = ""): Promise<string[]> {
  const { limit, statuses } = validateDeleteFilter(filter);
  const params: unknown[] = [];
  const p = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const where = [`status IN (${statuses.map(p).join(", ")})`];
  if (filter.ids !== undefined) {
    if (filter.ids.length === 0) return [];
    where.push(`id IN (${filter.ids.map(p).join(", ")})`);
  } else {
    where.push("parent_id IS NULL");
    // Not a tree whose child is still at work (deeper descendants are checked in deletableTrees):
    // such runs would otherwise fill every batch and stall retention.
    where.push(`NOT EXISTS (SELECT 1 FROM cairn_runs d WHERE d.parent_id = cairn_runs.id
      AND d.status NOT IN ('succeeded', 'failed', 'cancelled'))`);
  }
  if (filter.workflow !== undefined) where.push(`workflow = ${p(filter.workflow)}`);
  if (filter.finishedBefore !== undefined) where.push(`finished_at < ${p(filter.finishedBefore)}`);
  const rows = await sql.all<{ id: string }>(
    `SELECT id FROM cairn_runs WHERE ${where.join(" AND ")} ORDER BY finished_at, id LIMIT ${p(limit)} ${lockSuffix}`,
    params,
  );
  return rows.map((r) => r.id);
}

/**
 * Each matched run with its descendants, or skipped when any run of that tree — or any ancestor —
 * is unfinished. `lockRows` (PostgreSQL) locks the rows it will delete, in id order.
 */
export async function deletableTrees(
  sql: RetentionSql,
  roots: string[],
  lockRows: (ids: string[]) => Promise<Map<string, RunStatus>>,
): Promise<{ runIds: string[]; skipped: string[] }> {
  if (roots.length === 0) return { runIds: [], skipped: [] };
  const list = roots.map((_, i) => `$${i + 1}`).join(", ");
  const tree = await sql.all<{ root: string; id: string }>(
    `WITH RECURSIVE tree(root, id) AS (SELECT id, id FROM cairn_runs WHERE id IN (${list})
       UNION SELECT t.root, r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id)
     SELECT root, id FROM tree`,
    roots,
  );
  const ancestors = await sql.all<{ root: string; status: RunStatus }>(
    `WITH RECURSIVE up(root, id) AS (SELECT id, parent_id FROM cairn_runs WHERE id IN (${list}) AND parent_id IS NOT NULL
       UNION SELECT u.root, r.parent_id FROM cairn_runs r JOIN up u ON r.id = u.id WHERE r.parent_id IS NOT NULL)
     SELECT up.root, r.status FROM up JOIN cairn_runs r ON r.id = up.id`,
    roots,
  );
  const members = new Map<string, string[]>(roots.map((root) => [root, []]));
  for (const { root, id } of tree) members.get(root)?.push(id);
  const statuses = await lockRows([...new Set(tree.map((t) => t.id))]);
  const finished = (status: RunStatus | undefined) => status !== undefined && TERMINAL_STATUSES.includes(status);
  const busyAncestor = new Set(ancestors.filter((a) => !finished(a.status)).map((a) => a.root));
  const runIds: string[] = [];
  const taken = new Set<string>();
  const skipped: string[] = [];
  for (const root of roots) {
    const ids = (members.get(root) ?? []).filter((id) => !taken.has(id));
    // A root that vanished (deleted meanwhile) has no members and no status: neither deleted nor skipped.
    if (ids.length === 0) continue;
    if (busyAncestor.has(root) || ids.some((id) => !finished(statuses.get(id)))) {
      skipped.push(root);
      continue;
    }
    runIds.push(...ids);
    for (const id of ids) taken.add(id);
  }
  return { runIds, skipped };
}

/**
 * Deletes the runs' rows from every table keyed by run id and returns the payload hashes those rows
 * named: the candidates for collection once the deletion has committed.
 */
export async function deleteRunRows(sql: RetentionSql, runIds: string[], layers: LayerDeletion): Promise<string[]> {
  const hashes = new Set<string>();
  for (const ids of chunks(runIds, HASH_BATCH)) {
    const list = ids.map((_, i) => `$${i + 1}`).join(", ");
    const named = await sql.all<{ h: string | null }>(
      `SELECT input_hash AS h FROM cairn_runs WHERE id IN (${list}) AND input_hash IS NOT NULL
       UNION SELECT output_hash FROM cairn_runs WHERE id IN (${list}) AND output_hash IS NOT NULL
       UNION SELECT output_hash FROM cairn_steps WHERE run_id IN (${list}) AND output_hash IS NOT NULL
       UNION SELECT body_hash FROM cairn_messages WHERE run_id IN (${list}) AND body_hash IS NOT NULL
       UNION SELECT value_hash FROM cairn_events WHERE run_id IN (${list}) AND value_hash IS NOT NULL${layers.payloadColumns
         .filter((c) => layers.runTables.includes(c.table))
         .map((c) => `\n       UNION SELECT ${c.column} FROM ${c.table} WHERE run_id IN (${list}) AND ${c.column} IS NOT NULL`)
         .join("")}${layers.payloadHashes.map((q) => `\n       UNION SELECT h FROM (${q}) named WHERE named.run_id IN (${list})`).join("")}`,
      ids,
    );
    for (const { h } of named) if (h !== null) hashes.add(h);
    for (const table of [...RUN_TABLES, ...layers.runTables]) await sql.run(`DELETE FROM ${table} WHERE run_id IN (${list})`, ids);
    await sql.run(`DELETE FROM cairn_runs WHERE id IN (${list})`, ids);
  }
  return [...hashes];
}

/**
 * Deletes those of `hashes` that no row names any more. The caller holds off concurrent payload
 * writers (see the stores), so a hash cannot gain a reference between the check and the delete.
 */
export async function collectHashes(sql: RetentionSql, hashes: string[], layers: LayerDeletion): Promise<number> {
  let deleted = 0;
  for (const batch of chunks(hashes, HASH_BATCH)) {
    const list = batch.map((_, i) => `$${i + 1}`).join(", ");
    deleted += await sql.run(
      `DELETE FROM cairn_payloads WHERE hash IN (${list})
         AND NOT EXISTS (SELECT 1 FROM cairn_runs r WHERE r.input_hash = cairn_payloads.hash)
         AND NOT EXISTS (SELECT 1 FROM cairn_runs r WHERE r.output_hash = cairn_payloads.hash)
         AND NOT EXISTS (SELECT 1 FROM cairn_steps s WHERE s.output_hash = cairn_payloads.hash)
         AND NOT EXISTS (SELECT 1 FROM cairn_messages m WHERE m.body_hash = cairn_payloads.hash)
         AND NOT EXISTS (SELECT 1 FROM cairn_events e WHERE e.value_hash = cairn_payloads.hash)${layers.payloadColumns
           .map((c) => `\n         AND NOT EXISTS (SELECT 1 FROM ${c.table} x WHERE x.${c.column} = cairn_payloads.hash)`)
           .join("")}${layers.payloadHashes
           .map((q) => `\n         AND hash NOT IN (SELECT h FROM (${q}) named WHERE h IS NOT NULL AND h IN (${list}))`)
           .join("")}`,
      batch,
    );
  }
  return deleted;
}

/** Every payload hash, in pages (for the full sweep of `cairn gc`). */
export async function payloadPage(sql: RetentionSql, after: string, size: number): Promise<string[]> {
  const rows = await sql.all<{ hash: string }>("SELECT hash FROM cairn_payloads WHERE hash > $1 ORDER BY hash LIMIT $2", [after, size]);
  return rows.map((r) => r.hash);
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
