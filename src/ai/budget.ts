import { BudgetExceededError, InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { WriteOp } from "../store/store.js";

/**
 * Limits on what an agent run (and every sub-agent it delegates to) may spend. Each is optional.
 *
 * Failure semantics: a budget is checked before each model call and charged with the call's actual
 * usage in the same transaction as the call's checkpoint, so a crash can neither lose a charge nor
 * charge twice. Sub-agents charge their own scope and every ancestor's; concurrent calls that
 * passed the check together can overspend by at most the calls in flight. No model call starts once
 * a budget is spent.
 */
export interface Budget {
  tokens?: number;
  usd?: number;
  modelCalls?: number;
  wallTimeMs?: number;
}

type BudgetKind = keyof Budget;

interface ScopeRow {
  run_id: string;
  parent_run_id: string | null;
  tokens_limit: number | null;
  usd_limit: number | null;
  model_calls_limit: number | null;
  wall_time_ms_limit: number | null;
  tokens_spent: number;
  usd_spent: number;
  model_calls_spent: number;
  started_at: number;
}

export function validateBudget(budget: Budget | undefined, field = "budget"): void {
  if (budget === undefined) return;
  for (const [kind, value] of Object.entries(budget)) {
    if (!["tokens", "usd", "modelCalls", "wallTimeMs"].includes(kind)) {
      throw new InvalidSpecError(`${field}.${kind}`, value, "budgets are tokens, usd, modelCalls and wallTimeMs");
    }
    if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value < 0)) {
      throw new InvalidSpecError(`${field}.${kind}`, value, "must be a finite number ≥ 0");
    }
  }
}

/** The tighter of two budgets, kind by kind (a carve-out never loosens the agent's own limits). */
export function tighter(a: Budget | undefined, b: Budget | undefined): Budget | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const out: Budget = {};
  for (const kind of ["tokens", "usd", "modelCalls", "wallTimeMs"] as const) {
    const values = [a[kind], b[kind]].filter((v): v is number => v !== undefined);
    if (values.length > 0) out[kind] = Math.min(...values);
  }
  return out;
}

/** The row that opens a run's budget scope, linked to its parent's scope. */
export function openScopeOp(runId: string, parentScope: string | null, budget: Budget, at: number): WriteOp {
  return {
    type: "insert",
    table: "cairn_budgets",
    values: {
      run_id: runId,
      parent_run_id: parentScope,
      tokens_limit: budget.tokens ?? null,
      usd_limit: budget.usd ?? null,
      model_calls_limit: budget.modelCalls ?? null,
      wall_time_ms_limit: budget.wallTimeMs ?? null,
      started_at: at,
    },
    onConflict: { keys: ["run_id"], action: "ignore" },
  };
}

/** The run's scope and its ancestors', nearest first (empty when the run has no budget). */
export async function scopeChain(run: DurableRun, scopeId: string): Promise<ScopeRow[]> {
  const rows = await run.store.select<ScopeRow>(
    `WITH RECURSIVE chain AS (
       SELECT * FROM cairn_budgets WHERE run_id = $1
       UNION ALL SELECT b.* FROM cairn_budgets b JOIN chain c ON b.run_id = c.parent_run_id)
     SELECT * FROM chain`,
    [scopeId],
  );
  return rows.map((r) => ({
    ...r,
    tokens_limit: nullableNumber(r.tokens_limit),
    usd_limit: nullableNumber(r.usd_limit),
    model_calls_limit: nullableNumber(r.model_calls_limit),
    wall_time_ms_limit: nullableNumber(r.wall_time_ms_limit),
    tokens_spent: Number(r.tokens_spent),
    usd_spent: Number(r.usd_spent),
    model_calls_spent: Number(r.model_calls_spent),
    started_at: Number(r.started_at),
  }));
}

/** The first spent budget in the chain, as an error naming which budget and by how much. */
export function exceeded(chain: ScopeRow[], now: number, runId: string): BudgetExceededError | null {
  for (const scope of chain) {
    const checks: [BudgetKind, number | null, number][] = [
      ["tokens", scope.tokens_limit, scope.tokens_spent],
      ["usd", scope.usd_limit, scope.usd_spent],
      ["modelCalls", scope.model_calls_limit, scope.model_calls_spent],
      ["wallTimeMs", scope.wall_time_ms_limit, now - scope.started_at],
    ];
    for (const [kind, limit, spent] of checks) {
      if (limit !== null && spent >= limit) {
        const whose = scope.run_id === runId ? "its" : `its ancestor ${scope.run_id}'s`;
        const error = new BudgetExceededError(
          `run ${runId} exhausted ${whose} ${kind} budget: spent ${round(spent)} of ${round(limit)} ` +
            `(over by ${round(spent - limit)}). Raise the budget, or use onBudgetExceeded: "ask" to approve more.`,
          { runId },
        );
        Object.assign(error, { budget: kind, limit, spent, scopeRunId: scope.run_id });
        return error;
      }
    }
  }
  return null;
}

/** Charges a model call's usage to every scope in the chain, in the call's own transaction. */
export function chargeOp(scopeIds: string[], tokens: number, usd: number): WriteOp | null {
  if (scopeIds.length === 0) return null;
  return {
    type: "update",
    table: "cairn_budgets",
    where: { run_id: scopeIds },
    increment: { tokens_spent: tokens, usd_spent: usd, model_calls_spent: 1 },
  };
}

/** Raises the limits of one scope by `extra` (an approved "ask" for more budget). */
export function extendOp(scope: ScopeRow, extra: Budget): WriteOp {
  const set: Record<string, number | null> = {};
  if (extra.tokens !== undefined) set.tokens_limit = (scope.tokens_limit ?? 0) + extra.tokens;
  if (extra.usd !== undefined) set.usd_limit = (scope.usd_limit ?? 0) + extra.usd;
  if (extra.modelCalls !== undefined) set.model_calls_limit = (scope.model_calls_limit ?? 0) + extra.modelCalls;
  if (extra.wallTimeMs !== undefined) set.wall_time_ms_limit = (scope.wall_time_ms_limit ?? 0) + extra.wallTimeMs;
  return { type: "update", table: "cairn_budgets", where: { run_id: scope.run_id }, set };
}

export type { ScopeRow };

function nullableNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
