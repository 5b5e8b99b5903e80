import { CLAIM_WAKE, CLAIMABLE_WAKE } from "../store/postgres/postgres-writes.js";

/**
 * What a wake-up says (PostgreSQL: the payload of its NOTIFY on `cairn_wake`), so that an
 * executor does only the pass it calls for instead of a whole one (claim, dispatch, the runs given
 * to it, the next timer) in every executor at every wake-up:
 *
 * - `queue:<name>` — a run was enqueued on that queue: a dispatch of the queues is all it asks for.
 * - `dispatched:<id>,<id>...` — a dispatch gave runs to these executors (not the dispatcher): they
 *   load them; nobody else has anything to do. Sent on each named executor's own channel (its
 *   session's, `cairn_executor_queues.wake_channel`), so nobody else even wakes; on the shared
 *   channel only for executors without one (older Cairns), named together.
 * - `claimable` — a write made a run claimable (a start, a message to a waiting run, a timer set in
 *   the past, a child's end waking its parent; the store's writes, CLAIMABLE_WAKE): a claim is all
 *   it asks for, not a dispatch of the queues.
 * - `claim` — the same, sent by a start to this executor alone (its own channel, CLAIM_WAKE): if it
 *   cannot take all that is claimable, it passes the wake-up on to everyone as `claimable`.
 * - anything else, or none (the channel was lost) — anything may have happened: a whole pass.
 *
 * A wake-up is a hint, never the only way work is found: every executor still polls.
 */
export type Wake = { kind: "queue" } | { kind: "dispatched"; executorIds: string[] } | { kind: "claimable"; passOn: boolean } | { kind: "any" };

export const QUEUE_WAKE_PREFIX = "queue:";
export const DISPATCHED_WAKE_PREFIX = "dispatched:";

/**
 * A NOTIFY payload is at most 8,000 bytes: a dispatch to more executors than fit says `any` (an
 * empty payload) instead, and every executor makes a whole pass.
 */
export const MAX_WAKE_PAYLOAD = 7_900;

export function wakeOf(payload: string | undefined): Wake {
  if (payload?.startsWith(QUEUE_WAKE_PREFIX)) return { kind: "queue" };
  if (payload?.startsWith(DISPATCHED_WAKE_PREFIX)) return { kind: "dispatched", executorIds: payload.slice(DISPATCHED_WAKE_PREFIX.length).split(",") };
  if (payload === CLAIMABLE_WAKE) return { kind: "claimable", passOn: false };
  if (payload === CLAIM_WAKE) return { kind: "claimable", passOn: true };
  return { kind: "any" };
}
