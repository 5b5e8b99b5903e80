import "./ai/sdk.js";
import type { ToolLoopAgent } from "ai";
import { approvalKeyBytes } from "./ai/approval-channel.js";
import { Approvals } from "./ai/approvals.js";
import { agentBody, validateAgentSpec, type Agent, type AgentSpec } from "./ai/agent.js";
import { agentContext, type AgentContext, type AgentSettings } from "./ai/agent-context.js";
import { readStream, type StreamChunk } from "./ai/stream-chunks.js";
import { fromToolLoopAgent, isToolLoopAgent, type CairnAgentOptions } from "./ai/tool-loop-agent.js";
import { AGENTS_EXTENSION } from "./ai/schema/agents-extension.js";
import { CRON_EXTENSION, CronScheduler, validateSchedule, type ScheduleSpec } from "./scheduler/cron/index.js";
import { CairnRuntime, type CairnOptions, type ForkOptions, type SendOptions } from "./scheduler/runtime.js";
import type { RunHandle } from "./engine/run-handle.js";
import type { Workflow, WorkflowOptions } from "./engine/workflow.js";
import { attachRuntime } from "./internal.js";
import { OpenTelemetryTracing } from "./observe/telemetry/open-telemetry.js";
import { TELEMETRY_EXTENSION } from "./observe/telemetry/telemetry-extension.js";
import {
  SUPERVISION_EXTENSION,
  Supervisors,
  supervisorBody,
  validateSupervisorSpec,
  type ResolvedSpec,
  type SupervisorSpec,
} from "./supervision/index.js";
import type { DeletedRuns, RunDeleteFilter } from "./store/retention.js";
import type { UiOptions, UiServer } from "./ui/host.js";
import type { QueryResult, Store } from "./store/store.js";
import type { QueueOptions } from "./scheduler/queue-spec.js";

/**
 * Cairn: the durable engine with agents on top. It composes the layers — the runtime (store,
 * engine, scheduler) and the agents layer — rather than inheriting from one, so its public members
 * are exactly the documented API (README.md, "The API" and "Agents"). What the CLI, the tools and
 * the tests need beyond it they reach through `runtimeOf(cairn)` / `storeOf(cairn)`
 * (src/internal.ts), which the package does not export.
 *
 * `cairn.workflow` gives the workflow an `AgentContext` (the run context plus recorded models,
 * durable tools and delegation); `cairn.agent` registers a ready-made tool-loop agent;
 * `cairn.approvals` decides the tool calls that wait for a human.
 */
export class Cairn {
  /** Human approvals of tool calls (list, approve, deny), from this process or any sharing the database. */
  readonly approvals: Approvals;

  /**
   * Deleting finished runs: `delete(filter)` removes the matching runs with their descendants and
   * every row keyed by their ids, then the payloads nothing names any more; `gc()` sweeps every
   * unreferenced payload. Never touches an unfinished run. See RunDeleteFilter.
   */
  readonly runs: {
    delete(filter: RunDeleteFilter): Promise<DeletedRuns>;
    gc(): Promise<number>;
  };

  /** Running supervisors: `startChild(supervisorRunId, input)` for a simple_one_for_one supervisor, from any process. */
  readonly supervisors: Supervisors;

  readonly #runtime: CairnRuntime;
  readonly #supervisorSpecs = new Map<string, ResolvedSpec>();
  readonly #agentSettings: AgentSettings;
  readonly #tracing: OpenTelemetryTracing;
  readonly #cron: CronScheduler;

