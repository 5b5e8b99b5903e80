import type { LayerRegistry } from "../extension.js";
import { buildRowOp } from "../row-ops.js";
import type { ClientBase, Pool } from "pg";
import { splitStored } from "../rows.js";
import type { Fence, NewRun, StepRecord, StoredValue, WaitCondition, WriteOp } from "../store.js";

/** A connection to run one statement on: a pooled client, inside a transaction or not. */
type Db = ClientBase;

/** Channel that wakes listening executors: a run became claimable or a waiting run has news. */
export const WAKE_CHANNEL = "cairn_wake";
/**
 * The payload of the NOTIFY a write sends when it made a run claimable (below): listeners claim,
 * and need not dispatch their queues for it (the scheduler's wake-payloads.ts). Other wake-ups of
 * the store (`notifyWake`: a resume, a dispatch by a user policy) say nothing: a whole pass.
 */
export const CLAIMABLE_WAKE = "claimable";
/**
 * The payload of the wake-up a start sends to ONE executor, on its own channel (`startWake`): claim
 * what is claimable, and tell everyone (`claimable` on `cairn_wake`) if you could not take it all.
 */
export const CLAIM_WAKE = "claim";

/** A NOTIFY of `claim` to the channel `channel` names, or of `claimable` to every executor when it is null. */
function notifyOneOrAll(channel: string): string {
  return `pg_notify(COALESCE(${channel}, '${WAKE_CHANNEL}'), CASE WHEN ${channel} IS NULL THEN '${CLAIMABLE_WAKE}' ELSE '${CLAIM_WAKE}' END)`;
}

/**
 * The NOTIFY of a start (relation `i`, its inserted run; `version` and `workflow`, its application
 * version and workflow): to one executor picked at random among those that run that version, had
 * registered that workflow and listen on a channel of their own (`cairn_executors.wake_channel`,
 * `workflows`) — not to every executor, of which all but one would look for the run and find it
 * taken (N executors, N wake-ups and N claim looks per start). The one woken passes the wake-up on
 * to everyone when it cannot take the run — it is full — or a claim of its own did not show that
 * nothing is left (Executor, passOnWanted). Without such an executor (SQLite has none; an older
 * Cairn's executors have no channel; a workflow registered after launch is not in the row; another
 * version's executors may claim with `recoverAllVersions`), `claimable` on `cairn_wake`, as before.
 *
 * Failure semantics: a wake-up is a hint. If the executor picked is dead but its row not yet
 * removed (peers remove it at their next poll once its session has closed), or is frozen (SIGSTOP)
 * with its session open, the run waits for the next poll of some executor (`pollIntervalMs`), as
 * after any lost wake-up. The pick does not check the session itself: reading `pg_stat_activity`
 * made every start ~45 µs slower (13%) on the server, for the moments after an executor's death.
 */
function startWake(version: string, workflow: string): string {
  return `t AS (
               SELECT e.wake_channel AS channel FROM cairn_executors e
               WHERE e.wake_channel IS NOT NULL AND e.app_version = ${version} AND e.workflows::jsonb ? ${workflow}
               ORDER BY random() LIMIT 1),
             n AS (
               SELECT ${notifyOneOrAll("t.channel")} FROM i LEFT JOIN t ON true WHERE i.status = 'enqueued')`;
}

/**
 * The NOTIFY for the waiting runs relation `w` woke (its rows: `woke`; `channel`, the woken run's
 * `wake_channel`: the channel of the executor that parked it, set by `suspend`; `version`, its
 * application version): to that executor (payload `claim`) while a row of that version still shows
 * that channel — it holds the run warm (src/engine/warm-runs.ts), so claimed there it continues
 * from memory instead of replaying, and no other executor wakes to look for it unless it passes
 * the wake-up on (it is full). Otherwise (the parker is gone, SQLite, a run parked by an older
 * Cairn), `claimable` on `cairn_wake`, as before. `from`: what a NOTIFY is sent for (a message row
 * inserted: always one, woken or not, as before), joined with `w`'s distinct parkers.
 *
 * Failure semantics: as for a start (`startWake`). A parker that died a moment ago, or is frozen,
 * leaves each run it parked that is woken meanwhile to the next poll; so does one whose session was
 * lost and reopened, until its next death check records the new channel. A parker whose clock is
 * behind the waker's finds the run not yet due and passes nothing on: the run waits for the poll.
 */
function wokenWake(from: string): string {
  return `SELECT ${notifyOneOrAll("h.channel")}
             FROM ${from} LEFT JOIN (
               SELECT (SELECT e.wake_channel FROM cairn_executors e
                       WHERE e.wake_channel = p.channel AND e.app_version = p.version LIMIT 1) AS channel
               FROM (SELECT DISTINCT channel, version FROM w WHERE w.woke) p) h ON true`;
}

