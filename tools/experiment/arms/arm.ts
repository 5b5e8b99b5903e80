/**
 * An arm: one runtime under test. The pass runner (run-pass.ts) is the same for every arm; an arm
 * says how its workers are configured, where its approvals are decided, how a diagnosis reads its
 * records, and how a finished run is re-run from them.
 */

import type { LedgerEntry } from "../services/ledger.js";
import type { MockServices } from "../services/mock-services.js";
import type { ExperimentSettings } from "../settings.js";
import type { ApprovalDesk } from "../supervisor/approver.js";
import type { WorkerConfig } from "../worker/worker-config.js";

/** `baseline`: the conventional runtime without faults, the reference for latency overhead. */
export type PassKind = "baseline" | "no-fault" | "faults";

export interface PassContext {
  kind: PassKind;
  /** The pass's own directory (kept after the run). */
  dir: string;
  settings: ExperimentSettings;
  services: MockServices;
}

/** The answer to "which model response caused this side effect?" and what it took. */
export interface Diagnosis {
  /** The side effect asked about (a ledger entry's effect and number). */
  effect: string;
  ms: number;
  /** Queries or file scans the answer took. */
  commands: number;
  /** True when exactly one model response is named, by a recorded link rather than a guess. */
  exact: boolean;
  answer: string;
  method: string;
}

export interface Reproduction {
  reproducible: boolean;
  /** Finished runs re-run, and how many of them came out identical. */
  runs: number;
  identical: number;
  detail: string;
}

/** What a replay worker reported: its verdict and the live model or tool calls it made (should be none). */
export interface ReplayOutcome {
  runs: number;
  identical: number;
  detail: string;
  liveCalls: number;
}

export type SpawnReplay = (fields: Partial<WorkerConfig> & { tasks: number[] }) => Promise<ReplayOutcome>;

export interface ArmSession {
  runtime: WorkerConfig["runtime"];
  /** What this arm adds to a worker's configuration (database, checkpoints, application log). */
  workerFields(slot: number): Partial<WorkerConfig>;
  /** The tasks a (re)started worker in `slot` starts, and those it waits for before exiting. */
  tasksFor(slot: number, unfinished: readonly number[]): { tasks: number[]; awaitTasks: number[] };
  desk: ApprovalDesk;
  diagnose(target: LedgerEntry): Promise<Diagnosis>;
  reproduce(finished: readonly number[], spawnReplay: SpawnReplay): Promise<Reproduction>;
  close(): Promise<void>;
}

export interface Arm {
  name: string;
  /** Why the arm cannot run on this machine (a missing server or package), or undefined. */
  unavailable(settings: ExperimentSettings): Promise<string | undefined>;
  open(pass: PassContext): Promise<ArmSession>;
}

/** Tasks are spread over worker slots round-robin: task 1 to slot 0, task 2 to slot 1, ... */
export function slotOf(task: number, workers: number): number {
  return (task - 1) % workers;
}

/** A plain worker owns its slot's tasks: it starts the unfinished ones and waits for those. */
export function ownTasks(slot: number, unfinished: readonly number[], workers: number): { tasks: number[]; awaitTasks: number[] } {
  const mine = unfinished.filter((task) => slotOf(task, workers) === slot);
  return { tasks: mine, awaitTasks: mine };
}

/** The approval desk of the mock services, for runtimes without approvals of their own. */
export function servicesDesk(services: MockServices): ApprovalDesk {
  return {
    pending: async () =>
      services
        .deskRequests()
        .filter((r) => r.status === "pending")
        .map((r) => ({ key: r.id, task: r.task, requestedAt: r.requestedAt })),
    approve: async (key) => services.approve(key),
    requestCount: async () => services.deskRequests().length,
  };
}

/** The tool that makes a ledger operation. */
export const TOOL_OF_OP: Readonly<Record<LedgerEntry["op"], string>> = {
  open: "openTicket",
  close: "closeTicket",
  charge: "chargePayment",
  send: "sendEmail",
};
