import type { RunRow } from "../store/store.js";
import { hasAgentTables, num } from "./agent-tables.js";
import type { ReadStore } from "./read-store.js";

/** One run of an agent tree: the run `cairn show` shows, or one of its descendants. */
export interface AgentTreeRun {
  id: string;
  workflow: string;
  status: string;
  parentId: string | null;
  parentSeq: number | null;
  depth: number;
  modelCalls: number;
  totalTokens: number;
  costUsd: number;
}

interface TreeRow {
  id: string;
  workflow: string;
  status: string;
  parent_id: string | null;
  parent_seq: unknown;
  created_at: unknown;
  model_calls: unknown;
  total_tokens: unknown;
  cost_usd: unknown;
}

/**
 * The run and its descendants (children, their children, ...) with their model calls, tokens and
 * cost from `cairn_costs`, in tree order: each run followed by its children in the order it
 * started them. Undefined when the run has no children and made no model call: a plain workflow
 * gets no agents section.
 */
export async function loadAgentTree(store: ReadStore, run: RunRow): Promise<AgentTreeRun[] | undefined> {
  if (!(await hasAgentTables(store))) return undefined;
  const rows = await store.select<TreeRow>(
    `WITH RECURSIVE tree (id) AS (
       SELECT id FROM cairn_runs WHERE id = $1
       UNION ALL
       SELECT r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id
     )
     SELECT r.id, r.workflow, r.status, r.parent_id, r.parent_seq, r.created_at, c.model_calls, c.total_tokens, c.cost_usd
     FROM tree t
     JOIN cairn_runs r ON r.id = t.id
     JOIN cairn_costs c ON c.run_id = r.id AND c.root_id = $2`,
    [run.id, run.rootId],
  );
  const root = rows.find((r) => r.id === run.id);
  if (root === undefined || (rows.length === 1 && num(root.model_calls) === 0)) return undefined;
  return walkTree(rows, root).map(({ row, depth }) => ({
    id: row.id,
    workflow: row.workflow,
    status: row.status,
    parentId: row.parent_id,
    parentSeq: row.parent_seq === null ? null : num(row.parent_seq),
    depth,
    modelCalls: num(row.model_calls),
    totalTokens: num(row.total_tokens),
    costUsd: num(row.cost_usd),
  }));
}

export function agentTreeJson(tree: readonly AgentTreeRun[]): Record<string, unknown>[] {
  return tree.map((run) => ({ ...run }));
}

/**
 * One run of a supervision and delegation tree (`cairn tree`): the runs under a root, each with its
 * state, and for a supervised run its child spec id, the restarts of that spec before it, the last
 * exit reason its supervisor saw (its own, or that of the run it replaced) and the run that replaced
 * it; model calls and cost where the agents' tables exist.
 */
export interface RunTreeNode {
  id: string;
  workflow: string;
  state: string;
  parentId: string | null;
  depth: number;
  supervisorId: string | null;
  childId: string | null;
  restartCount: number;
  lastExitReason: string | null;
  replacedBy: string | null;
  modelCalls: number;
  costUsd: number;
}

interface RunTreeRow {
  id: string;
  workflow: string;
  state: string;
  parent_id: string | null;
  parent_seq: unknown;
  created_at: unknown;
  supervisor_id: string | null;
  child_id: string | null;
  restart_count: unknown;
  last_exit_reason: string | null;
  replaced_by: string | null;
  model_calls: unknown;
  cost_usd: unknown;
}

/** Whether the supervision layer's tables (and its `cairn_tree` view) exist in this database. */
export async function hasSupervisionTables(store: ReadStore): Promise<boolean> {
  try {
    const rows = await store.select("SELECT 1 AS ok FROM cairn_layer_migrations WHERE layer = 'supervision'");
    return rows.length > 0;
  } catch {
    return false;
  }
}

/** The run and every descendant, depth first in start order, as `cairn tree` and the `cairn_tree` view show them. */
export async function loadRunTree(store: ReadStore, run: RunRow): Promise<RunTreeNode[]> {
  const supervised = await hasSupervisionTables(store);
  const agents = await hasAgentTables(store);
  const rows = await store.select<RunTreeRow>(
    `WITH RECURSIVE tree (id) AS (
       SELECT id FROM cairn_runs WHERE id = $1
       UNION ALL
       SELECT r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id
     )
     SELECT r.id, r.workflow, r.status AS state, r.parent_id, r.parent_seq, r.created_at,
       ${supervised ? "v.supervisor_id, v.child_id, v.restart_count, v.last_exit_reason, v.replaced_by" : "NULL AS supervisor_id, NULL AS child_id, 0 AS restart_count, NULL AS last_exit_reason, NULL AS replaced_by"},
       ${agents ? "c.model_calls, c.cost_usd" : "0 AS model_calls, 0 AS cost_usd"}
     FROM tree t
     JOIN cairn_runs r ON r.id = t.id
     ${supervised ? "LEFT JOIN cairn_tree v ON v.run_id = r.id" : ""}
     ${agents ? "LEFT JOIN cairn_costs c ON c.run_id = r.id AND c.root_id = $2" : ""}`,
    [run.id, run.rootId],
  );
  const root = rows.find((r) => r.id === run.id);
  if (root === undefined) return [];
  return walkTree(rows, root).map(({ row, depth }) => ({
    id: row.id,
    workflow: row.workflow,
    state: row.state,
    parentId: row.parent_id,
    depth,
    supervisorId: row.supervisor_id,
    childId: row.child_id,
    restartCount: num(row.restart_count),
    lastExitReason: row.last_exit_reason,
    replacedBy: row.replaced_by,
    modelCalls: num(row.model_calls),
    costUsd: num(row.cost_usd),
  }));
}

interface TreeLinks {
  id: string;
  parent_id: string | null;
  parent_seq: unknown;
  created_at: unknown;
}

/**
 * The runs below `root`, depth first, each child after its parent in the order the parent started
 * them (parent_seq, then created_at, then id). Iterative, and `seen` guards against a parent_id
 * cycle in a hand-edited database.
 */
function walkTree<Row extends TreeLinks>(rows: readonly Row[], root: Row): { row: Row; depth: number }[] {
  const children = new Map<string, Row[]>();
  for (const row of rows) {
    if (row.id === root.id || row.parent_id === null) continue;
    children.set(row.parent_id, [...(children.get(row.parent_id) ?? []), row]);
  }
  const ordered: { row: Row; depth: number }[] = [];
  const seen = new Set<string>();
  const stack: { row: Row; depth: number }[] = [{ row: root, depth: 0 }];
  while (stack.length > 0) {
    const next = stack.pop()!;
    if (seen.has(next.row.id)) continue;
    seen.add(next.row.id);
    ordered.push(next);
    const kids = (children.get(next.row.id) ?? []).sort(
      (a, b) => num(a.parent_seq) - num(b.parent_seq) || num(a.created_at) - num(b.created_at) || a.id.localeCompare(b.id),
    );
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ row: kids[i]!, depth: next.depth + 1 });
  }
  return ordered;
}