/** What `wakeRun` (and the batch finish's wake of parents) returns for `wokenWake`. */
const WOKEN = "RETURNING status = 'waiting' AS woke, wake_channel AS channel, app_version AS version";

/**
 * The step rows of a batch statement (`stepColumns`: $3–$19, one array per column, `c` the commit's
 * ordinal), kept only for the commits whose fence held (relation `f`).
 */
const STEP_ROWS_OF_HELD_COMMITS = `SELECT * FROM unnest($3::int[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[],
                 $10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::int[], $15::text[], $16::int[],
                 $17::text[], $18::int[], $19::text[])
                 AS v(c, run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
                   payload, payload_size, path, completion, fingerprint)
               WHERE v.c IN (SELECT f.c FROM f)`;

/**
 * The ordinals `c` of the commits of a batch statement (fences: $1 run ids, $2 executor ids) whose
 * fence holds, their runs' rows share-locked in id order: a concurrent takeover or cancel waits for
 * the statement, or the statement for it (and then sees the run no longer ours).
 */
const FENCES_HELD = `SELECT f.c FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS f(run_id, executor_id, c)
               JOIN cairn_runs r ON r.id = f.run_id AND r.executor_id = f.executor_id AND r.status = 'running'
               ORDER BY r.id FOR SHARE OF r`;

/** Writes relation `v`'s step rows; a pending row (a wait that began) is the only one a later write may replace. */
const UPSERT_STEP_ROWS = `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at,
                 finished_at, attempts, path, completion, fingerprint)
               SELECT run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
                 path, completion, fingerprint FROM v
               ON CONFLICT (run_id, seq) DO UPDATE SET status = excluded.status, output = excluded.output,
                 output_hash = excluded.output_hash, error = excluded.error, finished_at = excluded.finished_at,
                 attempts = excluded.attempts, completion = excluded.completion
               WHERE cairn_steps.status = 'pending'`;

/**
 * The PostgreSQL writes, statement for statement the same as `SqliteWrites`, with these
 * differences that READ COMMITTED and many processes call for:
 *
 * - Each write is one round trip: a large value's payload row rides along as a CTE.
 * - Waking a run locks its row even when it is not waiting (`CASE` instead of a `WHERE`), and a
 *   suspend runs only once its own row is locked. Without both, a message committed between a
 *   suspending run's inbox check and its commit would wake nobody: the sender's conditional update
 *   would see the run still `running` and skip it, and the run would wait forever. With them, one of
 *   the two transactions waits for the other and then sees its write.
 * - The rows a transaction will write are locked first, in id order (`lockRuns`), so that
 *   concurrent batches wait for each other instead of deadlocking.
 * - Writes that make a run claimable `NOTIFY cairn_wake` (payload `claimable`) inside the
 *   transaction, so listening executors hear of it as it commits — except a start, which wakes
 *   one executor on its own channel (`startWake`, payload `claim`).
 *
 * Every method except `stepBatch` runs inside a transaction its caller opened.
 */
export class PostgresWrites {
  private messagePosition = 0;

  /**
   * `ownChannel`: the channel this store's session hears its own wake-ups on (null while lost): a
   * run suspended here records it, so that what wakes the run wakes this executor (`wokenWake`).
   */
  constructor(
    private readonly layers: LayerRegistry,
    private readonly ownChannel: () => string | null = () => null,
  ) {}

  /** Locks the run's row and says whether the fence holds (the run is `running` under it). */
  async fenceHolds(db: Db, fence: Fence): Promise<boolean> {
    const result = await db.query({
      name: "cairn_fence",
      text: "SELECT 1 FROM cairn_runs WHERE id = $1 AND executor_id = $2 AND status = 'running' FOR UPDATE",
      values: [fence.runId, fence.executorId],
    });
    return result.rows.length > 0;
  }

  /**
   * Locks, in one round trip and in id order, the rows of `runIds` and of the parents of
   * `finishing` (the rows a batch will write), and returns their owner state. Two batches that
   * touch the same runs — two runs messaging each other at the same moment — then lock them in the
   * same order, so one waits for the other instead of deadlocking (which PostgreSQL would only
   * detect after `deadlock_timeout`, a second by default).
   */
  async lockRuns(db: Db, runIds: string[], finishing: string[]): Promise<Map<string, { status: string; executorId: string | null }>> {
    const result = await db.query<{ id: string; status: string; executor_id: string | null }>({
      name: "cairn_lock_runs",
      text: `SELECT id, status, executor_id FROM cairn_runs WHERE id = ANY(${runsAndParents("$1", "$2")}) ORDER BY id FOR UPDATE`,
      values: [runIds, finishing],
    });
    return new Map(result.rows.map((r) => [r.id, { status: r.status, executorId: r.executor_id }]));
  }

