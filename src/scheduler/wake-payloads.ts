/**
 * What a queue's wake-up says (PostgreSQL: the payload of its NOTIFY on `cairn_wake`), so that an
 * executor does only the pass it calls for instead of a whole one (claim, dispatch, the runs given
 * to it, the next timer) in every executor at every wake-up:
 *
 * - `queue:<name>` — a run was enqueued on that queue: a dispatch of the queues is all it asks for.
 * - `dispatched:<id>,<id>...` — a dispatch gave runs to these executors (not the dispatcher): they
 *   load them; nobody else has anything to do.
 * - `dispatched:<id>,` newline `<token>` newline `<run row as JSON>` — a grant: an enqueue gave its
 *   new run to this executor (enqueue-function.ts), which starts the run from the row without
 *   reading it. The token proves the grant came from the enqueue (GrantGuard: anyone who can
 *   connect can NOTIFY); a grant without a valid token, or of a run loaded here already, is read.
 * - `dispatched:,mark:<key>:<n>` — an executor's marker (GrantGuard): nobody else has anything to do.
 * - anything else, or none (the channel was lost) — anything may have happened: a whole pass.
 *
 * Grants and markers are written as `dispatched:` so that an executor of an older version reads a
 * grant as a dispatch naming that executor, and a marker as a dispatch naming nobody, rather than
 * as anything (a whole pass in every executor, at every enqueue, during a rolling upgrade).
 *
 * A wake-up is a hint, never the only way work is found: every executor still polls.
 */
export type Wake =
  | { kind: "queue" }
  | { kind: "dispatched"; executorIds: string[] }
  | { kind: "granted"; executorId: string; token: string; row: string }
  | { kind: "mark"; key: string; marker: number }
  | { kind: "any" };

export const QUEUE_WAKE_PREFIX = "queue:";
export const DISPATCHED_WAKE_PREFIX = "dispatched:";
/** Between the executor's id and the token of a grant. */
export const GRANT_SEPARATOR = ",\n";
export const MARK_WAKE_PREFIX = `${DISPATCHED_WAKE_PREFIX},mark:`;

/**
 * A NOTIFY payload is at most 8,000 bytes: a dispatch to more executors than fit says `any` (an
 * empty payload) instead, and every executor makes a whole pass.
 */
export const MAX_WAKE_PAYLOAD = 7_900;

export function wakeOf(payload: string | undefined): Wake {
  if (payload === undefined) return { kind: "any" };
  if (payload.startsWith(QUEUE_WAKE_PREFIX)) return { kind: "queue" };
  if (payload.startsWith(MARK_WAKE_PREFIX)) {
    const at = payload.lastIndexOf(":");
    const marker = Number(payload.slice(at + 1));
    if (at > MARK_WAKE_PREFIX.length && Number.isSafeInteger(marker)) return { kind: "mark", key: payload.slice(MARK_WAKE_PREFIX.length, at), marker };
    return { kind: "dispatched", executorIds: [] };
  }
  if (payload.startsWith(DISPATCHED_WAKE_PREFIX)) {
    const body = payload.slice(DISPATCHED_WAKE_PREFIX.length);
    const grant = body.indexOf(GRANT_SEPARATOR);
    if (grant > 0) {
      const executorId = body.slice(0, grant);
      const rest = body.slice(grant + GRANT_SEPARATOR.length);
      const end = rest.indexOf("\n");
      // A grant cut short is still a dispatch naming its executor: it reads the run.
      if (end < 0) return { kind: "dispatched", executorIds: [executorId] };
      return { kind: "granted", executorId, token: rest.slice(0, end), row: rest.slice(end + 1) };
    }
    return { kind: "dispatched", executorIds: body.split(",") };
  }
  return { kind: "any" };
}
