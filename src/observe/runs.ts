import type { RunFilter, RunRow } from "../store/store.js";
import { TERMINAL_STATUSES } from "../store/store.js";
import type { ReadStore } from "./read-store.js";

/** Runs, newest first (`cairn runs`). */
export function listRuns(store: ReadStore, filter: RunFilter): Promise<RunRow[]> {
  return store.listRuns(filter);
}

/** One run's row, or undefined when there is no such run. */
export function findRun(store: ReadStore, runId: string): Promise<RunRow | undefined> {
  return store.getRun(runId);
}

/** How long a run took, or has taken so far when it is unfinished. */
export function runDurationMs(run: RunRow, now = Date.now()): number {
  return (run.finishedAt ?? (TERMINAL_STATUSES.includes(run.status) ? run.updatedAt : now)) - run.createdAt;
}

export function isFinished(run: RunRow): boolean {
  return TERMINAL_STATUSES.includes(run.status);
}

/** A run row as JSON (`--json`, the dashboard): times as ISO strings, durations in ms. */
export function runJson(run: RunRow): Record<string, unknown> {
  return {
    id: run.id,
    workflow: run.workflow,
    status: run.status,
    createdAt: new Date(run.createdAt).toISOString(),
    finishedAt: run.finishedAt === null ? null : new Date(run.finishedAt).toISOString(),
    durationMs: runDurationMs(run),
    recoveries: run.recoveries,
    appVersion: run.appVersion,
    parentId: run.parentId,
    forkedFrom: run.forkedFrom,
    forkedFromSeq: run.forkedFromSeq,
  };
}