  /** Locks a run's row: a suspend of a run this batch inserted, not yet locked by `lockRuns`. */
  async lockRun(db: Db, runId: string): Promise<void> {
    await db.query({ name: "cairn_lock_run", text: "SELECT 1 FROM cairn_runs WHERE id = $1 FOR UPDATE", values: [runId] });
  }

  /**
   * Writes the step records of many fenced commits in ONE autocommitted statement (the group
   * commit's fast path: most commits are a single step). Each commit's fence is checked against
   * its run's row, share-locked so a concurrent takeover or cancel waits for this statement (or this
   * statement for it); a commit whose fence fails writes none of its steps or payloads. Returns
   * the indexes of the commits whose fence held.
   *
   * The caller guarantees no (runId, seq) appears twice in the batch (`ON CONFLICT DO UPDATE`
   * cannot touch one row twice in a statement).
   */
  async stepBatch(db: Pool | Db, commits: { fence: Fence; steps: StepRecord[] }[]): Promise<Set<number>> {
    const cols = stepColumns(commits);
    const fences = [commits.map((c) => c.fence.runId), commits.map((c) => c.fence.executorId)];
    if (commits.every((c) => c.steps.every((step) => step.kind !== "recv" && step.output?.hash == null))) {
      // The steady state: inline values, and no receive (the only step that completes a pending row,
      // see stepSingle), so plain inserts. About a fifth less server CPU than the general form
      // below (16 and 100 commits): no payload insert, which made the step rows a CTE materialized
      // and read twice, and no ON CONFLICT, which makes every row a speculative insertion.
      const lean = await db.query<{ c: number }>({
        name: "cairn_step_batch_inline",
        text: `WITH f AS (${FENCES_HELD}),
               s AS (
                 INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at,
                   finished_at, attempts, path, completion, fingerprint)
                 SELECT run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
                   path, completion, fingerprint FROM (${STEP_ROWS_OF_HELD_COMMITS}) v)
             SELECT c FROM f`,
        values: [...fences, ...cols],
      });
      return new Set(lean.rows.map((r) => Number(r.c) - 1));
    }
    const result = await db.query<{ c: number }>({
      name: "cairn_step_batch",
      text: `WITH f AS (${FENCES_HELD}),
             v AS (
               ${STEP_ROWS_OF_HELD_COMMITS}),
             p AS (
               INSERT INTO cairn_payloads (hash, body, size, created_at)
               SELECT DISTINCT ON (output_hash) output_hash, payload, payload_size, started_at FROM v
               WHERE output_hash IS NOT NULL
               ON CONFLICT (hash) DO NOTHING),
             s AS (
               ${UPSERT_STEP_ROWS})
           SELECT c FROM f`,
      values: [...fences, ...cols],
    });
    return new Set(result.rows.map((r) => Number(r.c) - 1));
  }

