import type { Statement } from "./connection.js";
import type { SqlDialect } from "./dialect.js";

/**
 * The statements both backends run, each written once (`$n` placeholders) over the dialect. The
 * write path's hot statements (a step, a run, a finish) stay with each backend: there the shape of
 * the round trips differs (SQLite: several in-process statements; PostgreSQL: one statement with
 * the payload in a CTE, and NOTIFY), and that shape is what makes them fast.
 */

/**
 * The columns of the core's tables this version reads, named instead of `*`. On PostgreSQL every
 * Cairn statement is prepared by name and kept per session; one whose result is `r.*` fails with
 * 0A000 "cached plan must not change result type" as soon as another process adds a column to the
 * table — a newer Cairn's migration in a rolling upgrade, while this version's executors still
 * run — and fails again on every use in that session. Named columns keep each result's type: the
 * server plans the statement again and it goes on. (What slips past this — a layer's own `*` —
 * is a transient error that drops the session: store-errors.ts.) test/store/rolling-upgrade.test.ts
 * checks each list against the table its migrations make.
 */
export const RUN_COLUMNS: readonly string[] = columnNames(`
  id workflow status input input_hash output output_hash error parent_id parent_seq root_id
  app_version executor_id wake_at deadline_at created_at updated_at finished_at recoveries
  forked_from forked_from_seq recovery_base wake_channel held_by
`);
export const STEP_COLUMNS: readonly string[] = columnNames(`
  run_id seq name kind status output output_hash error started_at finished_at attempts path
  completion fingerprint
`);
export const EXECUTOR_COLUMNS: readonly string[] = columnNames(`
  id hostname pid backend_pid app_version started_at heartbeat_at pid_namespace capacity
  wake_channel workflows
`);

/** The names in `list`, separated by white space. */
function columnNames(list: string): readonly string[] {
  return list.trim().split(/\s+/);
}

/** `alias.column, ...` of `columns` (a select list in place of `alias.*`). */
export function columnsOf(alias: string, columns: readonly string[]): string {
  return columns.map((column) => `${alias}.${column}`).join(", ");
}

/** A run with its input and output resolved from the payload table. */
export const RUN_SELECT = `SELECT ${columnsOf("r", RUN_COLUMNS)}, COALESCE(r.input, pi.body) AS input_text, COALESCE(r.output, po.body) AS output_text
  FROM cairn_runs r
  LEFT JOIN cairn_payloads pi ON pi.hash = r.input_hash
  LEFT JOIN cairn_payloads po ON po.hash = r.output_hash`;

/** What a claim sets on each run it takes: a run taken over from a dead executor counts a recovery. */
export const CLAIM_SET = `recoveries = recoveries + (CASE WHEN status = 'running' THEN 1 ELSE 0 END),
  status = 'running', executor_id = $1, wake_at = NULL, updated_at = $3`;

/**
 * The runs a claim may take ($1 executor, $2 app version or null, $3 now, $4 dead executors, $5
 * limit, $6 workflows), as three branches:
 *
 * 1. `orphaned`: running runs whose executor is gone, or judged dead on a heartbeat that has not
 *    moved since — work already under way that nobody runs — oldest first;
 * 2. `due`: waiting runs whose timer fell due, in the order they fell due (`wake_at`: the claim
 *    index, status, app_version, wake_at, walked in its own order) — with `parkerFirst`, only
 *    the claimant's own until others' are overdue (see ParkerFirst);
 * 3. `fresh`: enqueued runs no layer holds (`held`: predicates over `cairn_runs` from the layers'
 *    `holdsRuns` hooks, extension.ts — a queued run waits for its queue's dispatch), oldest first.
 *
 * A claim takes orphaned runs first, then due and fresh runs together in the order they became
 * claimable (a due run's `wake_at`, a fresh run's `created_at`): first come, first served, so a
 * backlog of timers cannot starve new runs, nor new runs the timers. Each branch is read no further
 * than the limit (see `claimIds` and postgres-claim.ts). Before, one `ORDER BY created_at` over the
 * OR of the three read and sorted every candidate at each claim — with 10,000 runs falling due at
 * once, each of 20 claims sorted the thousands still due — and served a run that had slept the
 * longest first, not the one due the longest.
 *
 * `allVersions` ($2 is null): a separate statement, since an `$2 IS NULL OR app_version = $2` keeps
 * the planner from walking the claim index in order.
 */
