import type { RunStatus } from "../../store/store.js";
import { integerOption, positionals, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { formatDuration, formatTime, print, printJson, table } from "../output.js";
import { findRun, isFinished, listRuns, runDurationMs, runJson } from "../../observe/runs.js";
import { queueRunIds } from "../../observe/queues.js";
import { dim, status } from "../style.js";

const STATUSES: readonly RunStatus[] = ["enqueued", "running", "waiting", "succeeded", "failed", "cancelled"];
const DEFAULT_LIMIT = 50;

export const runs: Command = {
  name: "runs",
  usage: "[--status S] [--workflow W] [--queue Q] [--limit N]",
  summary: "list runs, newest first",
  help: [
    `--status S     only runs in status S: ${STATUSES.join(", ")}`,
    "--workflow W   only runs of workflow W",
    "--queue Q      only runs enqueued on queue Q",
    `--limit N      at most N runs (default ${DEFAULT_LIMIT})`,
  ],
  options: { status: "string", workflow: "string", queue: "string", limit: "string" },
  async run({ args, database, json }) {
    positionals(args, [], "runs");
    const wanted = stringOption(args, "status");
    if (wanted !== undefined && !STATUSES.includes(wanted as RunStatus)) {
      throw new CliError(`unknown status "${wanted}"`, `use one of ${STATUSES.join(", ")}`);
    }
    const limit = integerOption(args, "limit", 1) ?? DEFAULT_LIMIT;
    const workflow = stringOption(args, "workflow");
    const queue = stringOption(args, "queue");
    const rows = await withReadStore(database, async (store) => {
      if (queue !== undefined) {
        const ids = await queueRunIds(store, queue, {
          limit,
          ...(wanted === undefined ? {} : { status: wanted }),
          ...(workflow === undefined ? {} : { workflow }),
        });
        return (await Promise.all(ids.map((id) => findRun(store, id)))).filter((run) => run !== undefined);
      }
      return listRuns(store, {
        limit,
        ...(wanted === undefined ? {} : { status: wanted as RunStatus }),
        ...(workflow === undefined ? {} : { workflow }),
      });
    });
    if (json) return printJson(rows.map(runJson));
    if (rows.length === 0) return print(dim("no runs"));
    print(
      table(
        ["ID", "WORKFLOW", "STATUS", "CREATED", { header: "DURATION", align: "right" }, { header: "RECOVERIES", align: "right" }],
        rows.map((run) => [
          run.id,
          run.workflow,
          status(run.status),
          formatTime(run.createdAt),
          formatDuration(runDurationMs(run)) + (isFinished(run) ? "" : "…"),
          String(run.recoveries),
        ]),
      ),
    );
    if (rows.length === limit) print(dim(`(the newest ${limit}; --limit N for more)`));
  },
};
