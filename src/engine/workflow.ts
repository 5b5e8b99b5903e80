import { randomUUID } from "node:crypto";
import { InvalidSpecError } from "../errors.js";
import { validateRunId } from "./names.js";
import type { ChildWorkflow, WorkflowContext } from "./context.js";
import type { RunHandle } from "./run-handle.js";
import { validateInput, type StandardSchemaV1 } from "./standard-schema.js";

export interface WorkflowOptions<Input> {
  /** Any Standard Schema (zod, valibot, ...): inputs are validated at start, before anything is stored. */
  input?: StandardSchemaV1<unknown, Input>;
}

export interface StartOptions {
  /** The run id. Starting again with an id that exists returns the existing run. Default: a UUID. */
  id?: string;
  /** The run's deadline, from now; its children inherit it. */
  timeoutMs?: number;
}

/** What a Workflow needs from Cairn to start runs. */
export interface WorkflowHost {
  startRun(workflow: string, id: string, input: unknown, timeoutMs: number | undefined): Promise<RunHandle>;
}

/** A registered workflow: the code, by name. Start runs of it; hand it to `ctx.child`. */
export class Workflow<Input, Output> implements ChildWorkflow<Input, Output> {
  declare readonly __types?: { input: Input; output: Output };

  // Hash-private: a Workflow is handed to users, and its host (the runtime) must not be reachable through it.
  readonly #host: WorkflowHost;
  readonly #options: WorkflowOptions<Input>;

  constructor(
    host: WorkflowHost,
    readonly name: string,
    readonly fn: (ctx: WorkflowContext, input: Input) => Promise<Output>,
    options: WorkflowOptions<Input>,
  ) {
    this.#host = host;
    this.#options = options;
  }

  /**
   * Starts a run and returns its handle once the run's row is committed.
   *
   * Failure semantics: idempotent by id — a second start with the same id (after a crash, or from
   * another process) returns the existing run and starts nothing. Invalid input throws an
   * InvalidInputError and stores nothing.
   */
  async start(input: Input, options: StartOptions = {}): Promise<RunHandle<Output>> {
    const id = options.id ?? randomUUID();
    validateRunId(id, "id");
    if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)) {
      throw new InvalidSpecError("timeoutMs", options.timeoutMs, "must be a number of milliseconds > 0");
    }
    const value = this.#options.input === undefined ? input : await validateInput(this.#options.input, input, `input of workflow "${this.name}"`);
    return (await this.#host.startRun(this.name, id, value, options.timeoutMs)) as RunHandle<Output>;
  }
}
