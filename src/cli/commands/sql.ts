import { CairnError, InvalidSpecError, PermissionDeniedError, TimeoutError } from "../../errors.js";
import { DEFAULT_OPERATOR_QUERY_TIMEOUT_MS, operatorQuery } from "../../observe/sql.js";
import { integerOption, positionals } from "../args.js";
import { CliError, oneLine } from "../cli-error.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { print, printJsonArray, printTable, renderCell } from "../output.js";
import { dim } from "../style.js";

export const sql: Command = {
  name: "sql",
  usage: '"<select ...>" [--timeout ms]',
  summary: "run a read-only SQL query on the system database",
  help: [
    "Tables: cairn_runs, cairn_steps, cairn_messages, cairn_events, cairn_executors, cairn_payloads;",
    "the view cairn_journal has each step with its output resolved and its duration_ms.",
    "One statement, which the database refuses unless it only reads: on SQLite the file is opened",
    "read-only in a separate process; on PostgreSQL the query logs in as the role cairn_sql_reader",
    "(created on first use), which may only SELECT Cairn's tables (no COPY, files, signals, locks).",
    `--timeout ms   stop the query after this long (default ${DEFAULT_OPERATOR_QUERY_TIMEOUT_MS})`,
    'Example: cairn sql "SELECT kind, count(*), sum(duration_ms) FROM cairn_journal GROUP BY kind"',
  ],
  options: { timeout: "string" },
  async run({ args, database, json }) {
    const [text] = positionals(args, ["query"], "sql");
    if (text!.trim() === "") throw new CliError("the query is empty", 'give one SELECT statement, e.g. cairn sql "SELECT count(*) FROM cairn_runs"');
    const timeoutMs = integerOption(args, "timeout", 1) ?? DEFAULT_OPERATOR_QUERY_TIMEOUT_MS;
    const result = await withReadStore(database, async (store) => {
      try {
        return await operatorQuery(store, text!, { timeoutMs });
      } catch (error) {
        throw queryFailure(error);
      }
    });
    if (json) return printJsonArray(result.rows);
    if (result.columns.length === 0) return print(dim("(the statement returned no columns)"));
    printTable(
      result.columns,
      result.rows.map((row) => result.columns.map((c) => renderCell(row[c]))),
    );
    print(dim(`(${result.rows.length} row${result.rows.length === 1 ? "" : "s"})`));
  },
};

/** SQLSTATEs (PostgreSQL) and SQLite codes that mean "the database refused this as not a read". */
const REFUSED = new Set(["25006", "42501", "SQLITE_READONLY", "SQLITE_AUTH"]);

function queryFailure(error: unknown): Error {
  if (error instanceof TimeoutError || error instanceof PermissionDeniedError || error instanceof InvalidSpecError) return error;
  if (error instanceof CairnError) return error;
  const message = error instanceof Error ? oneLine(error.message) : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && REFUSED.has(code)) {
    return new CliError(`refused: cairn sql only reads (the database said: ${message})`, "change runs with cairn cancel/resume/fork/send");
  }
  if (code === "42601" && /multiple commands/i.test(message)) {
    return new CliError("refused: cairn sql only reads one statement at a time (several statements given)", "give exactly one SELECT statement");
  }
  if (/more than one statement/i.test(message)) {
    return new CliError("refused: cairn sql only reads one statement at a time (several statements given)", "give exactly one SELECT statement");
  }
  return new CliError(`SQL error: ${message}`, "check the statement (list the tables with `cairn sql --help`)");
}
