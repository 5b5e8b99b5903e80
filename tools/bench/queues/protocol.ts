import type { SystemName } from "./system.js";

/** What main.ts tells a worker process. */
export type ParentMessage =
  | { type: "start"; system: SystemName; database: string; index: number; local: boolean }
  /** Latency with the producer in this worker's process. */
  | { type: "measure"; system: SystemName; database: string; runs: number; firstIndex: number }
  | { type: "stop" };

/** What a worker process tells main.ts. */
export type WorkerMessage =
  { type: "ready" } | { type: "started"; i: number; at: number } | { type: "latency"; latencies: number[] } | { type: "stopped" };
