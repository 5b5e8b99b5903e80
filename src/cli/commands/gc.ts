import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson } from "../output.js";

export const gc: Command = {
  name: "gc",
  usage: "",
  summary: "delete every stored payload that no row names any more",
  help: [
    "Payloads (large values, stored once by hash) are shared: by a run and its forks, by the turns of",
    "a conversation, by runs that stored the same value. `cairn delete` collects the payloads of the",
    "runs it deletes; gc sweeps the whole table (after a crash between a deletion and its collection).",
    "Safe while executors run: a payload being written again is kept or written anew.",
  ],
  options: {},
  async run({ args, database, json }) {
    positionals(args, [], "gc");
    const payloads = await withClient(database, (cairn) => cairn.runs.gc());
    if (json) return printJson({ payloads });
    print(`deleted ${payloads} unreferenced payload${payloads === 1 ? "" : "s"}`);
  },
};
