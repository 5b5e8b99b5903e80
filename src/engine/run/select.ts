import { FencedError, InvalidSpecError, TimeoutError } from "../../errors.js";
import type { RunRow, StepRecord } from "../../store/store.js";
import { errorFromText, fromStored, toStored } from "../../store/value/index.js";
import type { ChildExit, SelectBranch, SelectBranches, Selected } from "../context.js";
import { fingerprintOf } from "../fingerprint.js";
import { validateRunId, validateTopic } from "../names.js";
import { never, type Began, type JournalCore } from "./journal-core.js";
import { perform, type DurableOperation } from "./operation.js";

/**
 * `ctx.select` and `ctx.race`: a durable wait for the first of several events — a child run's end,
 * a message on a topic, a timer — recorded as one journal entry (kind `select`), so replay hands
 * back the same winner whatever is ready by then.
 *
 * How it lives, on the recv pattern: the first look that finds nothing ready writes a pending row
 * holding the timers' deadlines (so a restart never extends them) and unloads the run, waiting on
 * every topic, child and the earliest deadline at once; each later look (after a wake-up, a crash,
 * a takeover) reads the inbox heads and the children's rows in one write transaction and, if a
 * branch is ready, records the winner — consuming a winning message in that same transaction.
 */

/** How often a select on a child that is not this run's own (a fork's inherited child) looks again. */
const FOREIGN_CHILD_POLL_MS = 2_000;

/** A branch, normalised: keys are the array index or the object key. */
type Branch =
  | { key: string | number; kind: "child"; childId: string }
  | { key: string | number; kind: "message"; topic: string }
  | { key: string | number; kind: "timer"; timeoutMs: number | null; until: number | null };

interface Call {
  branches: Branch[];
}

function normalise(name: string, spec: SelectBranches): Branch[] {
  if (spec === null || typeof spec !== "object")
    throw new InvalidSpecError("branches", spec, `ctx.select("${name}") needs an array or an object of branches`);
  const entries: [string | number, SelectBranch][] = Array.isArray(spec)
    ? (spec as readonly SelectBranch[]).map((b, i) => [i, b])
    : Object.entries(spec as Record<string, SelectBranch>);
  if (entries.length === 0) throw new InvalidSpecError("branches", spec, `ctx.select("${name}") needs at least one branch`);
  return entries.map(([key, b]) => branch(name, key, b));
}

function branch(name: string, key: string | number, b: SelectBranch): Branch {
  const where = `ctx.select("${name}") branch ${JSON.stringify(key)}`;
  if (b !== null && typeof b === "object") {
    if ("id" in b && typeof (b as { result?: unknown }).result === "function") {
      validateRunId(b.id, "child id");
      return { key, kind: "child", childId: b.id };
    }
    if ("topic" in b) {
      validateTopic(b.topic);
      return { key, kind: "message", topic: b.topic };
    }
    if ("timeoutMs" in b) {
      if (typeof b.timeoutMs !== "number" || !Number.isFinite(b.timeoutMs) || b.timeoutMs < 0) {
        throw new InvalidSpecError("timeoutMs", b.timeoutMs, `${where} needs a finite number of milliseconds ≥ 0`);
      }
      return { key, kind: "timer", timeoutMs: b.timeoutMs, until: null };
    }
    if ("until" in b) {
      const time = typeof b.until === "number" ? b.until : b.until instanceof Date ? b.until.getTime() : NaN;
      if (!Number.isFinite(time)) throw new InvalidSpecError("until", b.until, `${where} needs a valid date or time in ms`);
      return { key, kind: "timer", timeoutMs: null, until: time };
    }
  }
  throw new InvalidSpecError("branch", b, `${where} must be a child's handle (from ctx.child), { topic }, { timeoutMs } or { until }`);
}

/** What replay compares: which events the select waits for (not the timers' lengths). */
function fingerprint(branches: Branch[]): string {
  return fingerprintOf(branches.map((b) => [b.key, b.kind, b.kind === "child" ? b.childId : b.kind === "message" ? b.topic : ""]));
}

const selectOperation: DurableOperation<Call, unknown, unknown> = {
  validate: (run, name) => run.refuseNestedWait("ctx.select", name),
  // The wait began (its deadlines are recorded): the select goes on, with those deadlines.
  pending: (row) => row.status === "pending",
  act: look,
};

export function select<K>(run: JournalCore, name: string, spec: SelectBranches): Promise<Selected<K>> {
  const branches = normalise(name, spec);
  return perform(run, selectOperation, { branches }, "select", name, fingerprint(branches)) as Promise<Selected<K>>;
}

/** `select`, unwrapped: the winner's value, its error thrown, or a TimeoutError for a timer. */
export async function race<T>(run: JournalCore, name: string, spec: SelectBranches): Promise<T> {
  const won = await select<string | number>(run, name, spec);
  if (won.kind === "message") return won.value as T;
  if (won.kind === "timer") {
    throw new TimeoutError(`ctx.race("${name}") in run ${run.runId}: timer ${JSON.stringify(won.key)} won before any other branch`, {
      runId: run.runId,
    });
  }
  if (won.status === "succeeded") return won.value as T;
  throw won.error;
}

