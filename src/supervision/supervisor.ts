import { SupervisorShutdownError } from "../errors.js";
import { SHUTDOWN_TOPIC, type ChildExit, type ChildHandle, type SelectBranch, type WorkflowContext } from "../engine/context.js";
import { decide, type Decision, type SupervisorContext } from "./decisions.js";
import type { ResolvedChildSpec, ResolvedSpec, Shutdown } from "./spec.js";

/**
 * A supervisor is a durable workflow run (this file is its body), built on `ctx.select`: it starts
 * its children in order, then waits for the first of their exits or a control message, and acts
 * on it exactly as OTP's supervisor.erl does. Everything it decides is a journaled operation —
 * the children's starts (`ctx.child`, under ids derived from its own), the exits it sees
 * (`ctx.select`), the time of each restart (`ctx.now`), and a `supervise` record with a
 * `cairn_supervision` row for every decision — so its state (children, restart window) is rebuilt
 * by replay alone.
 *
 * Failure semantics: a supervisor whose process dies anywhere resumes on another executor (or the
 * same one restarted) from its journal: an exit it recorded is not seen twice; a restart whose
 * child start was recorded is not made again (the start and the child's row commit together, under
 * an id stable across replays); one not yet recorded is made once. The restart window holds the
 * recorded times, so it is the same after the crash.
 */

/** The reserved topic a supervisor reads control messages on (`cairn.supervisors.startChild`). */
export const CONTROL_TOPIC = "cairn:supervisor";

/** A control message: start a dynamic child of a simple_one_for_one supervisor. */
export interface StartChildMessage {
  type: "start_child";
  id: string;
  input: unknown;
}

interface Child {
  spec: ResolvedChildSpec;
  input: unknown;
  /** The child's first run id; a restart's is `<baseId>~<n>`. */
  baseId: string;
  starts: number;
  restartCount: number;
  runId: string | null;
  handle: ChildHandle<unknown> | null;
}

/** OTP's exit reasons for a child run's end: `normal`, `shutdown`, `killed`, or the error. */
export function exitReason(exit: ChildExit): string {
  if (exit.status === "succeeded") return "normal";
  if (exit.status === "cancelled") return "killed";
  const error = exit.error as { name?: unknown; message?: unknown } | null;
  if (error !== null && typeof error === "object" && error.name === "SupervisorShutdownError") return "shutdown";
  const text = error !== null && typeof error === "object" ? `${String(error.name)}: ${String(error.message)}` : String(exit.error);
  return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}

/** A transient child is restarted only after an abnormal exit: one that is neither `normal` nor `shutdown`. */
export function abnormal(reason: string): boolean {
  return reason !== "normal" && reason !== "shutdown";
}

export function supervisorBody(spec: ResolvedSpec): (ctx: WorkflowContext, input: unknown) => Promise<undefined> {
  return (ctx) => new SupervisorRun(ctx as SupervisorContext, spec).run();
}