  /**
   * The fenced commits of many runs that only write steps, record completions and finish (the
   * shape of thousands of runs waking together: each records its sleep's completion, then
   * finishes), in ONE autocommitted statement instead of a transaction with three round trips per
   * commit. The rows it will write — the runs, and the parents of the runs that finish — are
   * locked first, FOR UPDATE in id order as `lockRuns` does (so concurrent batches wait for each
   * other instead of deadlocking); each commit's fence is checked against its locked row, and a
   * commit whose fence fails writes nothing. A finish wakes the run's parent if it waits (the same
   * `CASE` as `wakeRun`, so a parent suspending right now is waited for), and the statement
   * NOTIFYs if any parent woke. Returns the indexes of the commits whose fence held.
   *
   * The caller guarantees: no run has two commits in the batch; every op is of its commit's run;
   * a finish is a commit's last op. So no row is written twice by the statement, except a parent
   * finishing in the same batch as its child — that parent is not woken (it is finishing).
   * `asynchronous`: the statement's commit does not wait for its WAL flush (a deferred batch).
   */
  async fencedBatch(db: Pool | Db, commits: { fence: Fence; ops: WriteOp[] }[], asynchronous = false): Promise<Set<number>> {
    const steps: { fence: Fence; steps: StepRecord[] }[] = [];
    const completion = { c: [] as number[], seq: [] as number[], completion: [] as number[] };
    const finish = {
      c: [] as number[],
      status: [] as string[],
      output: [] as (string | null)[],
      hash: [] as (string | null)[],
      payload: [] as (string | null)[],
      size: [] as (number | null)[],
      error: [] as (string | null)[],
      at: [] as number[],
    };
    commits.forEach((commit, i) => {
      const own: StepRecord[] = [];
      for (const op of commit.ops) {
        if (op.type === "step") own.push(op.step);
        else if (op.type === "completion") {
          completion.c.push(i + 1);
          completion.seq.push(op.seq);
          completion.completion.push(op.completion);
        } else if (op.type === "finish") {
          const [output, hash] = splitStored(op.output);
          finish.c.push(i + 1);
          finish.status.push(op.status);
          finish.output.push(output);
          finish.hash.push(hash);
          finish.payload.push(hash === null ? null : op.output!.text);
          finish.size.push(hash === null ? null : op.output!.text.length);
          finish.error.push(op.error);
          finish.at.push(op.at);
        }
      }
      steps.push({ fence: commit.fence, steps: own });
    });
    const cols = stepColumns(steps);
    const result = await db.query<{ c: number }>({
      name: "cairn_fenced_batch",
      text: `WITH l AS (
               SELECT id, executor_id, status FROM cairn_runs
               WHERE id = ANY(${runsAndParents("$1", "$31")}) ORDER BY id FOR UPDATE),
             f AS (
               SELECT f.c, l.id FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS f(run_id, executor_id, c)
               JOIN l ON l.id = f.run_id AND l.executor_id = f.executor_id AND l.status = 'running'),
             v AS (
               ${STEP_ROWS_OF_HELD_COMMITS}),
             x AS (
               SELECT f.id, x.* FROM unnest($23::int[], $24::text[], $25::text[], $26::text[], $27::text[], $28::int[],
                 $29::text[], $30::bigint[]) AS x(c, status, output, output_hash, payload, payload_size, error, at)
               JOIN f ON f.c = x.c),
             p AS (
               INSERT INTO cairn_payloads (hash, body, size, created_at)
               SELECT DISTINCT ON (h.output_hash) h.output_hash, h.payload, h.payload_size, h.at FROM (
                 SELECT output_hash, payload, payload_size, started_at AS at FROM v WHERE output_hash IS NOT NULL
                 UNION ALL SELECT output_hash, payload, payload_size, at FROM x WHERE output_hash IS NOT NULL) h
               ON CONFLICT (hash) DO NOTHING),
             s AS (
               ${UPSERT_STEP_ROWS}),
             k AS (
               UPDATE cairn_steps st SET completion = k.completion
               FROM unnest($20::int[], $21::int[], $22::int[]) AS k(c, seq, completion) JOIN f ON f.c = k.c
               WHERE st.run_id = f.id AND st.seq = k.seq),
             d AS (
               UPDATE cairn_runs r SET status = x.status, output = x.output, output_hash = x.output_hash, error = x.error,
                 finished_at = x.at, updated_at = x.at, executor_id = NULL, wake_at = NULL
               FROM x WHERE r.id = x.id RETURNING r.parent_id, x.at),
             w AS (
               UPDATE cairn_runs SET
                 wake_at = CASE WHEN status = 'waiting' THEN LEAST(COALESCE(wake_at, d.at), d.at) ELSE wake_at END,
                 updated_at = CASE WHEN status = 'waiting' THEN d.at ELSE updated_at END
               FROM (SELECT parent_id, max(at) AS at FROM d WHERE parent_id IS NOT NULL GROUP BY parent_id) d
               WHERE cairn_runs.id = d.parent_id AND cairn_runs.id NOT IN (SELECT id FROM x)
               ${WOKEN}),
             n AS (${wokenWake("(SELECT 1 WHERE EXISTS (SELECT 1 FROM w WHERE woke)) o")}),
             a AS (${asynchronousCommit("$32")})
           SELECT c FROM f, (SELECT count(*) FROM n) AS notified, (SELECT count(*) FROM a) AS asynchronous`,
      values: [
        commits.map((c) => c.fence.runId),
        commits.map((c) => c.fence.executorId),
        ...cols,
        completion.c,
        completion.seq,
        completion.completion,
        finish.c,
        finish.status,
        finish.output,
        finish.hash,
        finish.payload,
        finish.size,
        finish.error,
        finish.at,
        finish.c.map((c) => commits[c - 1]!.fence.runId),
        asynchronous,
      ],
    });
    return new Set(result.rows.map((r) => Number(r.c) - 1));
  }

