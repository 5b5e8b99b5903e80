import type { DeletedRuns, FinishedStatus, RunDeleteFilter } from "../../store/retention.js";
import { integerOption, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson } from "../output.js";
import { dim } from "../style.js";
import { storeOf } from "../../internal.js";
import { findRun } from "../../observe/runs.js";

const FINISHED: readonly FinishedStatus[] = ["succeeded", "failed", "cancelled"];
/** Runs per transaction: short batches never stall the executors sharing the database. */
const BATCH = 500;

export const deleteCommand: Command = {
  name: "delete",
  usage: "[<runId>...] [--older-than D] [--finished-before T] [--status S] [--workflow W] [--limit N] [--all]",
  summary: "delete finished runs (with their descendants) and the payloads nothing else names",
  help: [
    "Deletes each run's rows in every table keyed by run id (journal, inbox, events, model and",
    "tool calls, approvals, budget, artifacts, stream chunks) and its descendants; agent memory stays.",
    "Never deletes an unfinished run, or a run with an unfinished descendant or ancestor. A fork keeps",
    "every payload it shares with a deleted run. Without run ids, only top-level runs match.",
    "--older-than D        finished more than D ago: 30d, 12h, 15m, 90s, 500ms",
    "--finished-before T   finished before T: an ISO date (2025-01-31T00:00Z) or ms since the epoch",
    `--status S            only runs in status S: ${FINISHED.join(", ")} (default: all three)`,
    "--workflow W          only runs of workflow W",
    "--limit N             at most N runs (default: every match)",
    "--all                 every finished run (required when no other filter or id is given)",
  ],
  options: { "older-than": "string", "finished-before": "string", status: "string", workflow: "string", limit: "string", all: "boolean" },
  async run({ args, database, json }) {
    const ids = args.positionals;
    const filter = filterOf(args);
    const hasFilter = Object.keys(filter).length > 0;
    if (ids.length === 0 && !hasFilter && args.options.all !== true) {
      throw new CliError("no runs named", "give run ids, a filter (--older-than 30d, --status failed, ...), or --all for every finished run");
    }
    const limit = integerOption(args, "limit", 1) ?? Infinity;
    const total: DeletedRuns = { runIds: [], skipped: [], payloads: 0 };
    const problems = await withClient(database, async (cairn) => {
      if (ids.length > 0) {
        for (let i = 0; i < ids.length; i += BATCH) add(total, await cairn.runs.delete({ ...filter, ids: ids.slice(i, i + BATCH), limit: BATCH }));
      } else {
        for (let deleted = 0; deleted < limit;) {
          const batch = await cairn.runs.delete({ ...filter, limit: Math.min(BATCH, limit - deleted) });
          add(total, batch);
          if (batch.runIds.length === 0) break;
          deleted += batch.runIds.length;
        }
      }
      const missed: string[] = [];
      for (const id of ids) {
        if (total.runIds.includes(id)) continue;
        const status = (await findRun(storeOf(cairn), id))?.status;
        missed.push(
          status === undefined
            ? `no run "${id}"`
            : total.skipped.includes(id)
              ? `run ${id} has an unfinished descendant or ancestor`
              : `run ${id} is ${status}`,
        );
      }
      return missed;
    });
    if (json) printJson({ deleted: total.runIds, skipped: total.skipped, payloads: total.payloads, problems });
    else if (total.runIds.length > 0 || problems.length === 0) {
      const runs = total.runIds.length === 1 ? "1 run" : `${total.runIds.length} runs`;
      print(`deleted ${runs} and ${total.payloads} unreferenced payload${total.payloads === 1 ? "" : "s"}`);
      if (total.skipped.length > 0) print(dim(`kept ${total.skipped.length} with unfinished descendants: ${total.skipped.slice(0, 10).join(", ")}`));
    }
    if (problems.length > 0) {
      throw new CliError(
        `not deleted: ${problems.slice(0, 5).join("; ")}${problems.length > 5 ? ` (and ${problems.length - 5} more)` : ""}`,
        "only finished runs can be deleted; list them with `cairn runs`",
      );
    }
  },
};

function add(total: DeletedRuns, batch: DeletedRuns): void {
  total.runIds.push(...batch.runIds);
  total.skipped.push(...batch.skipped);
  total.payloads += batch.payloads;
}

function filterOf(args: Parameters<Command["run"]>[0]["args"]): Omit<RunDeleteFilter, "ids" | "limit"> {
  const filter: Omit<RunDeleteFilter, "ids" | "limit"> = {};
  const status = stringOption(args, "status");
  if (status !== undefined) {
    if (!FINISHED.includes(status as FinishedStatus))
      throw new CliError(`cannot delete runs in status "${status}"`, `use one of ${FINISHED.join(", ")}: only finished runs are deleted`);
    filter.status = status as FinishedStatus;
  }
  const workflow = stringOption(args, "workflow");
  if (workflow !== undefined) filter.workflow = workflow;
  const olderThan = stringOption(args, "older-than");
  const before = stringOption(args, "finished-before");
  if (olderThan !== undefined && before !== undefined) throw new CliError("--older-than and --finished-before both given", "give one of them");
  if (olderThan !== undefined) filter.finishedBefore = Date.now() - parseDuration(olderThan);
  if (before !== undefined) filter.finishedBefore = parseTime(before);
  return filter;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (match === null)
    throw new CliError(`--older-than must be a duration like 30d, 12h, 15m, 90s or 500ms, not "${text}"`, "for example --older-than 30d");
  return Number(match[1]) * UNITS[match[2]!]!;
}

function parseTime(text: string): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(value))
    throw new CliError(`--finished-before must be a date or ms since the epoch, not "${text}"`, "for example --finished-before 2025-01-31T00:00Z");
  return value;
}