class SupervisorRun {
  private readonly children: Child[] = [];
  /** Times of the restarts within the period, newest first (OTP's #state.restarts). */
  private restarts: number[] = [];
  private now = 0;
  private dynamic = 0;

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly spec: ResolvedSpec,
  ) {}

  /** Runs until cancelled, until it gives up (throws), or until its own supervisor asks it to stop (returns). */
  async run(): Promise<undefined> {
    this.now = await this.ctx.now();
    if (this.spec.strategy !== "simple_one_for_one") {
      for (const spec of this.spec.children) this.children.push(this.child(spec, spec.input, `${this.ctx.runId}/${spec.id}`));
      // Children start in order; each start is recorded before the next begins.
      for (const child of this.children) await this.start(child, "start", null);
    }
    for (;;) {
      const live = this.children.filter((c) => c.handle !== null);
      // Exits first, then a stop request from its own supervisor (OTP: exit(Sup, shutdown)), then control messages.
      const branches: SelectBranch[] = [...live.map((c) => c.handle!), { topic: SHUTDOWN_TOPIC }, { topic: CONTROL_TOPIC }];
      const won = await this.ctx.select("watch", branches);
      if (won.kind === "child") await this.exited(live[won.key]!, won);
      else if (won.kind === "message" && won.topic === SHUTDOWN_TOPIC) return this.shutdown();
      else if (won.kind === "message") await this.control(won.value);
    }
  }

  private child(spec: ResolvedChildSpec, input: unknown, baseId: string): Child {
    return { spec, input, baseId, starts: 0, restartCount: 0, runId: null, handle: null };
  }

  private async record(decision: Omit<Decision, "at">): Promise<void> {
    await decide(this.ctx, { ...decision, at: this.now });
  }

  private async start(child: Child, event: "start" | "restart", previousRunId: string | null): Promise<void> {
    const id = child.starts === 0 ? child.baseId : `${child.baseId}~${child.starts}`;
    child.starts++;
    child.handle = await this.ctx.child({ name: child.spec.workflow }, child.input, { id });
    child.runId = id;
    if (event === "restart") child.restartCount++;
    await this.record({ event, childId: child.spec.id, childRunId: id, previousRunId, restartCount: child.restartCount });
  }

  private async control(message: unknown): Promise<void> {
    const m = message as Partial<StartChildMessage> | null;
    if (m === null || typeof m !== "object" || m.type !== "start_child" || typeof m.id !== "string") return;
    const template = this.spec.children[0];
    // Only simple_one_for_one takes dynamic children; another supervisor ignores the request.
    if (this.spec.strategy !== "simple_one_for_one" || template === undefined) return;
    this.dynamic++;
    this.now = await this.ctx.now();
    const child = this.child(template, m.input, m.id);
    this.children.push(child);
    try {
      await this.start(child, "start", null);
    } catch (error) {
      // A request the supervisor cannot honour (an id another run already has) must not take the
      // supervisor down: the child is dropped, and the refusal recorded. Replay refuses it the same way.
      this.children.splice(this.children.indexOf(child), 1);
      await this.record({ event: "drop", childId: template.id, childRunId: m.id, reason: `start failed: ${String(error)}`, restartCount: 0 });
    }
  }

  private async exited(child: Child, exit: ChildExit): Promise<void> {
    const reason = exitReason(exit);
    child.handle = null;
    this.now = await this.ctx.now();
    await this.record({ event: "exit", childId: child.spec.id, childRunId: child.runId, reason, restartCount: child.restartCount });
    const restart = child.spec.restart === "permanent" || (child.spec.restart === "transient" && abnormal(reason));
    if (!restart) {
      if (child.spec.restart === "temporary") await this.drop(child);
      return;
    }
    const failedRunId = child.runId;
    // A failed restart counts as a restart too, and is tried again (OTP's try_again).
    for (;;) {
      this.now = await this.ctx.now();
      this.restarts = [this.now, ...this.restarts.filter((t) => t >= this.now - this.spec.periodMs)];
      if (this.restarts.length > this.spec.intensity) return this.giveUp(child);
      await this.backoff();
      try {
        return await this.restart(child, failedRunId);
      } catch (error) {
        if (error instanceof SupervisorShutdownError) throw error;
        await this.record({
          event: "exit",
          childId: child.spec.id,
          childRunId: null,
          reason: `start failed: ${String(error)}`,
          restartCount: child.restartCount,
        });
      }
    }
  }

  private async backoff(): Promise<void> {
    const backoff = this.spec.backoff;
    if (backoff === null) return;
    let delayMs = Math.min(backoff.maxMs, backoff.minMs * 2 ** (this.restarts.length - 1));
    if (backoff.randomFactor > 0) delayMs *= 1 + backoff.randomFactor * (await this.ctx.random());
    await this.ctx.sleep("backoff", Math.round(delayMs));
    this.now = await this.ctx.now();
  }

  /** The strategy: which children stop (in reverse start order) and start again (in order). */
  private async restart(child: Child, failedRunId: string | null): Promise<void> {
    const strategy = this.spec.strategy;
    if (strategy === "one_for_one" || strategy === "simple_one_for_one") return this.start(child, "restart", failedRunId);
    const at = this.children.indexOf(child);
    const affected = strategy === "one_for_all" ? [...this.children] : this.children.slice(at);
    for (const other of [...affected].reverse()) {
      if (other !== child && other.handle !== null) await this.stop(other);
    }
    // Temporary children stopped here are not restarted: their specs are gone (OTP's terminate_children).
    for (const other of affected) {
      if (!this.children.includes(other)) continue;
      await this.start(other, "restart", other === child ? failedRunId : other.runId);
    }
  }

  /** Stops a child by its spec's shutdown, recording how it ended. */
  private async stop(child: Child): Promise<void> {
    const handle = child.handle!;
    child.handle = null;
    const exit = await handle.cancel({ graceMs: graceMs(child.spec.shutdown) });
    this.now = await this.ctx.now();
    // Stopped on request (by the cancel, or by ending within the grace): OTP's reason `shutdown`.
    const reason = exit.status === "failed" ? exitReason(exit) : "shutdown";
    await this.record({ event: "stop", childId: child.spec.id, childRunId: child.runId, reason, restartCount: child.restartCount });
    if (child.spec.restart === "temporary") await this.drop(child);
  }

  private async drop(child: Child): Promise<void> {
    this.children.splice(this.children.indexOf(child), 1);
    await this.record({ event: "drop", childId: child.spec.id, childRunId: child.runId, restartCount: child.restartCount });
  }

  /** Asked to stop by its own supervisor: stop every child (in reverse start order), then end. */
  private async shutdown(): Promise<undefined> {
    this.now = await this.ctx.now();
    for (const other of [...this.children].reverse()) if (other.handle !== null) await this.stop(other);
    return undefined;
  }

  /** Restart intensity exceeded: stop every child (in reverse start order) and end with reason `shutdown`. */
  private async giveUp(child: Child): Promise<never> {
    const { intensity, periodMs } = this.spec;
    const reason = `reached_max_restart_intensity: more than ${intensity} restart(s) within ${periodMs} ms (child ${child.spec.id})`;
    await this.record({ event: "give_up", childId: child.spec.id, childRunId: child.runId, reason, restartCount: child.restartCount });
    for (const other of [...this.children].reverse()) if (other.handle !== null) await this.stop(other);
    throw new SupervisorShutdownError(`supervisor run ${this.ctx.runId} shut down: ${reason}`, { runId: this.ctx.runId });
  }
}

function graceMs(shutdown: Shutdown): number {
  return shutdown === "brutal_kill" ? 0 : shutdown === "infinity" ? Infinity : shutdown;
}
