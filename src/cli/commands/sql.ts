import { positionals } from "../args.js";
import { CliError, oneLine } from "../cli-error.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { print, printJson, renderCell, table } from "../output.js";
import { dim } from "../style.js";

export const sql: Command = {
  name: "sql",
  usage: '"<select ...>"',
  summary: "run a read-only SQL query on the system database",
  help: [
    "Tables: cairn_runs, cairn_steps, cairn_messages, cairn_events, cairn_executors, cairn_payloads;",
    "the view cairn_journal has each step with its output resolved and its duration_ms.",
    "A statement that writes is refused; the database is opened read-only.",
    "Example: cairn sql \"SELECT kind, count(*), sum(duration_ms) FROM cairn_journal GROUP BY kind\"",
  ],
  options: {},
  async run({ args, database, json }) {
    const [text] = positionals(args, ["query"], "sql");
    const result = await withReadStore(database, async (store) => {
      try {
        return await store.query(text!);
      } catch (error) {
        throw queryFailure(error);
      }
    });
    if (json) return printJson(result.rows);
    if (result.columns.length === 0) return print(dim("(the statement returned no columns)"));
    print(table(result.columns, result.rows.map((row) => result.columns.map((c) => renderCell(row[c])))));
    print(dim(`(${result.rows.length} row${result.rows.length === 1 ? "" : "s"})`));
  },
};

function queryFailure(error: unknown): Error {
  const message = error instanceof Error ? oneLine(error.message) : String(error);
  if (error instanceof TypeError || /readonly|read-only/i.test(message)) {
    return new CliError("refused: cairn sql only reads", "use a SELECT (or WITH ... SELECT); change runs with cairn cancel/resume/fork/send");
  }
  return new CliError(`SQL error: ${message}`, "check the statement (list the tables with `cairn sql --help`)");
}
