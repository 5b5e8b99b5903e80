import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { formatDuration, print, printJson, table } from "../output.js";
import { listExecutors } from "../../observe/queues.js";
import { dim } from "../style.js";

export const executors: Command = {
  name: "executors",
  usage: "",
  summary: "list executors: capacity, runs in use, queues served, heartbeat age",
  help: ["The Worker table: every executor registered on the database (one whose heartbeat is older than its lease is dead and soon removed)."],
  options: {},
  async run({ args, database, json }) {
    positionals(args, [], "executors");
    const rows = await withReadStore(database, (store) => listExecutors(store));
    const now = Date.now();
    if (json) return printJson(rows.map((e) => ({ ...e, heartbeatAgeMs: now - e.heartbeatAt })));
    if (rows.length === 0) return print(dim("no executors"));
    print(
      table(
        [
          "ID",
          "HOST",
          { header: "PID", align: "right" },
          "VERSION",
          { header: "CAPACITY", align: "right" },
          { header: "IN USE", align: "right" },
          "QUEUES",
          "PARTITIONS",
          { header: "HEARTBEAT AGE", align: "right" },
        ],
        rows.map((e) => [
          e.id,
          e.hostname,
          String(e.pid),
          e.appVersion,
          e.capacity === null ? "-" : String(e.capacity),
          String(e.inUse),
          e.queues.join(",") || "-",
          e.partitions.join(",") || "-",
          formatDuration(Math.max(0, now - e.heartbeatAt)),
        ]),
      ),
    );
  },
};
