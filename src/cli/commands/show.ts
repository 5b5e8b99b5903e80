import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { loadRunView, renderRunView, runViewJson } from "../journal-view.js";
import { print, printJson } from "../output.js";

export const show: Command = {
  name: "show",
  usage: "<runId>",
  summary: "a run's header and its journal as a timeline",
  help: [
    "The header: workflow, status, error, parent, children, app version, fork origin.",
    "The timeline: one row per journal entry (seq, name, kind, status, duration, attempts)",
    "with a preview of its output (decoded) or its error.",
    "For a run with children or model calls, the agents: its tree of runs with model calls, tokens and cost.",
  ],
  options: {},
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "show");
    const view = await withReadStore(database, (store) => loadRunView(store, runId!));
    if (json) printJson(runViewJson(view));
    else print(renderRunView(view));
  },
};