/** The child's end as a select reports it, or null while it runs. */
export function childExit(child: RunRow): ChildExit | null {
  if (child.status === "succeeded") return { childId: child.id, status: "succeeded", value: fromStored(child.output ?? '{"$c":"undefined"}') };
  if (child.status === "failed" || child.status === "cancelled") {
    return { childId: child.id, status: child.status, error: errorFromText(child.error ?? '{"name":"Error","message":"unknown"}') };
  }
  return null;
}

/** The first look: record the winner if a branch is ready, else (first time) record the deadlines, and wait. */
async function look(run: JournalCore, began: Began, call: Call): Promise<unknown> {
  const row = began.row;
  if (row !== undefined && !run.live()) return never();
  const now = run.clock.now();
  const deadlines: Record<string, number> = row !== undefined ? (fromStored(row.output) as Record<string, number>) : initialDeadlines(call.branches, now);
  return lookAt(run, began, call, deadlines, row === undefined, now);
}

/** One look at the branches; `first`: no pending row records the deadlines yet. */
async function lookAt(run: JournalCore, began: Began, call: Call, deadlines: Record<string, number>, first: boolean, now: number): Promise<unknown> {
  const topics = [...new Set(call.branches.flatMap((b) => (b.kind === "message" ? [b.topic] : [])))];
  const childIds = [...new Set(call.branches.flatMap((b) => (b.kind === "child" ? [b.childId] : [])))];
  run.active++;
  /** The ordinal taken, once taken: a failure gives it back. */
  let taken: number | null = null;
  let foreign = false;
  let written = null as StepRecord | null;
  try {
    // A deadline that has passed goes in the order it fell due among the run's others (JournalCore.inDueOrder).
    const overdue = passedDeadline(deadlines, now);
    if (overdue !== null && !(await run.inDueOrder(overdue, began.seq))) return never();
    const completion = run.order.reserve();
    taken = completion;
    if (!(await run.landRiders())) return never();
    const won = await run.store.settleSelect<Selected<string | number> | null>(run.fence, {
      runId: run.runId,
      topics,
      childRunIds: childIds,
      decide: ({ messages, children }) => {
        const byId = new Map(children.map((c) => [c.id, c]));
        foreign = children.some((c) => c.parentId !== run.runId);
        for (const b of call.branches) {
          let selected: Selected<string | number> | null = null;
          let consume: string | null = null;
          if (b.kind === "child") {
            const child = byId.get(b.childId);
            const exit = child === undefined ? null : childExit(child);
            if (exit !== null) selected = { key: b.key, kind: "child", ...exit };
          } else if (b.kind === "message") {
            const message = messages.get(b.topic);
            if (message !== undefined) {
              selected = { key: b.key, kind: "message", topic: b.topic, value: fromStored(message.body) };
              consume = message.id;
            }
          } else if ((deadlines[String(b.key)] ?? Infinity) <= now) {
            selected = { key: b.key, kind: "timer" };
          }
          if (selected !== null) {
            const step = run.record(began, now, { output: toStored(selected, run.where(began.seq, began.name)) }, 1, completion);
            written = step;
            return { step, consume, result: selected };
          }
        }
        // Nothing ready: the first look records the deadlines (a pending row, no completion yet).
        written = first ? pendingRecord(run, began, now, deadlines) : null;
        return { step: written, consume: null, result: null };
      },
    });
    if (written !== null) run.watch.step(written);
    if (won === null) {
      run.order.release(completion);
      const times = Object.values(deadlines);
      if (foreign) times.push(now + FOREIGN_CHILD_POLL_MS);
      const wakeAt = times.length === 0 ? null : Math.min(...times);
      // A warm wake-up looks again as replay would (the pending row's deadlines, a live run).
      const again = () => (run.live() ? lookAt(run, began, call, deadlines, false, run.clock.now()) : never());
      return run.waitFor(began.seq, { wakeAt, topic: null, childRunId: null, topics, childRunIds: childIds }, again);
    }
    if (!(await run.delivered(completion))) return never();
    return won;
  } catch (error) {
    if (taken !== null) run.order.release(taken);
    if (error instanceof FencedError) return run.lostNever();
    return run.storeFailed(error);
  } finally {
    run.settleActive();
  }
}

/** The earliest timer deadline that has passed by `now`, or null. */
function passedDeadline(deadlines: Record<string, number>, now: number): number | null {
  let earliest: number | null = null;
  for (const at of Object.values(deadlines)) if (at <= now && (earliest === null || at < earliest)) earliest = at;
  return earliest;
}

function initialDeadlines(branches: Branch[], now: number): Record<string, number> {
  const deadlines: Record<string, number> = {};
  for (const b of branches) {
    if (b.kind === "timer") deadlines[String(b.key)] = b.until ?? now + (b.timeoutMs ?? 0);
  }
  return deadlines;
}

function pendingRecord(run: JournalCore, began: Began, now: number, deadlines: Record<string, number>): StepRecord {
  return { ...run.record(began, now, { output: toStored(deadlines, "") }, 1, null), status: "pending", finishedAt: null };
}