  constructor(options: CairnOptions = {}) {
    // Checked before the store opens, so that a bad key leaves nothing open.
    const approvalKey = approvalKeyBytes(options.approvalKey ?? (process.env.CAIRN_APPROVAL_KEY || undefined));
    // OpenTelemetry (observe/telemetry) reaches the engine through its tracing hooks; its table
    // (each run's trace context) joins the store like the agents layer's.
    const tracing = new OpenTelemetryTracing(options.tracerProvider, (): Store => runtime.store());
    const runtime: CairnRuntime = new CairnRuntime(options, { tracing });
    this.#runtime = runtime;
    this.#tracing = tracing;
    this.#agentSettings = { approvalKey };
    // The agents layer brings its schema, tables, step kinds and hooks to the store through the
    // extension contract, before the store first migrates (on first use).
    runtime.store().register(AGENTS_EXTENSION);
    runtime.store().register(TELEMETRY_EXTENSION);
    runtime.store().register(SUPERVISION_EXTENSION);
    this.supervisors = new Supervisors({
      readyStore: () => runtime.readyStore(),
      now: () => runtime.clock.now(),
      poke: () => runtime.poke(),
      specs: this.#supervisorSpecs,
    });
    // Cron: schedules kept in cairn_schedules, fired by every executor that declares them.
    runtime.store().register(CRON_EXTENSION);
    this.#cron = new CronScheduler(runtime, options.onError ?? ((error) => console.error("[cairn]", error)));
    attachRuntime(this, runtime);
    this.approvals = new Approvals({
      ready: () => runtime.readyStore(),
      now: () => runtime.clock.now(),
      poke: () => runtime.poke(),
      approvalKey,
    });
    this.runs = {
      delete: (filter) => runtime.deleteRuns(filter),
      gc: () => runtime.collectPayloads(),
    };
  }

  /** Registers a workflow under a unique name. Register every workflow before `launch`. */
  workflow<Input, Output>(
    name: string,
    fn: (ctx: AgentContext, input: Input) => Promise<Output>,
    options: WorkflowOptions<Input> = {},
  ): Workflow<Input, Output> {
    if (typeof fn !== "function") return this.#runtime.workflow(name, fn, options); // refused there, naming the field
    const settings = this.#agentSettings;
    return this.#runtime.workflow(name, (ctx, input: Input) => fn(agentContext(ctx, settings), input), options);
  }

  /**
   * Registers an agent: a workflow whose body is the AI SDK tool loop, made durable. Give it a spec
   * (the `ToolLoopAgent` settings plus Cairn's), or an AI SDK `ToolLoopAgent` and Cairn's options.
   */
  agent(name: string, spec: AgentSpec): Agent;
  agent(name: string, agent: ToolLoopAgent<never, any, any>, options?: CairnAgentOptions): Agent;
  agent(name: string, spec: AgentSpec | ToolLoopAgent<never, any, any>, options: CairnAgentOptions = {}): Agent {
    const full = isToolLoopAgent(spec) ? fromToolLoopAgent(name, spec, options) : spec;
    validateAgentSpec(name, full);
    const agent = this.#runtime.workflow(name, agentBody(full, this.#agentSettings));
    this.#tracing.agent(name); // its runs are `invoke_agent` spans
    return agent;
  }

