import { positionals } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson } from "../output.js";

export const cancel: Command = {
  name: "cancel",
  usage: "<runId>",
  summary: "cancel a run and its unfinished descendants",
  help: [
    "The executor running the run stops it at its next poll; in-flight steps are abandoned and",
    "their results discarded. A cancelled run can be continued later with `cairn resume`.",
  ],
  options: {},
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "cancel");
    const { ids, status } = await withClient(database, async (cairn) => {
      const ids = await cairn.cancel(runId!);
      return { ids, status: ids.length > 0 ? "cancelled" : (await cairn.run(runId!).status()).status };
    });
    if (ids.length === 0 && status !== "cancelled") {
      throw new CliError(`run ${runId} already ${status}; nothing to cancel`, "only an unfinished run can be cancelled");
    }
    if (json) return printJson({ runId, cancelled: ids });
    if (ids.length === 0) return print(`run ${runId} was already cancelled`);
    const others = ids.filter((id) => id !== runId);
    const descendants = others.length === 1 ? "1 descendant" : `${others.length} descendants`;
    print(`cancelled run ${runId}${others.length === 0 ? "" : ` and ${descendants}: ${others.join(", ")}`}`);
  },
};
