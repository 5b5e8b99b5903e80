/**
 * What the experiment produces and whom it tells as it runs: the types the report renderers read,
 * apart from run-experiment.ts so that the renderers and the runner do not import each other.
 */

import type { Fault } from "./fault-schedule.js";
import type { ArmResult } from "./metrics.js";
import type { PassProgress } from "./pass-record.js";
import type { ArmName, ExperimentSettings } from "./settings.js";

export interface ExperimentResults {
  seed: number;
  faults: Fault[];
  arms: ArmResult[];
  /** Arms that could not run here, and why. */
  skipped: { arm: ArmName; reason: string }[];
  /** The no-fault, no-durability reference the overheads are measured against. */
  baseline: { p50StepMs: number; p99StepMs: number; steps: number; throughputTasksPerMin: number };
  settings: Omit<ExperimentSettings, "postgresUrl" | "out">;
  /** The command that reproduces this run. */
  command: string;
  startedAt: string;
  durationMs: number;
  machine: { cpus: number; cpuModel: string; node: string; platform: string };
}

/** What the caller shows while the experiment runs. */
export interface ExperimentObserver {
  passStarted(label: string, index: number, total: number, progress: PassProgress): void;
  passProgress(progress: PassProgress): void;
  passEnded(label: string, elapsedMs: number): void;
  note(text: string): void;
}