  /**
   * The fast path's commonest batch, one fenced commit of one inline step (a run stepping alone),
   * as a statement with scalar parameters: it costs the server a fraction of `stepBatch`'s unnest
   * of sixteen arrays. Same semantics: the run's row is share-locked, and nothing is written unless
   * the fence holds. Returns whether it held.
   */
  async stepSingle(db: Pool | Db, fence: Fence, step: StepRecord): Promise<boolean> {
    const [output] = splitStored(step.output);
    const values = [
      step.runId,
      step.seq,
      step.name,
      step.kind,
      step.status,
      output,
      step.error,
      step.startedAt,
      step.finishedAt,
      step.attempts,
      fence.executorId,
      step.path ?? null,
      step.completion ?? null,
      step.fingerprint ?? null,
    ];
    if (step.kind !== "recv") {
      // Only a receive leaves a pending row to complete; any other step's seq is new, so this is a
      // plain insert, fenced by the run row it reads (a second write at a seq is a bug, and fails).
      const inserted = await db.query({
        name: "cairn_step_insert",
        text: `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at,
                 finished_at, attempts, path, completion, fingerprint)
               SELECT $1, $2, $3, $4, $5, $6, NULL, $7, $8, $9, $10, $12, $13, $14 FROM cairn_runs
               WHERE id = $1 AND executor_id = $11 AND status = 'running' FOR SHARE`,
        values,
      });
      return inserted.rowCount === 1;
    }
    const result = await db.query<{ held: number }>({
      name: "cairn_step_single",
      text: `WITH f AS (
               SELECT 1 FROM cairn_runs WHERE id = $1 AND executor_id = $11 AND status = 'running' FOR SHARE),
             s AS (
               INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at,
                 finished_at, attempts, path, completion, fingerprint)
               SELECT $1, $2, $3, $4, $5, $6, NULL, $7, $8, $9, $10, $12, $13, $14 FROM f
               ON CONFLICT (run_id, seq) DO UPDATE SET status = excluded.status, output = excluded.output,
                 output_hash = excluded.output_hash, error = excluded.error, finished_at = excluded.finished_at,
                 attempts = excluded.attempts, completion = excluded.completion
               WHERE cairn_steps.status = 'pending')
           SELECT count(*)::int AS held FROM f`,
      values,
    });
    return result.rows[0]?.held === 1;
  }

  /**
   * A run's finish as one autocommitted statement, fenced in its WHERE clause: the run row and its
   * waiting parent are updated (and so locked) by the same statement. Returns whether the fence held.
   * `asynchronous`: its commit does not wait for its WAL flush (a deferred commit).
   */
  async finishSingle(db: Pool | Db, fence: Fence, op: Extract<WriteOp, { type: "finish" }>, asynchronous = false): Promise<boolean> {
    const [output] = splitStored(op.output);
    const result = await db.query<{ held: number }>({
      name: "cairn_finish_single",
      text: `WITH ${PAYLOAD_CTE},
             f AS (
               UPDATE cairn_runs SET status = $5, output = $6, output_hash = $1, error = $7, finished_at = $4,
                 updated_at = $4, executor_id = NULL, wake_at = NULL
               WHERE id = $8 AND executor_id = $9 AND status = 'running' RETURNING parent_id),
             w AS (${wakeRun("(SELECT parent_id FROM f)", "$4")} ${WOKEN}),
             n AS (${wokenWake("(SELECT 1 WHERE EXISTS (SELECT 1 FROM w WHERE woke)) o")}),
             a AS (${asynchronousCommit("$10")})
           SELECT (SELECT count(*) FROM f)::int AS held, (SELECT count(*) FROM n)::int AS notified, (SELECT count(*) FROM a) AS asynchronous`,
      values: [...payloadValues(op.output, op.at), op.status, output, op.error, op.runId, fence.executorId, asynchronous],
    });
    return result.rows[0]?.held === 1;
  }

