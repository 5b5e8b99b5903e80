import { toPositional } from "./connection.js";
import type { ExecutorRow, NewRun, RunRow, RunStatus, StepKind, StepRow, StepStatus } from "./store.js";

/**
 * Raw rows to typed rows. Both backends return the same column names (the schema is shared), so
 * the mapping lives once, here. Numbers may arrive as strings or bigints from a driver; they are
 * normalised to numbers (milliseconds fit easily).
 */
type Raw = Record<string, unknown>;

const num = (value: unknown): number => (typeof value === "number" ? value : Number(value));
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : num(value));
const strOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));

export function toRunRow(raw: Raw): RunRow {
  return {
    id: String(raw.id),
    workflow: String(raw.workflow),
    status: raw.status as RunStatus,
    input: String(raw.input_text ?? raw.input),
    output: strOrNull(raw.output_text ?? raw.output),
    error: strOrNull(raw.error),
    parentId: strOrNull(raw.parent_id),
    parentSeq: numOrNull(raw.parent_seq),
    rootId: String(raw.root_id),
    appVersion: String(raw.app_version),
    executorId: strOrNull(raw.executor_id),
    wakeAt: numOrNull(raw.wake_at),
    deadlineAt: numOrNull(raw.deadline_at),
    createdAt: num(raw.created_at),
    updatedAt: num(raw.updated_at),
    finishedAt: numOrNull(raw.finished_at),
    recoveries: num(raw.recoveries),
    recoveryBase: num(raw.recovery_base ?? 0),
    forkedFrom: strOrNull(raw.forked_from),
    forkedFromSeq: numOrNull(raw.forked_from_seq),
  };
}

/** The row a run's insert wrote: what a read right after it would return, without the read. */
export function createdRunRow(run: NewRun): RunRow {
  return {
    id: run.id,
    workflow: run.workflow,
    status: run.status,
    input: run.input.text,
    output: null,
    error: null,
    parentId: run.parentId,
    parentSeq: run.parentSeq,
    rootId: run.rootId,
    appVersion: run.appVersion,
    executorId: run.executorId,
    wakeAt: null,
    deadlineAt: run.deadlineAt,
    createdAt: run.createdAt,
    updatedAt: run.createdAt,
    finishedAt: null,
    recoveries: 0,
    recoveryBase: 0,
    forkedFrom: run.forkedFrom,
    forkedFromSeq: run.forkedFromSeq,
  };
}

export function toStepRow(raw: Raw): StepRow {
  return {
    runId: String(raw.run_id),
    seq: num(raw.seq),
    name: String(raw.name),
    kind: raw.kind as StepKind,
    status: raw.status as StepStatus,
    output: strOrNull(raw.output_text ?? raw.output),
    outputHash: strOrNull(raw.output_hash),
    error: strOrNull(raw.error),
    startedAt: num(raw.started_at),
    finishedAt: numOrNull(raw.finished_at),
    attempts: num(raw.attempts),
    storedPath: strOrNull(raw.path),
    completion: numOrNull(raw.completion),
    fingerprint: strOrNull(raw.fingerprint),
  };
}

export function toExecutorRow(raw: Raw): ExecutorRow {
  return {
    id: String(raw.id),
    hostname: String(raw.hostname),
    pid: num(raw.pid),
    backendPid: numOrNull(raw.backend_pid),
    pidNamespace: strOrNull(raw.pid_namespace),
    appVersion: String(raw.app_version),
    startedAt: num(raw.started_at),
    heartbeatAt: num(raw.heartbeat_at),
    capacity: numOrNull(raw.capacity),
    wakeChannel: strOrNull(raw.wake_channel),
    workflows: workflowsOf(raw.workflows),
    sessionOpen: raw.session_open === null || raw.session_open === undefined ? null : Boolean(raw.session_open),
  };
}

/** An executor row's workflows (a JSON array of names), or null when it shows none it can be read as. */
function workflowsOf(raw: unknown): string[] | null {
  if (typeof raw !== "string") return null;
  try {
    const names: unknown = JSON.parse(raw);
    return Array.isArray(names) && names.every((name) => typeof name === "string") ? names : null;
  } catch {
    return null;
  }
}

/** How a stored value splits into its inline and hash columns: the value module's rule. */
export { splitStored } from "./value/journal-value.js";

/**
 * Rewrites `$1, $2, ...` placeholders to positional `?` with the parameters reordered to match, so
 * users write one placeholder style on both backends. `$` inside quoted strings is left alone.
 */
export function positionalPlaceholders(text: string, params: readonly unknown[]): { text: string; params: unknown[] } {
  const positional = toPositional(text);
  for (const index of positional.order) {
    if (index < 0 || index >= params.length) {
      throw new RangeError(`placeholder $${index + 1} has no parameter (${params.length} given)`);
    }
  }
  return { text: positional.text, params: positional.order.map((index) => params[index]) };
}

/**
 * Binds numbered parameters (`?1, ?2, ...`) for better-sqlite3, which takes them only as an
 * object keyed by number.
 */
export function numbered(...values: unknown[]): Record<number, unknown> {
  const out: Record<number, unknown> = {};
  values.forEach((value, i) => (out[i + 1] = value));
  return out;
}
