import { InvalidSpecError } from "../../errors.js";
import type { WriteOp } from "../../store/store.js";
import { fromStored, toStored } from "../../store/value/index.js";
import { never, type Began, type JournalCore } from "./journal-core.js";
import { perform, type DurableOperation } from "./operation.js";

/**
 * Timers: `ctx.sleep` and `ctx.sleepUntil`. The wake-up time is recorded when the sleep begins (a
 * record without a completion: the workflow has not seen the sleep end); the run unloads until then,
 * and when the sleep ends its completion is recorded — at the workflow's top, before the run's next
 * operation or with its unload or end (JournalCore.ride: a crash before it replays the sleep, whose
 * time has passed, into the same end). Inside a step's function the run stays loaded anyway, so the
 * sleep happens in memory.
 */

/** A sleep's live part; `wakeTime` turns the call into the time to wake at, when it goes live. */
function timer(wakeTime: (run: JournalCore, call: number) => number): DurableOperation<number, void, void> {
  return {
    // A recorded start without a completion: the sleep had begun; it goes on to its recorded time.
    pending: (row) => row.completion == null,
    act(run, began, call) {
      if (began.row !== undefined) return sleepTo(run, began, fromStored(began.row.output) as number);
      return startSleep(run, began, wakeTime(run, call));
    },
  };
}

const sleepFor = timer((run, delayMs) => run.clock.now() + delayMs);
const sleepUntilTime = timer((_run, time) => time);

export function sleep(run: JournalCore, name: string, delayMs: number): Promise<void> {
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new InvalidSpecError("delayMs", delayMs, `ctx.sleep("${name}") needs a finite number of milliseconds ≥ 0`);
  }
  return perform(run, sleepFor, delayMs, "sleep", name);
}

export function sleepUntil(run: JournalCore, name: string, until: Date | number): Promise<void> {
  const time = typeof until === "number" ? until : until.getTime();
  if (!Number.isFinite(time)) throw new InvalidSpecError("until", until, `ctx.sleepUntil("${name}") needs a valid date`);
  return perform(run, sleepUntilTime, time, "sleep", name);
}

async function startSleep(run: JournalCore, began: Began, wakeAt: number): Promise<void> {
  const now = run.clock.now();
  // The wake-up time is recorded now; when the sleep ends is recorded when it does (see sleepTo).
  const step = run.record(began, now, { output: toStored(wakeAt, "") }, 1, null);
  run.active++;
  try {
    if (!(await run.write([{ type: "step", step }]))) return never();
  } finally {
    run.settleActive();
  }
  return sleepTo(run, began, wakeAt);
}

/** Ends a recorded sleep whose time has come (recording when), or waits for it durably. */
async function sleepTo(run: JournalCore, began: Began, wakeAt: number): Promise<void> {
  if (run.clock.now() < wakeAt) {
    if (!began.nested) return run.waitFor(began.seq, { wakeAt, topic: null, childRunId: null }, () => sleepTo(run, began, wakeAt));
    // Inside a step the run stays loaded anyway: sleep in memory (a crash re-runs the step, whose
    // replay of this sleep then waits only for what remains).
    run.active++;
    try {
      await run.clock.sleep(wakeAt - run.clock.now(), run.stopSignal.signal);
    } catch {
      return never();
    } finally {
      run.settleActive();
    }
  }
  if (!run.live()) return never();
  run.active++;
  try {
    // At the top, ends whose times have passed go in the order they fell due (JournalCore.inDueOrder).
    const inOrder = began.nested || run.inDueOrder(wakeAt, began.seq);
    if (inOrder !== true && !(await inOrder)) return never();
    const completion = run.order.reserve();
    const ended: WriteOp = { type: "completion", runId: run.runId, seq: began.seq, completion };
    // At the workflow's top, when nothing else of the run acts or waits, that the sleep ended is
    // committed before the run's next operation or with its end (JournalCore.ride): a crash that
    // loses it replays the sleep, alone past its time, into the same end. Beside other operations —
    // which a replay could end at once too (another sleep, a select's timer or message, a child's
    // end) — it is committed before the workflow sees it, so the order the ends were seen in is in
    // the journal and not left to the replay. Inside a step it is recorded at once, as the step's
    // own records are.
    if (!began.nested && run.aloneWith(began.seq)) run.ride(ended);
    else if (!(await run.write([ended]))) return never();
    const delivered = run.delivered(completion);
    if (delivered !== true && !(await delivered)) return never();
  } finally {
    run.settleActive();
  }
}
