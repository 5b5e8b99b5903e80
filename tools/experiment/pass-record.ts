/** What one pass produced: the plan it ran, and what the supervisor saw and the outside world recorded. */

import type { LoggedRequest } from "../../src/testing/index.js";
import type { Arm, Diagnosis, PassKind, Reproduction } from "./arms/arm.js";
import type { Fault } from "./fault-schedule.js";
import type { Marker } from "./markers.js";
import type { LedgerEntry } from "./services/ledger.js";
import type { ExperimentSettings } from "./settings.js";

export interface PassPlan {
  arm: Arm;
  kind: PassKind;
  /** Empty for a pass without faults. */
  faults: readonly Fault[];
  dir: string;
  settings: ExperimentSettings;
  workerPath: string;
  onProgress: (progress: PassProgress) => void;
}

export interface PassProgress {
  finished: number;
  tasks: number;
  faultsFired: number;
  faults: number;
}

/** A marker as the supervisor received it. */
export interface TimedMarker {
  /** Received at (the supervisor's clock, ms since the epoch). */
  at: number;
  slot: number;
  pid: number;
  marker: Marker;
}

export interface Kill {
  at: number;
  faultId: number;
  kind: Fault["kind"];
  slots: number[];
  pids: number[];
  /** Unfinished tasks whose last live step ran in a killed worker (every started one, for the environment restart). */
  affected: number[];
}

export interface TaskOutcome {
  ok: boolean;
  text: string;
  at: number;
}

export interface PassRecord {
  arm: string;
  kind: PassKind;
  tasks: number[];
  startedAt: number;
  endedAt: number;
  timedOut: boolean;
  markers: TimedMarker[];
  kills: Kill[];
  /** When each scheduled fault fired, by id (absent: never reached). */
  fired: Map<number, number>;
  outcomes: Map<number, TaskOutcome>;
  requests: LoggedRequest[];
  ledger: LedgerEntry[];
  approvalRequests: number;
  workerStarts: number;
  problems: string[];
  diagnosis?: Diagnosis;
  reproduction?: Reproduction;
}
