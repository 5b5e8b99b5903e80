import type { RunRow, SqlClient, StepRow } from "../store/store.js";
import { fromStored } from "../store/value/index.js";
import type {
  ChildHandle,
  ChildOptions,
  ChildWorkflow,
  RecvOptions,
  SelectBranches,
  SelectKey,
  Selected,
  StepCall,
  StepOptions,
  WorkflowContext,
} from "./context.js";
import { operationScopes } from "./replay-journal.js";
import { child } from "./run/children.js";
import { DEFAULT_REPLAY_STALL_MS, JournalCore, type ExecutionHost } from "./run/journal-core.js";
import { recv, send, setEvent } from "./run/messages.js";
import { race, select } from "./run/select.js";
import { now, operation, patched, random, uuid, type OperationSpec } from "./run/steps.js";
import { sleep, sleepUntil } from "./run/timers.js";
import { transaction } from "./run/transactions.js";

export { DEFAULT_REPLAY_STALL_MS, type ExecutionHost, type OperationSpec };

export type WorkflowFunction = (ctx: WorkflowContext, input: never) => Promise<unknown>;

/**
 * One loaded run: the workflow function running against its journal, and the context it is given.
 * The journal and the run's lifecycle are the core's (run/journal-core.ts); each family of durable
 * operations lives in a room of its own under run/ (steps, timers, messages and events, children,
 * transactions), all written through one skeleton (run/operation.ts). The run unloads (and this
 * object becomes garbage) when it settles, when it is blocked on nothing but durable waits, or when
 * it learns it no longer owns the run.
 */
export class RunExecution extends JournalCore implements WorkflowContext {
  /** How many journal rows the run was loaded with (for its trace). */
  private readonly recorded: number;

  constructor(
    host: ExecutionHost,
    run: RunRow,
    private readonly fn: WorkflowFunction,
    journal: readonly StepRow[],
    replayStallMs = DEFAULT_REPLAY_STALL_MS,
  ) {
    super(host, run, journal, replayStallMs);
    this.recorded = journal.length;
  }

  /** Runs the workflow to its end (or until it unloads) and records the outcome. */
  async execute(): Promise<void> {
    const tracing = this.host.tracing;
    if (tracing !== undefined) {
      const trace = tracing.open(this.run, this.host.executorId, this.recorded);
      const opened = trace instanceof Promise ? await trace.catch(() => undefined) : trace;
      // Lost while the trace context was read (a cancel, a takeover): nothing ran here.
      if (this.stopped) opened?.end("lost");
      else this.trace = opened;
    }
    this.armDeadline();
    if (!this.live()) return;
    let output: unknown;
    try {
      const body = () => operationScopes.run(this.topScope, () => this.fn(this, fromStored(this.run.input) as never));
      output = await (this.trace === undefined ? body() : this.trace.within(body));
    } catch (error) {
      if (!this.stopped) await this.settle("failed", error);
      return;
    }
    if (!this.stopped) await this.settle("succeeded", output);
  }

  // ---- WorkflowContext: each method is its room's ---------------------------------------------

  step<T>(name: string, fn: (call: StepCall) => Promise<T> | T, options: StepOptions = {}): Promise<T> {
    return operation(this, { kind: "step", name, execute: fn, options });
  }

  /**
   * The durable-operation primitive `step` is made of, open to the layers above the engine (model
   * calls, tool calls): see run/steps.ts.
   */
  operation<T>(spec: OperationSpec<T>): Promise<T> {
    return operation(this, spec);
  }

  transaction<T>(name: string, fn: (sql: SqlClient) => Promise<T>): Promise<T> {
    return transaction(this, name, fn);
  }

  sleep(name: string, delayMs: number): Promise<void> {
    return sleep(this, name, delayMs);
  }

  sleepUntil(name: string, until: Date | number): Promise<void> {
    return sleepUntil(this, name, until);
  }

  now(): Promise<number> {
    return now(this);
  }

  random(): Promise<number> {
    return random(this);
  }

  uuid(): Promise<string> {
    return uuid(this);
  }

  send(runId: string, topic: string, value: unknown): Promise<void> {
    return send(this, runId, topic, value);
  }

  recv<T = unknown>(topic: string, options: RecvOptions = {}): Promise<T | undefined> {
    return recv<T>(this, topic, options);
  }

  setEvent(key: string, value: unknown): Promise<void> {
    return setEvent(this, key, value);
  }

  child<Input, Output>(workflow: ChildWorkflow<Input, Output>, input: Input, options: ChildOptions = {}): Promise<ChildHandle<Output>> {
    return child(this, workflow, input, options);
  }

  select<const B extends SelectBranches>(name: string, branches: B): Promise<Selected<SelectKey<B>>> {
    return select<SelectKey<B>>(this, name, branches);
  }

  race<T = unknown>(name: string, branches: SelectBranches): Promise<T> {
    return race<T>(this, name, branches);
  }

  patched(name: string): Promise<boolean> {
    return patched(this, name);
  }
}