export function claimBranches(
  d: SqlDialect,
  held: readonly string[],
  allVersions: boolean,
  parkerFirst?: ParkerFirst,
): Record<"orphaned" | "due" | "fresh", ClaimBranch> {
  const ours = `${allVersions ? `${d.text("$2")} IS NULL` : "app_version = $2"} AND ${d.inList("workflow", "$6")}`;
  const free = held.length === 0 ? "" : ` AND NOT (${held.map((h) => `(${h})`).join(" OR ")})`;
  return {
    orphaned: {
      where: `${ours} AND status = 'running' AND (executor_id IS NULL
        OR executor_id IN (
          SELECT e.id FROM cairn_executors e JOIN ${d.deadExecutorTable("$4")} d
            ON e.id = d.id AND e.heartbeat_at = d.heartbeat_at)
        OR executor_id NOT IN (SELECT id FROM cairn_executors))`,
      order: "created_at",
    },
    due: {
      where: `${ours} AND status = 'waiting' AND wake_at <= $3${parkerFirst === undefined ? "" : ` AND ${parkedHereOrLong(parkerFirst)}`}`,
      order: "wake_at",
    },
    // `held_by IS NULL`: read off `cairn_runs_fresh`, which holds no run a layer marked as its own.
    fresh: { where: `${ours} AND status = 'enqueued' AND held_by IS NULL${free}`, order: "created_at" },
  };
}

/**
 * Due runs go to the executor that parked them first: it holds them warm (warm-runs.ts), so it
 * continues them from memory where another executor would replay their journals. A run's row
 * names its parker (`cairn_runs.wake_channel`, written by `suspend`) as the parker's executor row
 * does (`cairn_executors.wake_channel`): on PostgreSQL its session's wake channel, on SQLite a name
 * its store made at open (Store.ownParker). Every executor arms its timer at its own runs'
 * wake-ups, and at others' `graceMs` later (Store.nextWakeAt); its claim takes its own due runs,
 * runs parked by no executor, and others' runs overdue by `graceMs` — the parker is then dead,
 * frozen, full, or its wake-up was lost. Before, every executor's timer fell at every run's
 * wake-up, the claim went to whichever came first, and with N executors a run continued warm 1
 * time in N. `channel`: the parameter holding the claimant's own name (null while its PostgreSQL
 * session is lost: then it counts as anyone's).
 */
export interface ParkerFirst {
  channel: string;
  graceMs: number;
}

/**
 * How long a due run waits for the executor that parked it before any executor may claim it
 * (ParkerFirst): what a run whose parker died, froze or is full waits on top of its wake-up time.
 * A live parker with room claims at the wake-up itself (its own timer), within milliseconds.
 */
export const PARKER_GRACE_MS = 100;

/** The claim's ParkerFirst on both backends: `$7` holds the claimant's own name (Store.ownParker). */
export const PARKER_FIRST: ParkerFirst = { channel: "$7", graceMs: PARKER_GRACE_MS };

/** When a waiting run falls due for the executor whose own name is `own` (SQL): its own and unparked runs at their wake-up, others' the grace later. */
const parkerFirstWake = (own: string) => `min(CASE WHEN ${claimableAtOnce(own)} THEN wake_at ELSE wake_at + ${PARKER_GRACE_MS} END)`;

/** The due run fell due `graceMs` ago ($3: now), or the claimant may have it at once (`claimableAtOnce`). */
function parkedHereOrLong({ channel, graceMs }: ParkerFirst): string {
  return `(${claimableAtOnce(channel)} OR wake_at <= $3 - ${graceMs})`;
}

/**
 * A waiting run the executor whose own channel is `channel` (SQL) may claim as soon as it falls
 * due: it parked the run, nobody did, or no executor row shows its parker any more (it shut down,
 * was removed as dead, or re-registered under another session — the wake-ups to a run woken by a
 * message or a child go by the same rule, postgres-writes.ts `wokenWake`). Any other it may claim
 * `PARKER_GRACE_MS` after. `channel` null (a session being reopened) matches no parker.
 */
export function claimableAtOnce(channel: string): string {
  return `(wake_channel IS NULL OR wake_channel = ${channel} OR wake_channel NOT IN (SELECT e.wake_channel FROM cairn_executors e WHERE e.wake_channel IS NOT NULL))`;
}

/** One kind of claimable run: which rows of `cairn_runs`, and the column it is taken in the order of (when it became claimable). */
export interface ClaimBranch {
  where: string;
  order: string;
}

/** Whether any run is claimable (PostgreSQL's look before it claims): each branch stops at its first row. */
export function anyClaimable(d: SqlDialect, held: readonly string[], allVersions: boolean, parkerFirst?: ParkerFirst): string {
  const { orphaned, due, fresh } = claimBranches(d, held, allVersions, parkerFirst);
  return [orphaned, due, fresh].map((b) => `EXISTS (SELECT 1 FROM cairn_runs WHERE ${b.where})`).join(" OR ");
}

/**
 * The ids a claim takes, without locking (SQLite, whose one writer is the claim's transaction): at
 * most `$5` — orphaned runs, then due and fresh runs by the time they became claimable — each branch
 * read no further than `$5` rows.
 */
