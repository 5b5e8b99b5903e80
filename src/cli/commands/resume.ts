import { positionals } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson } from "../output.js";

export const resume: Command = {
  name: "resume",
  usage: "<runId>",
  summary: "continue a failed or cancelled run from its journal",
  help: [
    "The run is enqueued again, without the failed steps that ended it; an executor with its",
    "workflow registered picks it up and replays the journal, so finished steps do not run again.",
  ],
  options: {},
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "resume");
    const { resumed, status } = await withClient(database, async (cairn) => {
      const resumed = await cairn.resume(runId!);
      return { resumed, status: (await cairn.run(runId!).status()).status };
    });
    if (!resumed) throw new CliError(`run ${runId} is ${status}, not failed or cancelled`, "only a failed or cancelled run can be resumed");
    if (json) return printJson({ runId, resumed, status });
    print(`run ${runId} is ${status} again; an executor with its workflow registered will continue it`);
  },
};