  async apply(db: Db, op: WriteOp): Promise<void> {
    switch (op.type) {
      case "step":
        return this.step(db, op.step);
      case "run":
        await this.createRun(db, op.run);
        return;
      case "message": {
        const m = op.message;
        const [body] = splitStored(m.body);
        const position = m.createdAt * 1000 + (this.messagePosition++ % 1000);
        await db.query({
          name: "cairn_message",
          text: `WITH ${PAYLOAD_CTE},
                 i AS (
                   INSERT INTO cairn_messages (id, run_id, topic, body, body_hash, sender, position, created_at)
                   VALUES ($5, $6, $7, $8, $1, $9, $10, $4) ON CONFLICT (id) DO NOTHING RETURNING run_id),
                 w AS (${wakeRun("(SELECT run_id FROM i)", "$4")} ${WOKEN})
             ${wokenWake("i")}`,
          values: [...payloadValues(m.body, m.createdAt), m.id, m.runId, m.topic, body, m.sender, position],
        });
        return;
      }
      case "event": {
        const [value] = splitStored(op.value);
        await db.query({
          name: "cairn_event",
          text: `WITH ${PAYLOAD_CTE}
                 INSERT INTO cairn_events (run_id, key, value, value_hash, updated_at) VALUES ($5, $6, $7, $1, $4)
                 ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value, value_hash = excluded.value_hash,
                   updated_at = excluded.updated_at`,
          values: [...payloadValues(op.value, op.at), op.runId, op.key, value],
        });
        return;
      }
      case "finish": {
        const [output] = splitStored(op.output);
        await db.query({
          name: "cairn_finish",
          text: `WITH ${PAYLOAD_CTE},
                 f AS (
                   UPDATE cairn_runs SET status = $5, output = $6, output_hash = $1, error = $7, finished_at = $4,
                     updated_at = $4, executor_id = NULL, wake_at = NULL
                   WHERE id = $8 RETURNING parent_id),
                 w AS (${wakeRun("(SELECT parent_id FROM f)", "$4")} ${WOKEN})
             ${wokenWake("(SELECT 1 WHERE EXISTS (SELECT 1 FROM w WHERE woke)) o")}`,
          values: [...payloadValues(op.output, op.at), op.status, output, op.error, op.runId],
        });
        return;
      }
      case "suspend":
        return this.suspend(db, op.runId, op.wait, op.at);
      case "completion":
        await db.query({
          name: "cairn_step_completion",
          text: "UPDATE cairn_steps SET completion = $1 WHERE run_id = $2 AND seq = $3",
          values: [op.completion, op.runId, op.seq],
        });
        return;
      case "barrier":
        // A write, so the transaction has a commit record to flush (store.ts, the barrier op).
        await db.query({ name: "cairn_touch_run", text: "UPDATE cairn_runs SET updated_at = $1 WHERE id = $2", values: [op.at, op.runId] });
        return;
      case "insert":
      case "update":
      case "delete": {
        const built = buildRowOp(op, this.layers.writableTables());
        await db.query({ text: built.text, values: built.values });
        return;
      }
    }
  }

  /**
   * Unloads a run to wait, waking it at once if what it waits for already happened. The caller
   * holds the run's row lock (see the class comment), so this statement's snapshot includes every
   * message and child result committed before this transaction could have missed them.
   */
  private async suspend(db: Db, runId: string, wait: WaitCondition, now: number): Promise<void> {
    await db.query({
      name: "cairn_suspend",
      text: `WITH s AS (
               UPDATE cairn_runs SET status = 'waiting', executor_id = NULL, updated_at = $2, wake_channel = $6,
                 wake_at = CASE
                   WHEN EXISTS (SELECT 1 FROM cairn_messages m WHERE m.run_id = $1 AND m.topic = ANY($4::text[])
                                AND m.consumed_at IS NULL) THEN $2
                   WHEN EXISTS (SELECT 1 FROM cairn_runs c WHERE c.id = ANY($5::text[])
                                AND c.status IN ('succeeded', 'failed', 'cancelled')) THEN $2
                   ELSE $3::bigint END
               WHERE id = $1 RETURNING wake_at)
           SELECT pg_notify('${WAKE_CHANNEL}', '${CLAIMABLE_WAKE}') FROM s WHERE wake_at <= $2`,
      values: [runId, now, wait.wakeAt, wait.topics, wait.childRunIds, this.ownChannel()],
    });
  }

  /**
   * Wakes `runId`'s parent if it is waiting, and tells the listening executors (those running
   * cancelled runs hear of it at once).
   */
  async wakeParent(db: Db, runId: string, at: number): Promise<void> {
    await db.query({
      name: "cairn_wake_parent",
      text: `WITH w AS (${wakeRun("(SELECT parent_id FROM cairn_runs WHERE id = $2)", "$1")})
             SELECT pg_notify('${WAKE_CHANNEL}', '${CLAIMABLE_WAKE}')`,
      values: [at, runId],
    });
  }

  private async step(db: Db, step: StepRecord): Promise<void> {
    const [output] = splitStored(step.output);
    await db.query({
      name: "cairn_step",
      // A pending row (a wait that began) is the only row a later write may replace.
      text: `WITH ${PAYLOAD_CTE}
             INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
               path, completion, fingerprint)
             VALUES ($5, $6, $7, $8, $9, $10, $1, $11, $4, $12, $13, $14, $15, $16)
             ON CONFLICT (run_id, seq) DO UPDATE SET status = excluded.status, output = excluded.output,
               output_hash = excluded.output_hash, error = excluded.error, finished_at = excluded.finished_at,
               attempts = excluded.attempts, completion = excluded.completion
             WHERE cairn_steps.status = 'pending'`,
      values: [
        ...payloadValues(step.output, step.startedAt),
        step.runId,
        step.seq,
        step.name,
        step.kind,
        step.status,
        output,
        step.error,
        step.finishedAt,
        step.attempts,
        step.path ?? null,
        step.completion ?? null,
        step.fingerprint ?? null,
      ],
    });
  }

