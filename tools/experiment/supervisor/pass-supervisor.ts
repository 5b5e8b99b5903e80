/**
 * The supervisor of one pass: starts a worker per slot, plays the approver, and kills and restarts
 * workers as the fault schedule says:
 *
 * - a worker prints `hang <point>` at a scheduled point → the point is recorded as fired, the worker
 *   is SIGKILLed and its slot started again (for the environment restart: every worker, then every slot);
 * - the approver sees a scheduled task's approval request → the worker that last ran the task is
 *   SIGKILLed and started again, and the request is approved after its delay as any other.
 *
 * It returns when every task has finished (or failed), or at the pass timeout.
 */

import { appendFileSync } from "node:fs";
import type { ArmSession, ReplayOutcome } from "../arms/arm.js";
import { points, type Fault } from "../fault-schedule.js";
import type { Marker } from "../markers.js";
import type { PassPlan, PassRecord, TimedMarker } from "../pass-record.js";
import type { WorkerConfig } from "../worker/worker-config.js";
import { isResolved, taskIds } from "../workload.js";
import { Approver, type PendingApproval } from "./approver.js";
import { WorkerProcess } from "./worker-process.js";

/** An address nothing listens on: a replay must not reach the model or the services. */
const UNREACHABLE = "http://127.0.0.1:9";
const APPROVAL_POLL_MS = 50;
/** The pause between killing every process and starting them again (the environment restart). */
const ENVIRONMENT_RESTART_PAUSE_MS = 300;
/** Unexpected worker exits tolerated per slot before the slot is given up. */
const MAX_UNEXPECTED_EXITS = 3;

export interface Endpoints {
  llmUrl: string;
  servicesUrl: string;
  firedFile: string;
  markersFile: string;
  killsFile: string;
}

export class PassSupervisor {
  private readonly tasks: number[];
  private readonly unfinished: Set<number>;
  private readonly pending = new Map<string, Fault>();
  private readonly workers = new Map<number, WorkerProcess>();
  /** Workers this supervisor killed on purpose (their exit is expected). */
  private readonly killed = new Set<WorkerProcess>();
  private readonly lastSlot = new Map<number, number>();
  private readonly unexpectedExits = new Map<number, number>();
  private firing: Promise<void> = Promise.resolve();
  private finish: (() => void) | undefined;
  private readonly record: PassRecord;

  constructor(
    private readonly plan: PassPlan,
    private readonly session: ArmSession,
    private readonly endpoints: Endpoints,
  ) {
    this.tasks = taskIds(plan.settings.tasks);
    this.unfinished = new Set(this.tasks);
    for (const fault of plan.faults) this.pending.set(fault.point, fault);
    this.record = {
      arm: plan.arm.name,
      kind: plan.kind,
      tasks: this.tasks,
      startedAt: Date.now(),
      endedAt: 0,
      timedOut: false,
      markers: [],
      kills: [],
      fired: new Map(),
      outcomes: new Map(),
      requests: [],
      ledger: [],
      approvalRequests: 0,
      workerStarts: 0,
      problems: [],
    };
  }

