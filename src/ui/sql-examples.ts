/** The SQL console's examples: Cairn's shipped views (README, "The tables"), each a query that reads. */
export const SQL_EXAMPLES: readonly { title: string; sql: string }[] = [
  { title: "Runs by status", sql: "SELECT status, count(*) AS runs FROM cairn_runs GROUP BY status ORDER BY runs DESC" },
  { title: "cairn_journal: slowest steps", sql: "SELECT run_id, seq, name, kind, duration_ms FROM cairn_journal ORDER BY duration_ms DESC LIMIT 20" },
  {
    title: "cairn_costs: spend per run",
    sql: "SELECT run_id, workflow, model_calls, total_tokens, cost_usd FROM cairn_costs WHERE model_calls > 0 ORDER BY cost_usd DESC LIMIT 20",
  },
  {
    title: "cairn_trajectory: what agents did",
    sql: "SELECT run_id, seq, kind, name, detail, tokens FROM cairn_trajectory ORDER BY created_at DESC LIMIT 20",
  },
  {
    title: "cairn_provenance: tool calls and the model responses behind them",
    sql: "SELECT run_id, tool_seq, tool_name, tool_input, model_seq, model_excerpt FROM cairn_provenance LIMIT 20",
  },
  { title: "Who did what (dashboard actions)", sql: "SELECT at, actor, action, run_id, detail FROM cairn_operator_actions ORDER BY at DESC LIMIT 20" },
];
