import { integerOption, positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { DEFAULT_JOURNAL_LIMIT, loadRunView, runViewJson } from "../../observe/journal.js";
import { printRunView } from "../journal-view.js";
import { printJson } from "../output.js";

export const show: Command = {
  name: "show",
  usage: "<runId> [--from seq] [--limit n]",
  summary: "a run's header and its journal as a timeline",
  help: [
    "The header: workflow, status, error, parent, children, app version, fork origin.",
    "The timeline: one row per journal entry (seq, name, kind, status, duration, attempts)",
    "with a preview of its output (decoded) or its error.",
    "For a run with children or model calls, the agents: its tree of runs with model calls, tokens and cost.",
    "--from seq    start the timeline at this seq (default 0)",
    `--limit n     at most n journal entries (default ${DEFAULT_JOURNAL_LIMIT}); the last line says where the next page starts`,
  ],
  options: { from: "string", limit: "string" },
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "show");
    const from = integerOption(args, "from", 0);
    const limit = integerOption(args, "limit", 1);
    const paging = { ...(from === undefined ? {} : { from }), ...(limit === undefined ? {} : { limit }) };
    const view = await withReadStore(database, (store) => loadRunView(store, runId!, paging));
    if (json) printJson(runViewJson(view));
    else printRunView(view);
  },
};
