import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { formatDuration, print, printJson, table } from "../output.js";
import { listQueues } from "../../observe/queues.js";
import { dim } from "../style.js";

export const queues: Command = {
  name: "queues",
  usage: "",
  summary: "list queues: depth, running, dispatch rate, oldest waiting",
  help: ["DEPTH counts runs waiting for a dispatch (delayed ones too); RATE is dispatches in the last minute."],
  options: {},
  async run({ args, database, json }) {
    positionals(args, [], "queues");
    const rows = await withReadStore(database, (store) => listQueues(store));
    const now = Date.now();
    if (json) return printJson(rows);
    if (rows.length === 0) return print(dim("no queues"));
    print(
      table(
        [
          "QUEUE",
          "POLICY",
          { header: "DEPTH", align: "right" },
          { header: "RUNNING", align: "right" },
          "LIMITS",
          { header: "RATE/MIN", align: "right" },
          { header: "OLDEST WAITING", align: "right" },
        ],
        rows.map((q) => [
          q.name,
          q.policy,
          String(q.depth),
          String(q.running),
          limits(q),
          String(q.dispatchedLastMinute),
          q.oldestWaitingAt === null ? "-" : formatDuration(Math.max(0, now - q.oldestWaitingAt)),
        ]),
      ),
    );
  },
};

function limits(q: Awaited<ReturnType<typeof listQueues>>[number]): string {
  const parts = [
    q.concurrency === null ? null : `concurrency ${q.concurrency}`,
    q.workerConcurrency === null ? null : `per executor ${q.workerConcurrency}`,
    q.partitionConcurrency === null ? null : `per key ${q.partitionConcurrency}`,
    q.rateLimit === null ? null : `${q.rateLimit.limit}/${q.rateLimit.periodMs}ms`,
  ].filter((p) => p !== null);
  return parts.length === 0 ? "-" : parts.join(", ");
}