  async run(): Promise<PassRecord> {
    const done = new Promise<void>((resolve) => (this.finish = resolve));
    const approver = new Approver(this.session.desk, {
      delayMs: this.plan.settings.approvalDelayMs,
      pollMs: APPROVAL_POLL_MS,
      onRequested: (request) => this.approvalRequested(request),
      onError: (error) => this.problem(`approver: ${error instanceof Error ? error.message : String(error)}`),
    });
    this.record.startedAt = Date.now();
    for (let slot = 0; slot < this.plan.settings.workers; slot++) this.startSlot(slot);
    approver.start();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.record.timedOut = true;
        resolve();
      }, this.plan.settings.passTimeoutMs);
    });
    await Promise.race([done, timeout]);
    clearTimeout(timer);
    this.record.endedAt = Math.max(0, ...[...this.record.outcomes.values()].map((o) => o.at)) || Date.now();
    await approver.stop();
    await this.firing;
    await this.stopWorkers();
    return this.record;
  }

  /** Starts a replay worker (model and services unreachable) and returns its verdict. */
  async replay(fields: Partial<WorkerConfig> & { tasks: number[] }): Promise<ReplayOutcome> {
    let verdict: Extract<Marker, { e: "replay" }> | undefined;
    let liveCalls = 0;
    const config: WorkerConfig = {
      ...this.baseConfig(this.plan.settings.workers, [], []),
      llmUrl: `${UNREACHABLE}/v1`,
      servicesUrl: UNREACHABLE,
      hang: [],
      ...fields,
      mode: "replay",
      awaitTasks: [],
    };
    const worker = new WorkerProcess(this.plan.workerPath, config, (marker) => {
      if (marker.e === "replay") verdict = marker;
      if (marker.e === "model-start" || marker.e === "tool-start") liveCalls++;
    });
    const exit = await Promise.race([worker.exited, new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 60_000).unref())]);
    if (exit === "timeout") await worker.kill();
    if (verdict === undefined) return { runs: 0, identical: 0, liveCalls, detail: `the replay worker gave no verdict: ${worker.tail(3) || String(exit)}` };
    return { runs: verdict.runs, identical: verdict.identical, detail: verdict.detail, liveCalls };
  }

  private baseConfig(slot: number, tasks: number[], awaitTasks: number[]): WorkerConfig {
    return {
      runtime: this.session.runtime,
      mode: "run",
      slot,
      dir: this.plan.dir,
      llmUrl: this.endpoints.llmUrl,
      servicesUrl: this.endpoints.servicesUrl,
      tasks,
      awaitTasks,
      hang: [...this.plan.faults.map((f) => f.point)],
      firedFile: this.endpoints.firedFile,
      approvalPollMs: APPROVAL_POLL_MS,
      startAt: this.record.startedAt,
      arrivalIntervalMs: this.plan.settings.arrivalIntervalMs,
    };
  }

  /** Starts a worker in `slot` if the slot has work left; returns whether it did. */
  private startSlot(slot: number): boolean {
    const { tasks, awaitTasks } = this.session.tasksFor(
      slot,
      [...this.unfinished].sort((a, b) => a - b),
    );
    if (awaitTasks.length === 0) return false;
    const config = { ...this.baseConfig(slot, tasks, awaitTasks), ...this.session.workerFields(slot) };
    const worker = new WorkerProcess(this.plan.workerPath, config, (marker, w) => this.onMarker(marker, w));
    this.record.workerStarts++;
    this.workers.set(slot, worker);
    void worker.exited.then(({ code, signal }) => this.onExit(worker, code, signal));
    return true;
  }

  private onExit(worker: WorkerProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.killed.has(worker) || this.workers.get(worker.slot) !== worker) return;
    if (code === 0) return;
    // Not killed by us: a worker that failed on its own. Restart it, within limits.
    const exits = (this.unexpectedExits.get(worker.slot) ?? 0) + 1;
    this.unexpectedExits.set(worker.slot, exits);
    this.problem(`worker in slot ${worker.slot} (pid ${worker.pid}) exited with ${signal ?? `code ${code}`}: ${worker.tail(3)}`);
    if (exits <= MAX_UNEXPECTED_EXITS && this.unfinished.size > 0) this.startSlot(worker.slot);
  }

  private onMarker(marker: Marker, worker: WorkerProcess): void {
    const timed: TimedMarker = { at: Date.now(), slot: worker.slot, pid: worker.pid, marker };
    this.record.markers.push(timed);
    appendFileSync(this.endpoints.markersFile, `${JSON.stringify(timed)}\n`);
    switch (marker.e) {
      case "model-start":
      case "tool-start":
      case "effect-done":
        this.lastSlot.set(marker.task, worker.slot);
        return;
      case "hang": {
        this.lastSlot.set(marker.task, worker.slot);
        const fault = this.pending.get(marker.point);
        if (fault !== undefined) this.fire(fault, worker);
        return;
      }
      case "task-done":
      case "task-failed":
        this.settle(
          marker.task,
          marker.e === "task-done" && isResolved(marker.task, marker.text),
          marker.e === "task-done" ? marker.text : marker.error,
          marker.t,
        );
        return;
      case "error":
        this.problem(`worker in slot ${worker.slot} (pid ${worker.pid}): ${marker.message.split("\n")[0]}`);
        return;
      default:
        return;
    }
  }

  private settle(task: number, ok: boolean, text: string, at: number): void {
    if (!this.unfinished.has(task)) return;
    this.unfinished.delete(task);
    this.record.outcomes.set(task, { ok, text, at });
    this.progress();
    if (this.unfinished.size === 0) this.finish?.();
  }

  private async approvalRequested(request: PendingApproval): Promise<void> {
    const fault = this.pending.get(points.approval(request.task));
    if (fault === undefined) return;
    const slot = this.lastSlot.get(request.task);
    this.fire(fault, slot === undefined ? undefined : this.workers.get(slot));
    await this.firing;
  }

  /**
   * Fires a fault: records the point as fired (before the kill, so the next worker passes it),
   * SIGKILLs the victims, and starts their slots again. Serialized: kills never interleave.
   */
  private fire(fault: Fault, worker: WorkerProcess | undefined): void {
    this.pending.delete(fault.point);
    appendFileSync(this.endpoints.firedFile, `${fault.point}\n`);
    const at = Date.now();
    this.record.fired.set(fault.id, at);
    this.firing = this.firing.then(async () => {
      const restart = fault.kind === "environment-restart";
      const victims = restart ? [...this.workers.values()].filter((w) => w.alive) : worker === undefined ? [] : [worker];
      const slots = new Set(victims.map((w) => w.slot));
      const affected = [...this.unfinished].filter((task) => {
        const slot = this.lastSlot.get(task);
        return slot !== undefined && (restart || slots.has(slot));
      });
      for (const victim of victims) this.killed.add(victim);
      await Promise.all(victims.map((victim) => victim.kill()));
      if (victims.length > 0) {
        const kill = { at, faultId: fault.id, kind: fault.kind, slots: [...slots], pids: victims.map((v) => v.pid), affected };
        this.record.kills.push(kill);
        appendFileSync(this.endpoints.killsFile, `${JSON.stringify(kill)}\n`);
      }
      this.progress();
      if (restart) await new Promise((resolve) => setTimeout(resolve, ENVIRONMENT_RESTART_PAUSE_MS));
      const toStart = restart ? [...Array(this.plan.settings.workers).keys()] : [...slots];
      for (const slot of toStart) {
        const current = this.workers.get(slot);
        // A slot whose worker another fault already replaced needs no second start.
        if (current !== undefined && current.alive && !this.killed.has(current)) continue;
        if (this.unfinished.size > 0) this.startSlot(slot);
      }
    });
  }

  private async stopWorkers(): Promise<void> {
    const live = [...this.workers.values()].filter((w) => w.alive);
    // Workers exit by themselves once their tasks are over; give them a moment, then kill.
    await Promise.race([Promise.all(live.map((w) => w.exited)), new Promise((resolve) => setTimeout(resolve, 5000))]);
    for (const worker of live) this.killed.add(worker);
    await Promise.all(live.map((w) => w.kill()));
  }

  private progress(): void {
    this.plan.onProgress({
      finished: this.record.outcomes.size,
      tasks: this.tasks.length,
      faultsFired: this.record.fired.size,
      faults: this.plan.faults.length,
    });
  }

  private problem(text: string): void {
    this.record.problems.push(text);
  }
}
