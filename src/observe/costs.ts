import { hasAgentTables, num } from "./agent-tables.js";
import type { ReadStore } from "./read-store.js";

/** Spend in one bucket (an agent, a model, a UTC day). */
export interface CostBucket {
  key: string;
  modelCalls: number;
  totalTokens: number;
  costUsd: number;
}

/** What the model calls cost, by agent (the run's workflow), by model and by UTC day (the dashboard's costs page). */
export interface CostReport {
  byAgent: CostBucket[];
  byModel: CostBucket[];
  byDay: CostBucket[];
}

const DAY_MS = 86_400_000;

/** Sums over cairn_model_calls; `sinceMs` keeps calls made at or after it. Empty on a database without agent tables. */
export async function loadCostReport(store: ReadStore, sinceMs = 0): Promise<CostReport> {
  if (!(await hasAgentTables(store))) return { byAgent: [], byModel: [], byDay: [] };
  const sums = "count(*) AS calls, COALESCE(sum(m.total_tokens), 0) AS tokens, COALESCE(sum(m.cost_usd), 0) AS cost";
  const [byAgent, byModel, byDay] = await Promise.all([
    store.select<Row>(
      // CROSS JOIN: SQLite then reads the model calls and probes their runs by key, never every run
      // (on PostgreSQL it is a plain inner join).
      `SELECT r.workflow AS k, ${sums} FROM cairn_model_calls m CROSS JOIN cairn_runs r
       WHERE r.id = m.run_id AND m.created_at >= $1 GROUP BY r.workflow ORDER BY cost DESC, k`,
      [sinceMs],
    ),
    store.select<Row>(`SELECT m.model_id AS k, ${sums} FROM cairn_model_calls m WHERE m.created_at >= $1 GROUP BY m.model_id ORDER BY cost DESC, k`, [
      sinceMs,
    ]),
    // Integer division on both backends (BIGINT / integer): the UTC day number.
    store.select<Row>(
      `SELECT m.created_at / ${DAY_MS} AS k, ${sums} FROM cairn_model_calls m WHERE m.created_at >= $1 GROUP BY m.created_at / ${DAY_MS} ORDER BY k`,
      [sinceMs],
    ),
  ]);
  return {
    byAgent: byAgent.map((r) => bucket(String(r.k), r)),
    byModel: byModel.map((r) => bucket(String(r.k), r)),
    byDay: byDay.map((r) => bucket(new Date(Math.floor(num(r.k)) * DAY_MS).toISOString().slice(0, 10), r)),
  };
}

interface Row {
  k: unknown;
  calls: unknown;
  tokens: unknown;
  cost: unknown;
}

function bucket(key: string, row: Row): CostBucket {
  return { key, modelCalls: num(row.calls), totalTokens: num(row.tokens), costUsd: num(row.cost) };
}
