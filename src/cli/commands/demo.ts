import { positionals, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { judge, printReport } from "../demo/report.js";
import { runDemo } from "../demo/run-demo.js";
import { printJson } from "../output.js";

export const demo: Command = {
  name: "demo",
  usage: "[--database <path|url>]",
  summary: "watch a run survive two SIGKILLs (takes a few seconds)",
  help: [
    "Runs an order workflow (reserve stock, charge a card, sleep, send an email) in a child process,",
    "kills it with SIGKILL inside the charge step and again while the run sleeps, restarts it each",
    "time, then counts every side effect from the ledgers and prints the run's timeline.",
    "The database is a fresh SQLite file in a new temporary directory unless --database names one",
    "(a postgres:// URL works too; the run then gets a unique id). The default $CAIRN_DATABASE is not used.",
  ],
  options: {},
  async run({ args, json }) {
    positionals(args, [], "demo");
    const result = await runDemo({ quiet: json, ...optionalDatabase(stringOption(args, "database")) });
    try {
      const verdict = judge(result);
      if (json) {
        printJson({
          ok: verdict.ok,
          runId: result.runId,
          status: result.run.status,
          database: result.database,
          directory: result.directory,
          elapsedMs: result.elapsedMs,
          kills: result.kills,
          recoveries: result.run.recoveries,
          executions: verdict.executions,
          charges: verdict.charges,
          duplicateCharges: verdict.duplicateCharges,
          problems: verdict.problems,
        });
      } else {
        await printReport(result, verdict);
      }
      if (!verdict.ok) {
        throw new CliError(`the demo's counts are wrong: ${verdict.problems.join("; ")}`, `its files are in ${result.directory}; please report this`);
      }
    } finally {
      await result.store.close();
    }
  },
};

function optionalDatabase(database: string | undefined): { database?: string } {
  return database === undefined ? {} : { database };
}
