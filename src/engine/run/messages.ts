import { FencedError, InvalidSpecError } from "../../errors.js";
import type { WriteOp } from "../../store/store.js";
import { fromStored, toStored } from "../../store/value/index.js";
import type { RecvOptions } from "../context.js";
import { validateName, validateRunId, validateTopic } from "../names.js";
import { assertUserSend } from "../reserved-topics.js";
import { never, type Began, type JournalCore } from "./journal-core.js";
import { perform, type DurableOperation } from "./operation.js";

/**
 * Messages and events: `ctx.send` (a message committed with the sender's record), `ctx.recv` (the
 * message consumed in the transaction that records it, or a durable wait), `ctx.setEvent`.
 */

interface Send {
  runId: string;
  value: unknown;
}

const sendOperation: DurableOperation<Send, undefined, void> = {
  validate(_run, topic, send) {
    validateRunId(send.runId);
    validateTopic(topic);
    assertUserSend(topic);
  },
  ...sendParts(),
};

/** The engine's own sends on a reserved topic (a child's shutdown request): the same, without the user's check. */
const reservedSendOperation: DurableOperation<Send, undefined, void> = sendParts();

export function sendReserved(run: JournalCore, runId: string, topic: string, value: unknown): Promise<void> {
  return perform(run, reservedSendOperation, { runId, value }, "send", topic);
}

function sendParts(): DurableOperation<Send, undefined, void> {
  return {
    act: () => undefined,
    record(run, began, send) {
      const message: WriteOp = {
        type: "message",
        message: {
          id: `${run.runId}:${began.seq}`,
          runId: send.runId,
          topic: began.name,
          body: toStored(send.value, run.where(began.seq, began.name)),
          sender: run.runId,
          createdAt: began.startedAt,
        },
      };
      began.also = [message];
      return run.record(began, began.startedAt, { output: toStored(send.runId, "") }, 1);
    },
    pokes: true,
    async refused(run, began, _send, step, error) {
      // The destination does not exist: the commit applied nothing; the refusal is the send's outcome.
      run.order.release(step.completion ?? -1);
      const failed = run.record(began, began.startedAt, { error }, 1);
      if (!(await run.writeAndDeliver(failed))) return never();
      throw error;
    },
  };
}

export function send(run: JournalCore, runId: string, topic: string, value: unknown): Promise<void> {
  return perform(run, sendOperation, { runId, value }, "send", topic);
}

const receiveOperation: DurableOperation<RecvOptions, unknown, unknown> = {
  validate: (run, topic) => run.refuseNestedWait("ctx.recv", topic),
  // A recorded wait with its deadline: the receive goes on, with that deadline.
  pending: (row) => row.status === "pending",
  check(_run, topic, options) {
    if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs < 0)) {
      throw new InvalidSpecError("timeoutMs", options.timeoutMs, `ctx.recv("${topic}") needs a finite timeout ≥ 0`);
    }
  },
  act: receive,
};

async function receive(run: JournalCore, began: Began, options: RecvOptions): Promise<unknown> {
  const row = began.row;
  if (row !== undefined && !run.live()) return never();
  const now = run.clock.now();
  const deadline =
    row !== undefined ? (JSON.parse(row.output ?? "null") as number | null) : options.timeoutMs === undefined ? null : now + options.timeoutMs;
  return lookInbox(run, began, deadline, now);
}

/** One look at the inbox: the message consumed with the record, the deadline's end, or a wait. */
async function lookInbox(run: JournalCore, began: Began, deadline: number | null, now = run.clock.now()): Promise<unknown> {
  const topic = began.name;
  const seq = began.seq;
  run.active++;
  /** The ordinal taken, once taken: a failure gives it back. */
  let taken: number | null = null;
  try {
    // A deadline that has passed goes in the order it fell due among the run's others (JournalCore.inDueOrder).
    if (deadline !== null && deadline <= now && !(await run.inDueOrder(deadline, seq))) return never();
    const completion = run.order.reserve();
    taken = completion;
    if (!(await run.landRiders())) return never();
    const result = await run.store.receive(run.fence, { runId: run.runId, seq, name: topic, topic, now, deadline, path: began.path, completion });
    const waiting = result.status === "waiting";
    run.watch.noted(seq, "recv", waiting ? "pending" : "succeeded", waiting ? null : completion, waiting ? null : now);
    if (result.status === "waiting") {
      run.order.release(completion);
      // A warm wake-up looks again as replay would (a pending row: its deadline, a live run).
      const again = () => (run.live() ? lookInbox(run, began, result.deadline) : never());
      return run.waitFor(seq, { wakeAt: result.deadline, topic, childRunId: null }, again);
    }
    if (!(await run.delivered(completion))) return never();
    return result.status === "received" ? fromStored(result.text) : undefined;
  } catch (error) {
    if (taken !== null) run.order.release(taken);
    if (error instanceof FencedError) return run.lostNever();
    return run.storeFailed(error);
  } finally {
    run.settleActive();
  }
}

export function recv<T>(run: JournalCore, topic: string, options: RecvOptions): Promise<T | undefined> {
  return perform(run, receiveOperation, options, "recv", topic) as Promise<T | undefined>;
}

const eventOperation: DurableOperation<unknown, undefined, void> = {
  validate: (_run, key) => validateName("event key", key),
  act: () => undefined,
  record(run, began, value) {
    const stored = toStored(value, run.where(began.seq, began.name));
    began.also = [{ type: "event", runId: run.runId, key: began.name, value: stored, at: began.startedAt }];
    // The value rides on the step too: a fork that inherits this step gets this value (see FORK_EVENTS).
    return run.record(began, began.startedAt, { output: stored }, 1);
  },
};

export function setEvent(run: JournalCore, key: string, value: unknown): Promise<void> {
  return perform(run, eventOperation, value, "event", key);
}
