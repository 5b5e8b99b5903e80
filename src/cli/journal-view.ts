import { decodeValue, type ErrorRecord } from "../store/value/index.js";
import type { RunRow, StepRow, Store } from "../store/store.js";
import { RunNotFoundError } from "../errors.js";
import { agentTreeJson, loadAgentTree, renderAgentTree, type AgentTreeRun } from "./agent-tree.js";
import { toStepRow } from "../store/rows.js";
import { formatClock, formatDuration, formatTime, print, printTable, renderValue, truncate } from "./output.js";
import { runDurationMs, runJson } from "./run-fields.js";
import { bold, dim, red, status } from "./style.js";

/** Everything `cairn show` prints about a run, read in one go. */
export interface RunView {
  run: RunRow;
  children: RunRow[];
  /** One page of the journal: entries with seq ≥ page.from, at most page.limit of them. */
  journal: StepRow[];
  page: JournalPage;
  /** The run's tree of descendants with model calls, tokens and cost; only for a run with children or model calls. */
  agents?: AgentTreeRun[] | undefined;
}

export interface JournalPage {
  from: number;
  limit: number;
  /** Journal entries of the whole run. */
  total: number;
}

/** Entries shown when `--limit` is not given: a page reads and prints in well under a second. */
export const DEFAULT_JOURNAL_LIMIT = 1000;

export async function loadRunView(store: Store, runId: string, paging: { from?: number; limit?: number } = {}): Promise<RunView> {
  const run = await store.getRun(runId);
  if (run === undefined) throw new RunNotFoundError(runId);
  const from = paging.from ?? 0;
  const limit = paging.limit ?? DEFAULT_JOURNAL_LIMIT;
  const [children, journal, counted, agents] = await Promise.all([
    store.listRuns({ parentId: runId, limit: 1000 }),
    store.select<Record<string, unknown>>(
      `SELECT s.*, COALESCE(s.output, p.body) AS output_text FROM cairn_steps s
       LEFT JOIN cairn_payloads p ON p.hash = s.output_hash WHERE s.run_id = $1 AND s.seq >= $2 ORDER BY s.seq LIMIT $3`,
      [runId, from, limit],
    ),
    store.select<{ n: number | string }>("SELECT count(*) AS n FROM cairn_steps WHERE run_id = $1", [runId]),
    loadAgentTree(store, run),
  ]);
  children.sort((a, b) => (a.parentSeq ?? 0) - (b.parentSeq ?? 0));
  return { run, children, journal: journal.map(toStepRow), page: { from, limit, total: Number(counted[0]?.n ?? 0) }, agents };
}

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

/** The same, for `--json`: values decoded, errors as `{ name, message, code }`. */
export function runViewJson({ run, children, journal, page, agents }: RunView): Record<string, unknown> {
  return {
    ...runJson(run),
    input: decodeOrText(run.input),
    output: run.status === "succeeded" ? decodeOrText(run.output) : null,
    error: run.error === null ? null : errorRecord(run.error),
    parentSeq: run.parentSeq,
    children: children.map((c) => ({ id: c.id, workflow: c.workflow, status: c.status, parentSeq: c.parentSeq })),
    journalPage: page,
    journal: journal.map((step) => ({
      seq: step.seq,
      name: step.name,
      kind: step.kind,
      status: step.status,
      startedAt: new Date(step.startedAt).toISOString(),
      durationMs: step.finishedAt === null ? null : step.finishedAt - step.startedAt,
      attempts: step.attempts,
      output: step.status === "succeeded" ? decodeOrText(step.output) : null,
      error: step.error === null ? null : errorRecord(step.error),
    })),
    ...(agents === undefined ? {} : { agents: agentTreeJson(agents) }),
  };
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
  const decoded = decode(text);
  return decoded.ok ? renderValue(decoded.value, max) : truncate(text, max);
}

function errorPreview(text: string, max: number): string {
  const record = errorRecord(text);
  return truncate(`${record.name}: ${record.message}`, max);
}

/** The stored error, or as much of it as parses. */
function errorRecord(text: string): { name: string; message: string; code?: string } {
  try {
    const record = JSON.parse(text) as ErrorRecord;
    return { name: record.name, message: record.message, ...(record.code === undefined ? {} : { code: record.code }) };
  } catch {
    return { name: "Error", message: text };
  }
}

/** A stored value decoded with the journal's codec; the raw text if it does not decode. */
export function decodeOrText(text: string | null): unknown {
  if (text === null) return null;
  const decoded = decode(text);
  return decoded.ok ? decoded.value : text;
}

function decode(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: decodeValue(text) };
  } catch {
    return { ok: false };
  }
}
