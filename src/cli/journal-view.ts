import { decodeOrText, decodeStored, errorRecord, type RunView } from "../observe/journal.js";
import { runDurationMs } from "../observe/runs.js";
import type { StepRow } from "../store/store.js";
import { renderAgentTree } from "./agent-tree.js";
import { formatClock, formatDuration, formatTime, print, printTable, renderValue, truncate } from "./output.js";
import { bold, dim, red, status } from "./style.js";

/** The header and the journal as a timeline, for people. */
export function printRunView({ run, children, journal, page, agents }: RunView): void {
  const field = (label: string, value: string) => `${dim(label.padEnd(12))}${value}`;
  const lines = [
    field("run", bold(run.id)),
    field("workflow", run.workflow),
    field("status", status(run.status)),
    field("created", formatTime(run.createdAt)),
    field("finished", run.finishedAt === null ? "-" : `${formatTime(run.finishedAt)} (took ${formatDuration(runDurationMs(run))})`),
    field("recoveries", String(run.recoveries)),
    field("app version", run.appVersion),
    field("parent", run.parentId === null ? "-" : `${run.parentId} (at seq ${run.parentSeq ?? "?"})`),
    field("children", children.length === 0 ? "-" : children.map((c) => `${c.id} (${c.status})`).join(", ")),
    field("forked from", run.forkedFrom === null ? "-" : `${run.forkedFrom} at seq ${run.forkedFromSeq ?? "?"}`),
    field("input", valuePreview(run.input, 100)),
  ];
  if (run.status === "succeeded") lines.push(field("output", valuePreview(run.output, 100)));
  if (run.error !== null) lines.push(field("error", red(errorPreview(run.error, 100))));
  lines.push("");
  if (journal.length === 0) {
    lines.push(dim(page.total === 0 ? "journal: empty (no step recorded yet)" : `journal: no entry from seq ${page.from} (${page.total} entries)`));
    if (agents !== undefined) lines.push("", renderAgentTree(agents));
    print(lines.join("\n"));
    return;
  }
  print(lines.join("\n"));
  lines.length = 0;
  printTable(
    [
      { header: "SEQ", align: "right" },
      "NAME",
      "KIND",
      "STATUS",
      { header: "DURATION", align: "right" },
      { header: "ATTEMPTS", align: "right" },
      "OUTPUT / ERROR",
    ],
    journal.map((step) => [
      String(step.seq),
      step.name,
      step.kind,
      status(step.status),
      step.finishedAt === null ? "-" : formatDuration(step.finishedAt - step.startedAt),
      String(step.attempts),
      stepPreview(step),
    ]),
  );
  const last = journal[journal.length - 1]!.seq;
  if (journal.length < page.total) {
    lines.push(dim(`(${journal.length} of ${page.total} journal entries, seq ${journal[0]!.seq}–${last}; --from ${last + 1} for the next page)`));
  }
  if (agents !== undefined) lines.push("", renderAgentTree(agents));
  if (lines.length > 0) print(lines.join("\n"));
}

function stepPreview(step: StepRow): string {
  if (step.error !== null) return red(errorPreview(step.error, 60));
  if (step.kind === "sleep") {
    const wakeAt = decodeOrText(step.output);
    return typeof wakeAt === "number" ? `until ${formatClock(wakeAt)}` : valuePreview(step.output, 60);
  }
  if (step.status === "pending") {
    const deadline = decodeOrText(step.output);
    return typeof deadline === "number" ? `waiting until ${formatClock(deadline)}` : "waiting";
  }
  return valuePreview(step.output, 60);
}

export function valuePreview(text: string | null, max: number): string {
  if (text === null) return dim("-");
  const decoded = decodeStored(text);
  return decoded.ok ? renderValue(decoded.value, max) : truncate(text, max);
}

function errorPreview(text: string, max: number): string {
  const record = errorRecord(text);
  return truncate(`${record.name}: ${record.message}`, max);
}
