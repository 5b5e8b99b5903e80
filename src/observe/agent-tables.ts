import type { ReadStore } from "./read-store.js";

/**
 * The agent tables (cairn_model_calls, cairn_tool_calls, cairn_approvals, the cairn_costs view)
 * arrived with schema version 2. The read model never migrates, so a database last opened by an
 * older Cairn has none of them: the agent parts of a run view and a provenance chain are then left
 * out, not an error.
 */
export async function hasAgentTables(store: ReadStore): Promise<boolean> {
  const [row] = await store.select<{ v: unknown }>("SELECT MAX(version) AS v FROM cairn_migrations");
  return Number(row?.v ?? 0) >= 2;
}

/** A BIGINT or a count as a number: PostgreSQL returns them as strings. */
export function num(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}