  /**
   * Many new runs in ONE autocommitted statement (the group commit of starts: `startMany`, or
   * concurrent `start()` calls that met in one flush): their input payloads and their rows, each
   * `ON CONFLICT (id) DO NOTHING` as a single start is, and one NOTIFY if any is enqueued. Rows go
   * in in id order, so two such statements with overlapping ids wait for each other instead of
   * deadlocking. A run listed twice is inserted once (the first), as two starts of one id would be.
   * Returns the ids of the runs it created (not those that existed already).
   */
  async runBatch(db: Pool | Db, runs: readonly NewRun[]): Promise<Set<string>> {
    const hashes: (string | null)[] = [];
    const inputs: (string | null)[] = [];
    const payloads: (string | null)[] = [];
    const sizes: (number | null)[] = [];
    for (const run of runs) {
      const [input, hash] = splitStored(run.input);
      inputs.push(input);
      hashes.push(hash);
      payloads.push(hash === null ? null : run.input.text);
      sizes.push(hash === null ? null : run.input.text.length);
    }
    const result = await db.query<{ id: string | null }>({
      name: "cairn_run_batch",
      text: `WITH v AS (
               SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
                 $8::text[], $9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::text[], $14::int[],
                 $15::text[], $16::int[], $17::text[])
                 WITH ORDINALITY AS v(id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
                   executor_id, deadline_at, created_at, forked_from, forked_from_seq, payload, payload_size, held_by, n)),
             p AS (
               INSERT INTO cairn_payloads (hash, body, size, created_at)
               SELECT DISTINCT ON (input_hash) input_hash, payload, payload_size, created_at FROM v
               WHERE input_hash IS NOT NULL
               ON CONFLICT (hash) DO NOTHING),
             i AS (
               INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
                 executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq, held_by)
               SELECT DISTINCT ON (id) id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
                 executor_id, deadline_at, created_at, created_at, forked_from, forked_from_seq, held_by
               FROM v ORDER BY id, n
               ON CONFLICT (id) DO NOTHING
               RETURNING id, status),
             n AS (SELECT pg_notify('${WAKE_CHANNEL}', '${CLAIMABLE_WAKE}') WHERE EXISTS (SELECT 1 FROM i WHERE status = 'enqueued'))
           SELECT id FROM i UNION ALL SELECT NULL FROM n`,
      values: [
        runs.map((r) => r.id),
        runs.map((r) => r.workflow),
        runs.map((r) => r.status),
        inputs,
        hashes,
        runs.map((r) => r.parentId),
        runs.map((r) => r.parentSeq),
        runs.map((r) => r.rootId),
        runs.map((r) => r.appVersion),
        runs.map((r) => r.executorId),
        runs.map((r) => r.deadlineAt),
        runs.map((r) => r.createdAt),
        runs.map((r) => r.forkedFrom),
        runs.map((r) => r.forkedFromSeq),
        payloads,
        sizes,
        runs.map((r) => r.heldBy ?? null),
      ],
    });
    return new Set(result.rows.flatMap((r) => (r.id === null ? [] : [r.id])));
  }

  /**
   * A new run's row (and its input's payload) in one statement, `ON CONFLICT (id) DO NOTHING`.
   * Returns whether it created the run: false when a run with that id existed (it is left as it was).
   */
  async createRun(db: Db, run: NewRun): Promise<boolean> {
    const [input] = splitStored(run.input);
    const result = await db.query<{ id: string | null }>({
      name: "cairn_run",
      // A new enqueued run wakes an executor that may claim it (startWake).
      text: `WITH ${PAYLOAD_CTE},
             i AS (
               INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
                 executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq, held_by)
               VALUES ($5, $6, $7, $8, $1, $9, $10, $11, $12, $13, $14, $4, $4, $15, $16, $17) ON CONFLICT (id) DO NOTHING
               RETURNING id, status),
             ${startWake("$12", "$6")}
           SELECT id FROM i UNION ALL SELECT NULL FROM n`,
      values: [
        ...payloadValues(run.input, run.createdAt),
        run.id,
        run.workflow,
        run.status,
        input,
        run.parentId,
        run.parentSeq,
        run.rootId,
        run.appVersion,
        run.executorId,
        run.deadlineAt,
        run.forkedFrom,
        run.forkedFromSeq,
        run.heldBy ?? null,
      ],
    });
    return result.rows.some((r) => r.id !== null);
  }
}

/**
 * The ids in the list `runs`, and the parents of the runs in the list `finishing`, as an array
 * for `id = ANY(...)`: an InitPlan (as is the list of finishing runs inside it), which the planner
 * looks up in the primary key whatever the lists' lengths, in id order (which `FOR UPDATE` then
 * locks in, without a sort). (`id = ANY($1) OR id IN (...)` could not use the index: every row of
 * cairn_runs was compared with every id, and a batch of 1,000 finishes took most of a second.
 * `id IN (SELECT unnest(...) UNION ...)` was planned as a hash join over a scan of the whole table
 * once it held 10,000 runs: ~4 ms a batch of 512, and growing with the table.)
 */