export function claimIds(d: SqlDialect, held: readonly string[], allVersions: boolean, parkerFirst?: ParkerFirst): string {
  const { orphaned, due, fresh } = claimBranches(d, held, allVersions, parkerFirst);
  const ranked = (b: ClaimBranch, rank: number, alias: string) =>
    `SELECT id, ${rank} AS rank, k FROM (SELECT id, ${b.order} AS k FROM cairn_runs WHERE ${b.where} ORDER BY ${b.order} LIMIT $5) ${alias}`;
  return `SELECT id FROM (${ranked(orphaned, 0, "o")} UNION ALL ${ranked(due, 1, "w")} UNION ALL ${ranked(fresh, 1, "f")}) c
    ORDER BY rank, k LIMIT $5`;
}

export function statements(d: SqlDialect) {
  const s = (name: string, text: string): Statement => ({ name: `cairn_${name}`, text });
  return {
    getRun: s("get_run", `${RUN_SELECT} WHERE r.id = $1`),
    listRuns: s(
      "list_runs",
      `${RUN_SELECT} WHERE (${d.text("$1")} IS NULL OR r.status = $1) AND (${d.text("$2")} IS NULL OR r.workflow = $2)
       AND (${d.text("$3")} IS NULL OR r.parent_id = $3) ORDER BY r.created_at DESC, r.id LIMIT $4`,
    ),
    journal: s(
      "journal",
      `SELECT ${columnsOf("s", STEP_COLUMNS)}, COALESCE(s.output, p.body) AS output_text FROM cairn_steps s
       LEFT JOIN cairn_payloads p ON p.hash = s.output_hash WHERE s.run_id = $1 ORDER BY s.seq`,
    ),
    // Several runs' journals in one read (a claimed batch): by run, each in seq order.
    journalsIn: s(
      "journals_in",
      `SELECT ${columnsOf("s", STEP_COLUMNS)}, COALESCE(s.output, p.body) AS output_text FROM ${d.rowsOfEach("$1", "cairn_steps", "run_id", "s")}
       LEFT JOIN cairn_payloads p ON p.hash = s.output_hash ORDER BY s.run_id, s.seq`,
    ),
    getEvent: s(
      "get_event",
      `SELECT COALESCE(e.value, p.body) AS v FROM cairn_events e LEFT JOIN cairn_payloads p ON p.hash = e.value_hash
       WHERE e.run_id = $1 AND e.key = $2`,
    ),
    // When this executor may next claim a waiting run (ParkerFirst): for one version ($1 version,
    // $2 its own name, $3 workflows), read off the claim index (status, app_version, wake_at) at its
    // first 32 waiting entries, not all of them — a run of ours behind 32 of others' falling due
    // within the grace is missed here, and the timer falls at the first of theirs plus the grace at
    // the latest. (A run held warm, the only kind going to its parker first gains anything, has a
    // timer of its own besides: warm-runs.ts.) Two statements: with `$1 IS NULL OR` the planner
    // could not use the index's order, and a bare MIN() it sometimes planned as a scan of every
    // waiting run (1.7 ms a call with 10,000 asleep, and an executor reads it after every claim).
    // Of the workflows the executor registered: see Store.nextWakeAt.
    nextWake: s(
      "next_wake_parker_first",
      `SELECT ${parkerFirstWake("$2")} AS w FROM (SELECT wake_at, wake_channel FROM cairn_runs
         WHERE status = 'waiting' AND app_version = $1 AND wake_at IS NOT NULL AND ${d.inList("workflow", "$3")}
         ORDER BY wake_at LIMIT 32) t`,
    ),
    // Any version ($1 own name, $2 workflows): every waiting run (an executor recovering every version is rare).
    nextWakeAnyVersion: s(
      "next_wake_any_version_parker_first",
      `SELECT ${parkerFirstWake("$1")} AS w FROM cairn_runs WHERE status = 'waiting' AND wake_at IS NOT NULL
         AND ${d.inList("workflow", "$2")}`,
    ),
    lostRuns: s(
      "lost_runs",
      `SELECT id FROM cairn_runs WHERE ${d.inSet("id", "$1")}
       AND NOT (status = 'running' AND ${d.same("executor_id", d.text("$2"))})`,
    ),
    runsIn: s("runs_in", `${RUN_SELECT} WHERE ${d.inSet("r.id", "$1")} ORDER BY r.created_at`),
    renewClaimant: s("renew_claimant", `UPDATE cairn_executors SET heartbeat_at = ${d.greatest("heartbeat_at", "$1")} WHERE id = $2`),

    registerExecutor: s(
      "register_executor",
      `INSERT INTO cairn_executors (id, hostname, pid, pid_namespace, backend_pid, app_version, started_at, heartbeat_at, capacity,
         wake_channel, workflows)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (id) DO UPDATE SET backend_pid = excluded.backend_pid, heartbeat_at = excluded.heartbeat_at,
         wake_channel = excluded.wake_channel, workflows = excluded.workflows`,
    ),
    heartbeat: s("heartbeat", "UPDATE cairn_executors SET heartbeat_at = $1 WHERE id = $2"),
    listExecutors: s(
      "list_executors",
      `SELECT ${columnsOf("e", EXECUTOR_COLUMNS)}, ${d.sessionOpen("e.backend_pid")} AS session_open FROM cairn_executors e ORDER BY e.started_at`,
    ),
    transferRuns: s("transfer_runs", "UPDATE cairn_runs SET executor_id = $1, updated_at = $2 WHERE executor_id = $3 AND status = 'running' RETURNING id"),
    removeExecutors: s("remove_executors", `DELETE FROM cairn_executors WHERE ${d.inList("id", "$1")}`),
    removeDeadExecutors: s(
      "remove_dead_executors",
      `DELETE FROM cairn_executors WHERE EXISTS (SELECT 1 FROM ${d.deadExecutorTable("$1")} d
         WHERE d.id = cairn_executors.id AND d.heartbeat_at = cairn_executors.heartbeat_at)`,
    ),

    inbox: s(
      "inbox",
      `SELECT m.id, COALESCE(m.body, p.body) AS body FROM cairn_messages m
       LEFT JOIN cairn_payloads p ON p.hash = m.body_hash
       WHERE m.run_id = $1 AND m.topic = $2 AND m.consumed_at IS NULL ORDER BY m.position, m.id LIMIT 1`,
    ),
    consume: s("consume", "UPDATE cairn_messages SET consumed_by = $1, consumed_at = $2 WHERE id = $3"),

    cancelTree: s(
      "cancel",
      `WITH RECURSIVE tree(id) AS (
         SELECT id FROM cairn_runs WHERE id = $1
         UNION ALL SELECT r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id)
       UPDATE cairn_runs SET status = 'cancelled', error = $2, executor_id = NULL, wake_at = NULL,
         finished_at = $3, updated_at = $3
       WHERE id IN (SELECT id FROM tree) AND status NOT IN ('succeeded', 'failed', 'cancelled')
       RETURNING id`,
    ),
    resume: s(
      "resume",
      // Back as the core's: a layer that holds it again marks it again (its onResume hook).
      `UPDATE cairn_runs SET status = 'enqueued', error = NULL, output = NULL, output_hash = NULL, finished_at = NULL, deadline_at = NULL,
         executor_id = NULL, wake_at = NULL, recovery_base = recoveries, held_by = NULL, updated_at = $1 WHERE id = $2 AND status IN ('failed', 'cancelled')`,
    ),
    // The failed steps that ended the run are dropped so they run again: those after the last
    // success by seq or by time (a Promise.all whose failing step finished after its siblings).
    // Failures the workflow caught and moved past (a later step succeeded) stay in its history.
    resumeSteps: s(
      "resume_steps",
      `DELETE FROM cairn_steps WHERE run_id = $1 AND status = 'failed'
       AND (seq > COALESCE((SELECT MAX(seq) FROM cairn_steps WHERE run_id = $1 AND status = 'succeeded'), -1)
         OR finished_at >= COALESCE((SELECT MAX(finished_at) FROM cairn_steps WHERE run_id = $1 AND status = 'succeeded'), -1))`,
    ),
    // Descendants cancelled along with it come back too.
    resumeTree: s(
      "resume_tree",
      `WITH RECURSIVE tree(id) AS (
         SELECT id FROM cairn_runs WHERE parent_id = $1
         UNION ALL SELECT r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id)
       UPDATE cairn_runs SET status = 'enqueued', error = NULL, finished_at = NULL, held_by = NULL, updated_at = $2
       WHERE id IN (SELECT id FROM tree) AND status = 'cancelled'`,
    ),
    // Retention locks a run FOR UPDATE before deleting it: a fork and that deletion take turns.
    forkTarget: s("fork_target", `SELECT 1 FROM cairn_runs WHERE id = $1 ${d.forUpdate}`),
    forkOrigin: s("fork_origin", `SELECT 1 FROM cairn_runs WHERE id = $1 ${d.forShare}`),
    forkSteps: s(
      "fork_steps",
      `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
         path, completion, fingerprint)
       SELECT $1, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts, path, completion, fingerprint
       FROM cairn_steps WHERE run_id = $2 AND seq < $3 AND status <> 'pending'`,
    ),
  };
}

export type Statements = ReturnType<typeof statements>;
