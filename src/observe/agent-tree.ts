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
  const children = new Map<string, TreeRow[]>();
  for (const row of rows) {
    if (row.id === run.id || row.parent_id === null) continue;
    children.set(row.parent_id, [...(children.get(row.parent_id) ?? []), row]);
  }
  const ordered: AgentTreeRun[] = [];
  // Depth first, iteratively; `seen` guards against a parent_id cycle in a hand-edited database.
  const seen = new Set<string>();
  const stack: { row: TreeRow; depth: number }[] = [{ row: root, depth: 0 }];
  while (stack.length > 0) {
    const { row, depth } = stack.pop()!;
    if (seen.has(row.id)) continue;
    seen.add(row.id);
    ordered.push({
      id: row.id,
      workflow: row.workflow,
      status: row.status,
      parentId: row.parent_id,
      parentSeq: row.parent_seq === null ? null : num(row.parent_seq),
      depth,
      modelCalls: num(row.model_calls),
      totalTokens: num(row.total_tokens),
      costUsd: num(row.cost_usd),
    });
    const kids = (children.get(row.id) ?? []).sort(
      (a, b) => num(a.parent_seq) - num(b.parent_seq) || num(a.created_at) - num(b.created_at) || a.id.localeCompare(b.id),
    );
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ row: kids[i]!, depth: depth + 1 });
  }
  return ordered;
}

export function agentTreeJson(tree: readonly AgentTreeRun[]): Record<string, unknown>[] {
  return tree.map((run) => ({ ...run }));
}
