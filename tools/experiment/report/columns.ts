/** The results table's columns, shared by the terminal table and results.md. */

import type { ArmResult } from "../metrics.js";

export interface ResultColumn {
  header: string;
  align: "left" | "right";
  cell: (result: ArmResult) => string;
}

export function compact(n: number): string {
  if (Math.abs(n) >= 1_000_000) return `${(n / 1_000_000).toFixed(2)}M`;
  if (Math.abs(n) >= 10_000) return `${(n / 1000).toFixed(1)}k`;
  return String(Math.round(n));
}

export function signedMs(ms: number): string {
  return `${ms > 0 ? "+" : ms < 0 ? "−" : "±"}${Math.abs(ms).toFixed(1)}ms`;
}

export function milliseconds(ms: number): string {
  return ms < 10 ? `${ms.toFixed(2)}ms` : `${Math.round(ms)}ms`;
}

export const RESULT_COLUMNS: readonly ResultColumn[] = [
  { header: "arm", align: "left", cell: (r) => r.arm },
  { header: "completed", align: "right", cell: (r) => `${r.completed}/${r.tasks}` },
  { header: "recovered", align: "right", cell: (r) => `${r.recovered}/${r.affectedTasks}` },
  { header: "dup. effects", align: "right", cell: (r) => String(r.duplicateSideEffects) },
  {
    header: "rep. model calls",
    align: "right",
    cell: (r) => (r.repeatedModelCallsInFlight > 0 ? `${r.repeatedModelCalls} (${r.repeatedModelCallsInFlight} in flight)` : String(r.repeatedModelCalls)),
  },
  { header: "rep. tool calls", align: "right", cell: (r) => String(r.repeatedToolCalls) },
  { header: "tokens", align: "right", cell: (r) => compact(r.tokens) },
  { header: "cost", align: "right", cell: (r) => `$${r.costUsd.toFixed(4)}` },
  { header: "p50 overhead", align: "right", cell: (r) => signedMs(r.p50OverheadMs) },
  { header: "p99 overhead", align: "right", cell: (r) => signedMs(r.p99OverheadMs) },
  { header: "tasks/min", align: "right", cell: (r) => r.throughputTasksPerMin.toFixed(1) },
  { header: "diagnose", align: "right", cell: (r) => `${milliseconds(r.diagnoseMs)}, ${r.diagnoseCommands} cmd${r.diagnoseExact ? "" : ", guess"}` },
  { header: "reproducible", align: "left", cell: (r) => (r.reproducible ? "yes" : "no") },
];