  /**
   * Registers a supervisor (OTP's supervisor, durably): a workflow whose runs start the children of
   * `spec` in order and restart them by its strategy, restart types and intensity; children are
   * workflows, agents or other supervisors. The spec is validated here (InvalidSpecError naming the
   * field and value). Start it like any workflow: `await sup.start(undefined, { id })`.
   */
  supervisor(name: string, spec: SupervisorSpec): Workflow<undefined, undefined> {
    const resolved = validateSupervisorSpec(name, spec, (workflow) => this.#supervisorSpecs.has(workflow.name));
    const workflow = this.#runtime.workflow(name, supervisorBody(resolved));
    this.#supervisorSpecs.set(name, resolved);
    return workflow as Workflow<undefined, undefined>;
  }

  /**
   * Declares a queue, kept in `cairn_queues`: its limits (concurrency, per-executor concurrency,
   * per-partition concurrency, rate limit), priorities and dispatch policy. Enqueue runs on it with
   * `workflow.enqueue(name, input, options)`. See README, "Queues".
   */
  queue(name: string, options: QueueOptions = {}): void {
    this.#runtime.queue(name, options);
  }

  /**
   * Declares a cron schedule: each tick of `cron` (in `timezone`) starts a run of `workflow` with
   * `input`, under the id `cron:<name>:<tick, ISO 8601 UTC>`. Kept in `cairn_schedules` from
   * `launch`; fired by whichever executors declare it, once per tick however many race (see
   * CronScheduler for the failure semantics, ScheduleSpec for `catchUp` after downtime). Bad input
   * throws an InvalidSpecError here, before anything is stored.
   */
  schedule<Input>(name: string, spec: ScheduleSpec<Input>): void {
    const runtime = this.#runtime;
    this.#cron.declare(validateSchedule(name, spec, (workflow) => runtime.isRegistered(workflow), runtime.clock.now()));
  }

  /** Migrates the database, registers this executor, recovers or resumes every run it may, and starts the schedules. */
  async launch(): Promise<void> {
    await this.#runtime.launch();
    await this.#cron.start();
  }

  /**
   * Stops this executor; its unfinished runs are taken over by the next executor that looks.
   * Returns within about 10 s even when the database is unreachable.
   */
  async shutdown(): Promise<void> {
    await this.#cron.stop();
    await this.#runtime.shutdown();
  }

  /** A handle on an existing run (nothing is read until you call a method). */
  run<Output = unknown>(id: string): RunHandle<Output> {
    return this.#runtime.run<Output>(id);
  }

  /** Cancels a run and its unfinished descendants; returns the ids cancelled. */
  cancel(runId: string): Promise<string[]> {
    return this.#runtime.cancel(runId);
  }

  /** Continues a failed or cancelled run from its journal; false if it was neither. */
  resume(runId: string): Promise<boolean> {
    return this.#runtime.resume(runId);
  }

  /**
   * A new run of the same workflow and input that reuses the journal of `runId` below `fromSeq`
   * and executes from there: replay a run up to a point, then take a different path.
   */
  fork<Output = unknown>(runId: string, options: ForkOptions): Promise<RunHandle<Output>> {
    return this.#runtime.fork<Output>(runId, options);
  }

  /**
   * Sends a message to a run from outside any workflow. Failure semantics: committed when this
   * resolves; with an idempotencyKey a retried send inserts nothing. A key is scoped to the
   * destination run: the same key sent to two runs delivers to both.
   */
  send(runId: string, topic: string, value: unknown, options: SendOptions = {}): Promise<void> {
    return this.#runtime.send(runId, topic, value, options);
  }

  /** Reads an event a run set with `ctx.setEvent`, waiting up to `timeoutMs` for it to appear. */
  getEvent<T = unknown>(runId: string, key: string, options: { timeoutMs?: number } = {}): Promise<T | undefined> {
    return this.#runtime.getEvent<T>(runId, key, options);
  }

  /**
   * The streamed model output of a run, readable from any process sharing the database: chunks as
   * they are written, resumable with `{ after: chunk.offset }`, ending when the run has finished.
   */
  async *stream(runId: string, options: { after?: string; signal?: AbortSignal } = {}): AsyncGenerator<StreamChunk> {
    yield* readStream(await this.#runtime.readyStore(), runId, options);
  }

  /**
   * Read-only SQL over the system tables (README, "The tables"): one statement with `$1, $2, ...`
   * params, which the database itself runs read-only — on SQLite only a statement SQLite reports as
   * a read, on PostgreSQL inside a `READ ONLY` transaction. Anything that writes is refused.
   */
  query(sql: string, params: unknown[] = []): Promise<QueryResult> {
    return this.#runtime.query(sql, params);
  }

  /**
   * Serves the dashboard (runs, journals, model calls, provenance, approvals, costs, SQL) on
   * 127.0.0.1 (`port` 4000 by default; 0 picks a free one) behind a token made for this start:
   * `url` carries it. Actions taken there (cancel, resume, fork, approve, deny) go through this
   * Cairn, as a client, and are recorded with who took them. `close()` stops serving.
   */
  async ui(options: UiOptions = {}): Promise<UiServer> {
    const runtime = this.#runtime;
    // Loaded on first use: an application that never serves the dashboard never loads its server.
    const { startUi } = await import("./ui/server.js");
    return startUi(
      {
        store: () => runtime.readyStore(),
        now: () => runtime.clock.now(),
        cancel: (runId) => this.cancel(runId),
        resume: (runId) => this.resume(runId),
        fork: (runId, fork) => this.fork(runId, fork),
        approve: (runId, toolCallId, decision) => this.approvals.approve(runId, toolCallId, decision),
        deny: (runId, toolCallId, decision) => this.approvals.deny(runId, toolCallId, decision),
      },
      options,
    );
  }
}
