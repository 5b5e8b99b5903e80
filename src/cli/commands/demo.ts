import { positionals, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { MODEL_ENV } from "../demo/demo-model.js";
import { judge, printReport } from "../demo/report.js";
import { runDemo } from "../demo/run-demo.js";
import { printJson } from "../output.js";

export const demo: Command = {
  name: "demo",
  usage: "[--database <path|url>]",
  summary: "watch a support agent resolve 3 tickets through two SIGKILLs (takes a few seconds)",
  help: [
    "A support agent resolves 3 refund tickets: it looks each order up, asks to refund it (a tool that",
    "waits for a human's approval, which this process gives) and answers. Its runs execute in a child",
    "worker process, which is killed with SIGKILL right after a model response was recorded, and again",
    "after the payment service made a refund but before the refund tool's checkpoint; a new worker",
    "recovers the runs each time. Then it counts: runs completed, model calls made vs needed,",
    "duplicate refunds (from the payment service's ledger), cost; and prints a ticket's trajectory and",
    "which model response caused its refund, with the SQL that asks.",
    "",
    "The model is the mock LLM on 127.0.0.1, scripted and offline. To use a real model instead, set",
    `  ${MODEL_ENV.baseURL}   an OpenAI-compatible base URL, e.g. https://api.openai.com/v1`,
    `  ${MODEL_ENV.modelId}      the model, e.g. gpt-4o-mini`,
    `  ${MODEL_ENV.apiKey}    its API key (optional)`,
    "(the cost shown uses illustrative prices, not your provider's).",
    "",
    "The database is a fresh SQLite file in a new temporary directory unless --database names one",
    "(a postgres:// URL works too; the runs then get unique ids). The default $CAIRN_DATABASE is not used.",
  ],
  options: {},
  async run({ args, json }) {
    positionals(args, [], "demo");
    const result = await runDemo({ quiet: json, ...optionalDatabase(stringOption(args, "database")) });
    try {
      const verdict = await judge(result);
      if (json) {
        printJson({
          ok: verdict.ok,
          model: { mock: result.model.mock, id: result.model.modelId, baseURL: result.model.baseURL },
          database: result.database,
          directory: result.directory,
          elapsedMs: result.elapsedMs,
          completed: verdict.completed,
          total: verdict.tickets.length,
          tickets: verdict.tickets,
          kills: result.kills,
          modelCalls: verdict.modelCalls,
          refundToolRuns: verdict.refundToolRuns,
          refunds: verdict.refunds,
          duplicateRefunds: verdict.duplicateRefunds,
          cost: verdict.cost,
          problems: verdict.problems,
        });
      } else {
        await printReport(result, verdict);
      }
      if (!verdict.ok) {
        throw new CliError(`the demo's counts are wrong: ${verdict.problems.join("; ")}`, `its files are in ${result.directory}; please report this`);
      }
    } finally {
      await result.cairn.shutdown();
    }
  },
};

function optionalDatabase(database: string | undefined): { database?: string } {
  return database === undefined ? {} : { database };
}
