import { integerOption, positionals, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson } from "../output.js";
import { storeOf } from "../../internal.js";
import { findRun } from "../../observe/runs.js";

export const fork: Command = {
  name: "fork",
  usage: "<runId> --from <seq> [--id newId]",
  summary: "start a new run that reuses a run's journal below a seq",
  help: [
    "--from <seq>   the journal entries below seq are reused; the new run executes from seq on",
    "--id newId     the new run's id (default: a UUID)",
    "Same workflow and input as the original; an executor with the workflow registered runs it.",
  ],
  options: { from: "string", id: "string" },
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "fork");
    const fromSeq = integerOption(args, "from", 0);
    if (fromSeq === undefined) {
      throw new CliError("missing --from <seq>", "name the first seq to execute again, e.g. --from 2 (see `cairn show <runId>`)");
    }
    const id = stringOption(args, "id");
    if (id === "") throw new CliError("--id is empty", "give the new run a non-empty id, or leave --id out for a UUID");
    const handle = await withClient(database, async (cairn) => {
      // Checked here because forking onto an existing id is not refused by the store (see report).
      if (id !== undefined && (await findRun(storeOf(cairn), id)) !== undefined) {
        throw new CliError(`a run with id "${id}" already exists`, "choose another --id, or leave it out for a UUID");
      }
      return cairn.fork(runId!, { fromSeq, ...(id === undefined ? {} : { id }) });
    });
    if (json) return printJson({ id: handle.id, forkedFrom: runId, fromSeq });
    print(`forked run ${runId} at seq ${fromSeq} as ${handle.id}; an executor with its workflow registered will run it`);
  },
};
