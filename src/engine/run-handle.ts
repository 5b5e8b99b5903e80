import type { RunRow, RunStatus } from "../store/store.js";
import { errorFromText, fromStored } from "../store/value/index.js";

export interface RunStatusInfo {
  status: RunStatus;
  /**
   * What the run failed with, rebuilt as it was thrown (an error with its class and fields, or a
   * thrown non-error value itself), when it failed or was cancelled.
   */
  error?: unknown;
}

/** What a RunHandle needs from the runtime that made it (declared here, so the handle never imports the runtime). */
export interface RunHost {
  /** The run's row, riding out transient store errors. */
  readRun(runId: string): Promise<RunRow>;
  /** Waits until the run is succeeded, failed or cancelled, and returns its row. */
  waitForRun(runId: string): Promise<RunRow>;
  cancel(runId: string): Promise<string[]>;
  resume(runId: string): Promise<boolean>;
}

/** A handle on a run, from `workflow.start`, `cairn.run(id)` or `cairn.fork`. */
export class RunHandle<Output = unknown> {
  // Hash-private: a handle is handed to users, and its host (the runtime) must not be reachable through it.
  readonly #host: RunHost;

  constructor(
    host: RunHost,
    readonly id: string,
  ) {
    this.#host = host;
  }

  async status(): Promise<RunStatusInfo> {
    const run = await this.#host.readRun(this.id);
    return run.error !== null && run.status !== "succeeded" ? { status: run.status, error: errorFromText(run.error) } : { status: run.status };
  }

  /** Resolves with the run's output once it succeeds; rejects with its error if it fails or is cancelled. */
  async result(): Promise<Output> {
    const run = await this.#host.waitForRun(this.id);
    if (run.status === "succeeded") return fromStored(run.output) as Output;
    throw errorFromText(run.error ?? '{"name":"Error","message":"run ended without an error record"}');
  }

  /** Cancels the run and its descendants; a running run stops at its next step boundary. */
  async cancel(): Promise<string[]> {
    return this.#host.cancel(this.id);
  }

  /** Continues a failed or cancelled run from its journal. */
  async resume(): Promise<boolean> {
    return this.#host.resume(this.id);
  }
}
