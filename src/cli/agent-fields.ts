import type { Store } from "../store/store.js";

/**
 * The agent tables (cairn_model_calls, cairn_tool_calls, cairn_approvals, the cairn_costs view)
 * arrived with schema version 2. The CLI never migrates, so a database last opened by an older
 * Cairn has none of them: the agent parts of `show` and `why` are then left out, not an error.
 */
export async function hasAgentTables(store: Store): Promise<boolean> {
  const [row] = await store.select<{ v: unknown }>("SELECT MAX(version) AS v FROM cairn_migrations");
  return Number(row?.v ?? 0) >= 2;
}

/** A BIGINT or a count as a number: PostgreSQL returns them as strings. */
export function num(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

/** US dollars to two significant digits, never in exponent form: `$0.0000072`, `$0.50`, `$12.30`. */
export function formatUsd(usd: number): string {
  if (!Number.isFinite(usd) || usd <= 0) return "$0";
  const decimals = Math.min(10, Math.max(2, 1 - Math.floor(Math.log10(usd))));
  return `$${usd.toFixed(decimals)}`;
}

/** `27 tokens (20 in, 7 out)`. */
export function formatUsage(inputTokens: number, outputTokens: number, totalTokens: number): string {
  return `${totalTokens} tokens (${inputTokens} in, ${outputTokens} out)`;
}