function runsAndParents(runs: string, finishing: string): string {
  return `ARRAY(SELECT unnest(${runs}::text[]) UNION
    SELECT p.parent_id FROM cairn_runs p WHERE p.id = ANY(ARRAY(SELECT unnest(${finishing}::text[]))) AND p.parent_id IS NOT NULL)`;
}

/**
 * An autocommitted statement's own `SET LOCAL synchronous_commit = off` when `flagSql` is true: a
 * deferred commit (CommitOptions.deferDurability) that needs no transaction around it. The setting
 * lasts until the statement's implicit transaction ends, and the commit reads it as it commits: it
 * returns without waiting for its WAL flush. Reference the CTE (a CTE nothing reads is not run).
 */
function asynchronousCommit(flagSql: string): string {
  return `SELECT set_config('synchronous_commit', 'off', true) WHERE ${flagSql}::boolean`;
}

/**
 * Writes a large value to the payload table once, in the same statement as the row that refers
 * to it. Parameters $1..$4: hash (null for an inline value, which inserts nothing), body, size,
 * created_at; the statement's own parameters start at $5.
 */
const PAYLOAD_CTE = `p AS (
  INSERT INTO cairn_payloads (hash, body, size, created_at)
  SELECT $1::text, $2::text, $3::int, $4::bigint WHERE $1::text IS NOT NULL
  ON CONFLICT (hash) DO NOTHING)`;

function payloadValues(value: StoredValue | null, at: number): [string | null, string | null, number | null, number] {
  if (value === null || value.hash === null) return [null, null, null, at];
  return [value.hash, value.text, value.text.length, at];
}

/**
 * Wakes the run `idSql` at `atSql` if it is waiting. It locks the row either way (the `CASE`),
 * so it waits for a run that is suspending right now and then sees it waiting. A run already due
 * keeps its earlier time: claims take due runs earliest first (statements.ts, claimBranches), and a
 * run that kept getting messages would otherwise keep going to the back.
 */
function wakeRun(idSql: string, atSql: string): string {
  return `UPDATE cairn_runs SET
      wake_at = CASE WHEN status = 'waiting' THEN LEAST(COALESCE(wake_at, ${atSql}::bigint), ${atSql}::bigint) ELSE wake_at END,
      updated_at = CASE WHEN status = 'waiting' THEN ${atSql}::bigint ELSE updated_at END
    WHERE id = ${idSql}`;
}

/**
 * The step records of fenced commits as the 17 column arrays `stepBatch` and `fencedBatch` unnest
 * ($3..$19): the commit's 1-based index, then the row's columns, its payload and the payload's size.
 */
function stepColumns(commits: { steps: StepRecord[] }[]): unknown[] {
  const cols = {
    c: [] as number[],
    runId: [] as string[],
    seq: [] as number[],
    name: [] as string[],
    kind: [] as string[],
    status: [] as string[],
    output: [] as (string | null)[],
    outputHash: [] as (string | null)[],
    error: [] as (string | null)[],
    startedAt: [] as number[],
    finishedAt: [] as (number | null)[],
    attempts: [] as number[],
    payload: [] as (string | null)[],
    payloadSize: [] as (number | null)[],
    path: [] as (string | null)[],
    completion: [] as (number | null)[],
    fingerprint: [] as (string | null)[],
  };
  commits.forEach((commit, i) => {
    for (const step of commit.steps) {
      const [output, hash] = splitStored(step.output);
      cols.c.push(i + 1);
      cols.runId.push(step.runId);
      cols.seq.push(step.seq);
      cols.name.push(step.name);
      cols.kind.push(step.kind);
      cols.status.push(step.status);
      cols.output.push(output);
      cols.outputHash.push(hash);
      cols.error.push(step.error);
      cols.startedAt.push(step.startedAt);
      cols.finishedAt.push(step.finishedAt);
      cols.attempts.push(step.attempts);
      cols.payload.push(hash === null ? null : step.output!.text);
      cols.payloadSize.push(hash === null ? null : step.output!.text.length);
      cols.path.push(step.path ?? null);
      cols.completion.push(step.completion ?? null);
      cols.fingerprint.push(step.fingerprint ?? null);
    }
  });
  return [
    cols.c,
    cols.runId,
    cols.seq,
    cols.name,
    cols.kind,
    cols.status,
    cols.output,
    cols.outputHash,
    cols.error,
    cols.startedAt,
    cols.finishedAt,
    cols.attempts,
    cols.payload,
    cols.payloadSize,
    cols.path,
    cols.completion,
    cols.fingerprint,
  ];
}
