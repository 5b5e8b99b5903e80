import pg from "pg";
import type { PoolClient, QueryConfig } from "pg";
import { FencedError, NotACairnDatabaseError, RunNotFoundError } from "../../errors.js";
import { POSTGRES } from "../dialect.js";
import { LayerRegistry, type StoreExtension } from "../extension.js";
import { checkSchema, runMigrations, type MigrationSql } from "../migration-runner.js";
import { toExecutorRow, toRunRow, toStepRow } from "../rows.js";
import type {
  ClaimRequest,
  DeadExecutor,
  ExecutorRow,
  Fence,
  NewRun,
  OperatorQueryOptions,
  QueryResult,
  ReceiveRequest,
  ReceiveResult,
  RunFilter,
  RunRow,
  SqlClient,
  StepRecord,
  StepRow,
  Store,
  WriteOp,
} from "../store.js";
import { isTransientStoreError } from "../transient.js";
import type { DeletedRuns, RunDeleteFilter } from "../retention.js";
import { postgresOperatorQuery } from "./postgres-operator-query.js";
import { postgresCollectPayloads, postgresDeleteRuns } from "./postgres-retention.js";
import { PostgresSession } from "./postgres-session.js";
import { PostgresWrites } from "./postgres-writes.js";

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). A transactional step holds one for its whole body. */
  poolSize?: number;
  /** Every transaction is read-only (the CLI's read commands). */
  readonly?: boolean;
}

interface PendingCommit {
  fence: Fence | null;
  ops: WriteOp[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

type Raw = Record<string, unknown>;

/**
 * int8 (BIGINT: every time column, COUNT, MIN) parses to a number on this store's connections
 * only; pg's global parsers stay as the application set them. Milliseconds fit a double exactly.
 */
const INT8_OID = 20;
const TYPES = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary"
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** Key of the advisory lock that makes concurrent `migrate()` calls take turns ("cairn" in ASCII). */
const MIGRATION_LOCK = 0x636169726e;

/** Deadlocks (40P01) and serialization failures (40001) abort a transaction that may simply run again. */
const RETRYABLE_SQLSTATES = new Set(["40P01", "40001"]);
const MAX_ATTEMPTS = 5;

/** How long `close()` waits for the commit in flight and the connections to end. */
const CLOSE_BOUND_MS = 5_000;

/**
 * The scale-out backend: many executor processes, on many machines, share one PostgreSQL.
 *
 * Group commit: at most one flush is in flight; commits that arrive meanwhile queue, and the next
 * flush takes them all. A batch of fenced commits that only write steps (the steady state of
 * running workflows) is one autocommitted statement — one round trip, one WAL flush for the whole
 * batch. Any other batch is one transaction on one connection: every run row it writes locked in
 * one statement, then each commit's ops in order.
 *
 * Each store also keeps one dedicated session for its lifetime (`PostgresSession`): its backend
 * pid is the executor's liveness, and it LISTENs for wake-ups.
 */
export class PostgresStore implements Store {
  readonly backend = "postgres" as const;
  private readonly pool: pg.Pool;
  private readonly layers = new LayerRegistry(POSTGRES);
  private readonly writes = new PostgresWrites(this.layers);
  private queue: PendingCommit[] = [];
  private flushing: Promise<void> | null = null;
  private readonly session: PostgresSession;

  constructor(
    readonly url: string,
    options: PostgresStoreOptions = {},
  ) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      types: TYPES,
      keepAlive: true,
      // A checkout that cannot get a connection (the server is down, every slot busy) fails
      // instead of waiting forever; the error is transient, so its caller retries with backoff.
      connectionTimeoutMillis: 10_000,
      ...(options.readonly ? { options: "-c default_transaction_read_only=on" } : {}),
    });
    // An idle pooled connection that breaks (a server restart) is discarded by the pool and the
    // next checkout opens a new one; without a listener the 'error' event would kill the process.
    this.pool.on("error", () => undefined);
    this.session = new PostgresSession(url, TYPES);
  }

  register(extension: StoreExtension): void {
    this.layers.register(extension);
  }

  async migrate(): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      await runMigrations(migrationSql(client), this.layers, Date.now);
    });
  }

  async assertCairnDatabase(): Promise<void> {
    await checkSchema(
      migrationSql(this.pool),
      this.layers,
      async (name) => (await this.pool.query<{ present: boolean }>("SELECT to_regclass($1) IS NOT NULL AS present", [name])).rows[0]?.present === true,
      () =>
        new NotACairnDatabaseError(
          `${redactedUrl(this.url)} is not a Cairn database (it has no cairn_migrations table) — point --database at the database your application uses`,
        ),
    );
  }

  /**
   * Waits for the commit in flight, then closes every connection. Against a server that is gone
   * this gives up after CLOSE_BOUND_MS rather than hang: the sockets die with the process.
   */
  async close(): Promise<void> {
    const closing = (async () => {
      while (this.flushing !== null) await this.flushing;
      this.dropWriter();
      await this.session.close();
      await this.pool.end();
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closing, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_BOUND_MS)))]);
    clearTimeout(timer);
  }

  commit(fence: Fence | null, ops: WriteOp[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ fence, ops, resolve, reject });
      this.flushing ??= this.flushQueue();
    });
  }

  /** Drains the queue one batch at a time; never rejects (each batch settles its own callers). */
  private async flushQueue(): Promise<void> {
    // Commits made in this turn of the event loop (the steps of a Promise.all) join the first batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      await this.flush(batch);
    }
    this.flushing = null;
  }

  private async flush(batch: PendingCommit[]): Promise<void> {
    const outcomes: unknown[] = new Array(batch.length).fill(null);
    try {
      await retrying(async () => {
        outcomes.fill(null);
        const steps = stepOnly(batch);
        const single = steps?.length === 1 && steps[0]!.steps.length === 1 && steps[0]!.steps[0]!.output?.hash == null ? steps[0]! : null;
        const finish = finishOnly(batch);
        const newRun = runOnly(batch);
        if (newRun !== null) {
          // A run's row (and its input's payload) is one statement: it needs no transaction.
          await this.onWriter((writer) => this.writes.apply(writer, newRun));
        } else if (finish !== null) {
          const held = await this.onWriter((writer) => this.writes.finishSingle(writer, finish.fence, finish.op));
          if (!held) outcomes[0] = fenced(finish.fence);
        } else if (single !== null) {
          const held = await this.onWriter((writer) => this.writes.stepSingle(writer, single.fence, single.steps[0]!));
          if (!held) outcomes[0] = fenced(single.fence);
        } else if (steps !== null) {
          const held = await this.onWriter((writer) => this.writes.stepBatch(writer, steps));
          batch.forEach((pending, i) => {
            if (!held.has(i)) outcomes[i] = fenced(pending.fence!);
          });
        } else {
          await this.inTransaction((client) => this.applyBatch(client, batch, outcomes));
        }
      });
    } catch (error) {
      outcomes.fill(error);
    }
    batch.forEach((pending, i) => (outcomes[i] === null ? pending.resolve() : pending.reject(outcomes[i])));
  }

  /**
   * The general path. Every run row the batch will write is locked up front, in one statement
   * and in id order, which also reads each fence. Only this transaction can change a locked run's
   * status or owner afterwards, so a fence is read again, in order, only when an earlier commit of
   * the batch wrote to its run (finished it, suspended it, or inserted it).
   */
  private async applyBatch(client: PoolClient, batch: PendingCommit[], outcomes: unknown[]): Promise<void> {
    const runIds = new Set<string>();
    const finishing: string[] = [];
    for (const pending of batch) {
      if (pending.fence !== null) runIds.add(pending.fence.runId);
      for (const op of pending.ops) {
        if (op.type === "message") runIds.add(op.message.runId);
        if (op.type === "suspend") runIds.add(op.runId);
        if (op.type === "finish") {
          runIds.add(op.runId);
          finishing.push(op.runId);
        }
      }
    }
    const locked = await this.writes.lockRuns(client, [...runIds], finishing);
    const touched = new Set<string>();
    for (const [i, pending] of batch.entries()) {
      const fence = pending.fence;
      if (fence !== null) {
        const owner = locked.get(fence.runId);
        const holds = touched.has(fence.runId)
          ? await this.writes.fenceHolds(client, fence)
          : owner !== undefined && owner.status === "running" && owner.executorId === fence.executorId;
        if (!holds) {
          outcomes[i] = fenced(fence);
          continue;
        }
      }
      // Several commits share the transaction: each gets a savepoint, so one whose data breaks a
      // constraint fails alone instead of taking the others' commits down with it.
      const isolated = batch.length > 1;
      if (isolated) await client.query("SAVEPOINT cairn_commit");
      try {
        for (const op of pending.ops) {
          // A message to no run would wait forever: the commit fails instead. Every destination's
          // row was locked above (or inserted by this batch), so the check holds until the commit.
          if (op.type === "message" && !locked.has(op.message.runId) && !touched.has(op.message.runId)) {
            throw new RunNotFoundError(op.message.runId);
          }
          // A run inserted by this batch: its row is locked before a suspend reads its inbox.
          if (op.type === "suspend" && !locked.has(op.runId)) await this.writes.lockRun(client, op.runId);
          await this.writes.apply(client, op);
          if (op.type === "run") touched.add(op.run.id);
          if (op.type === "finish" || op.type === "suspend") touched.add(op.runId);
        }
        if (isolated) await client.query("RELEASE SAVEPOINT cairn_commit");
      } catch (error) {
        if (!isolated || !(isDataError(error) || error instanceof RunNotFoundError)) throw error;
        await client.query("ROLLBACK TO SAVEPOINT cairn_commit");
        outcomes[i] = error;
      }
    }
  }

  async receive(fence: Fence, request: ReceiveRequest): Promise<ReceiveResult> {
    return retrying(() =>
      this.inTransaction(async (client) => {
        if (!(await this.writes.fenceHolds(client, fence))) throw fenced(fence);
        return this.writes.receive(client, request);
      }),
    );
  }

  async transaction(fence: Fence, body: (sql: SqlClient) => Promise<StepRecord>): Promise<void> {
    await this.inTransaction(async (client) => {
      if (!(await this.writes.fenceHolds(client, fence))) throw fenced(fence);
      const step = await body(sqlClient(client));
      await this.writes.apply(client, { type: "step", step });
    });
  }

  async getRun(id: string): Promise<RunRow | undefined> {
    const result = await this.pool.query<Raw>({ name: "cairn_get_run", text: `${RUN_SELECT} WHERE r.id = $1`, values: [id] });
    const raw = result.rows[0];
    return raw === undefined ? undefined : toRunRow(raw);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const result = await this.pool.query<Raw>({
      name: "cairn_list_runs",
      text: `${RUN_SELECT} WHERE ($1::text IS NULL OR r.status = $1) AND ($2::text IS NULL OR r.workflow = $2)
             AND ($3::text IS NULL OR r.parent_id = $3) ORDER BY r.created_at DESC, r.id LIMIT $4`,
      values: [filter.status ?? null, filter.workflow ?? null, filter.parentId ?? null, filter.limit ?? 100],
    });
    return result.rows.map(toRunRow);
  }

  async loadJournal(runId: string): Promise<StepRow[]> {
    const result = await this.pool.query<Raw>({
      name: "cairn_journal",
      text: `SELECT s.*, COALESCE(s.output, p.body) AS output_text FROM cairn_steps s
             LEFT JOIN cairn_payloads p ON p.hash = s.output_hash WHERE s.run_id = $1 ORDER BY s.seq`,
      values: [runId],
    });
    return result.rows.map(toStepRow);
  }

  async getEvent(runId: string, key: string): Promise<string | undefined> {
    const result = await this.pool.query<{ v: string }>({
      name: "cairn_get_event",
      text: `SELECT COALESCE(e.value, p.body) AS v FROM cairn_events e LEFT JOIN cairn_payloads p ON p.hash = e.value_hash
             WHERE e.run_id = $1 AND e.key = $2`,
      values: [runId, key],
    });
    return result.rows[0]?.v;
  }

  /** `SKIP LOCKED`: executors claiming at the same moment take different runs instead of queueing. */
  async claimRuns(request: ClaimRequest): Promise<RunRow[] | null> {
    // `me` renews the claimant's row and locks it: a peer removing it waits for this claim, or (if it
    // went first) leaves `me` empty and nothing is claimed. A dead executor's runs are taken only if
    // its heartbeat is still the one it was judged dead by. No row at all: null.
    const result = await retrying(() =>
      this.pool.query<Raw>({
        name: "cairn_claim_fenced",
        text: `WITH me AS (
                 UPDATE cairn_executors SET heartbeat_at = GREATEST(heartbeat_at, $3) WHERE id = $1 RETURNING id
               ), c AS (
                 UPDATE cairn_runs SET
                   recoveries = recoveries + (CASE WHEN status = 'running' THEN 1 ELSE 0 END),
                   status = 'running', executor_id = $1, wake_at = NULL, updated_at = $3
                 WHERE EXISTS (SELECT 1 FROM me) AND id IN (
                   SELECT id FROM cairn_runs
                   WHERE ($2::text IS NULL OR app_version = $2) AND workflow = ANY($6::text[]) AND (
                     status = 'enqueued'
                     OR (status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= $3)
                     OR (status = 'running' AND (executor_id IS NULL
                         OR executor_id IN (
                           SELECT e.id FROM cairn_executors e
                           JOIN unnest($4::text[], $7::bigint[]) AS d(id, heartbeat_at)
                             ON e.id = d.id AND e.heartbeat_at = d.heartbeat_at)
                         OR executor_id NOT IN (SELECT id FROM cairn_executors))))
                   ORDER BY created_at LIMIT $5
                   FOR UPDATE SKIP LOCKED)
                 RETURNING *)
               SELECT me.id AS claimant, c.*, COALESCE(c.input, pi.body) AS input_text, COALESCE(c.output, po.body) AS output_text
               FROM me
               LEFT JOIN c ON true
               LEFT JOIN cairn_payloads pi ON pi.hash = c.input_hash
               LEFT JOIN cairn_payloads po ON po.hash = c.output_hash
               ORDER BY c.created_at`,
        values: [
          request.executorId,
          request.appVersion,
          request.now,
          request.deadExecutors.map((e) => e.id),
          request.limit,
          request.workflows,
          request.deadExecutors.map((e) => e.heartbeatAt),
        ],
      }),
    );
    if (result.rows.length === 0) return null;
    return result.rows.filter((r) => r.id !== null && r.id !== undefined).map(toRunRow);
  }

  async nextWakeAt(appVersion: string | null): Promise<number | null> {
    const result = await this.pool.query<{ w: number | null }>({
      name: "cairn_next_wake",
      text: `SELECT MIN(wake_at) AS w FROM cairn_runs WHERE status = 'waiting' AND wake_at IS NOT NULL
             AND ($1::text IS NULL OR app_version = $1)`,
      values: [appVersion],
    });
    return result.rows[0]?.w ?? null;
  }

  async lostRuns(executorId: string, runIds: string[]): Promise<string[]> {
    if (runIds.length === 0) return [];
    const result = await this.pool.query<{ id: string }>({
      name: "cairn_lost_runs",
      text: `SELECT id FROM cairn_runs WHERE id = ANY($1::text[])
             AND NOT (status = 'running' AND executor_id IS NOT DISTINCT FROM $2::text)`,
      values: [runIds, executorId],
    });
    return result.rows.map((r) => r.id);
  }

  async cancelRun(runId: string, error: string, at: number): Promise<string[]> {
    return retrying(() => this.inTransaction((client) => this.writes.cancel(client, runId, error, at)));
  }

  async resumeRun(runId: string, at: number): Promise<boolean> {
    return retrying(() => this.inTransaction((client) => this.writes.resume(client, runId, at)));
  }

  async forkRun(runId: string, fromSeq: number, fork: NewRun): Promise<void> {
    await retrying(() => this.inTransaction((client) => this.writes.fork(client, runId, fromSeq, fork)));
  }

  async registerExecutor(executor: ExecutorRow): Promise<void> {
    await this.pool.query(
      `INSERT INTO cairn_executors (id, hostname, pid, pid_namespace, backend_pid, app_version, started_at, heartbeat_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (id) DO UPDATE SET backend_pid = excluded.backend_pid, heartbeat_at = excluded.heartbeat_at`,
      [
        executor.id,
        executor.hostname,
        executor.pid,
        executor.pidNamespace,
        executor.backendPid,
        executor.appVersion,
        executor.startedAt,
        executor.heartbeatAt,
      ],
    );
  }

  async heartbeat(executorId: string, at: number): Promise<boolean> {
    const result = await this.pool.query({
      name: "cairn_heartbeat",
      text: "UPDATE cairn_executors SET heartbeat_at = $1 WHERE id = $2",
      values: [at, executorId],
    });
    return (result.rowCount ?? 0) > 0;
  }

  async listExecutors(): Promise<ExecutorRow[]> {
    const result = await this.pool.query<Raw>("SELECT * FROM cairn_executors ORDER BY started_at");
    return result.rows.map(toExecutorRow);
  }

  async liveBackendPids(): Promise<Set<number> | null> {
    const result = await this.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL");
    return new Set(result.rows.map((r) => r.pid));
  }

  async transferRuns(fromId: string, toId: string, at: number): Promise<string[]> {
    const result = await this.pool.query<{ id: string }>(
      "UPDATE cairn_runs SET executor_id = $1, updated_at = $2 WHERE executor_id = $3 AND status = 'running' RETURNING id",
      [toId, at, fromId],
    );
    return result.rows.map((r) => r.id);
  }

  async removeExecutors(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.pool.query("DELETE FROM cairn_executors WHERE id = ANY($1::text[])", [ids]);
  }

  async removeDeadExecutors(dead: DeadExecutor[]): Promise<void> {
    if (dead.length === 0) return;
    await this.pool.query(
      `DELETE FROM cairn_executors e USING unnest($1::text[], $2::bigint[]) AS d(id, heartbeat_at)
       WHERE e.id = d.id AND e.heartbeat_at = d.heartbeat_at`,
      [dead.map((e) => e.id), dead.map((e) => e.heartbeatAt)],
    );
  }

  /**
   * Runs inside a READ ONLY transaction that is rolled back, over the extended protocol (which
   * takes exactly one statement, so `SELECT 1; COMMIT; DELETE ...` cannot slip past it).
   */
  async select<Row = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<Row[]> {
    const result = await this.pool.query({ text: sql, values: params });
    return result.rows as Row[];
  }

  async query(sql: string): Promise<QueryResult> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN READ ONLY");
      const result = await client.query<Record<string, unknown>>({ text: sql, queryMode: "extended" } as QueryConfig);
      return { columns: result.fields.map((f) => f.name), rows: result.rows };
    } catch (error) {
      if (sqlState(error) === "25006") {
        throw new TypeError("only read-only queries (SELECT, WITH ... SELECT) are allowed here", { cause: error });
      }
      throw error;
    } finally {
      let broken: Error | undefined;
      await client.query("ROLLBACK").catch((error: unknown) => (broken = error instanceof Error ? error : new Error(String(error))));
      client.release(broken);
    }
  }

  /**
   * The backend pid of this store's dedicated session (see `PostgresSession`): the executor's
   * liveness as other executors see it in `pg_stat_activity`. Null while that session is lost
   * and being reopened; a different pid after it was reopened.
   */
  async sessionPid(): Promise<number | null> {
    return this.session.pid();
  }

  /**
   * Calls `listener` whenever a transaction commits a wake-up on `cairn_wake` (a run enqueued or
   * resumed, a message sent, a run finished or cancelled, a suspend that found its wait already
   * over), and once if the session is lost. Notifications are not guaranteed: still poll.
   */
  onWake(listener: () => void): void {
    this.session.onWake(listener);
  }

  /**
   * Runs a one-statement flush on the writer: a connection held for the store's lifetime, since only
   * one flush is in flight at a time, which saves the pool checkout on every step. A connection
   * that fails is dropped and the next flush takes a new one.
   */
  private async onWriter<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    if (this.writer === null) {
      const client = await this.pool.connect();
      // A writer whose socket breaks while idle is released to the pool as broken (which destroys
      // it and frees its slot) — merely forgetting it would leak one pool slot per dropped connection.
      client.on("error", (error) => {
        if (this.writer === client) this.dropWriter(error);
      });
      this.writer = client;
    }
    const writer = this.writer;
    try {
      return await fn(writer);
    } catch (error) {
      // A statement's own error (constraint, data) leaves the connection usable. Anything else —
      // no SQLSTATE, or a connection/shutdown SQLSTATE such as 57P01 from pg_terminate_backend —
      // means the session is gone or going: destroy it; the next flush checks out a new one.
      const statementError = typeof (error as { code?: unknown }).code === "string" && !isTransientStoreError(error);
      if (!statementError && this.writer === writer) this.dropWriter(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
  }

  private writer: PoolClient | null = null;

  /** Gives the writer back to the pool: healthy (shutdown), or broken so the pool destroys it. */
  private dropWriter(broken?: Error): void {
    const writer = this.writer;
    if (writer === null) return;
    this.writer = null;
    writer.release(broken);
  }

  operatorQuery(sql: string, options: OperatorQueryOptions = {}): Promise<QueryResult> {
    return postgresOperatorQuery(this.pool, this.url, TYPES, sql, options);
  }

  deleteRuns(filter: RunDeleteFilter): Promise<DeletedRuns> {
    return postgresDeleteRuns(this.pool, filter, this.layers.deletion());
  }

  collectPayloads(): Promise<number> {
    return postgresCollectPayloads(this.pool, this.layers.deletion());
  }

  private async inTransaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      });
      throw error;
    } finally {
      // A connection that cannot even roll back is destroyed, not returned to the pool.
      client.release(broken);
    }
  }
}

const RUN_SELECT = `SELECT r.*, COALESCE(r.input, pi.body) AS input_text, COALESCE(r.output, po.body) AS output_text
  FROM cairn_runs r
  LEFT JOIN cairn_payloads pi ON pi.hash = r.input_hash
  LEFT JOIN cairn_payloads po ON po.hash = r.output_hash`;

/** The fast path applies when every commit is fenced, writes only steps, and no step repeats. */
/** A batch that is one unfenced commit of one new run (a top-level start). */
function runOnly(batch: PendingCommit[]): Extract<WriteOp, { type: "run" }> | null {
  if (batch.length !== 1) return null;
  const [pending] = batch;
  if (pending === undefined || pending.fence !== null || pending.ops.length !== 1) return null;
  const op = pending.ops[0]!;
  return op.type === "run" ? op : null;
}

/** A batch that is one fenced commit of one finish: the common end of a run, written in one statement. */
function finishOnly(batch: PendingCommit[]): { fence: Fence; op: Extract<WriteOp, { type: "finish" }> } | null {
  if (batch.length !== 1) return null;
  const [pending] = batch;
  if (pending === undefined || pending.fence === null || pending.ops.length !== 1) return null;
  const op = pending.ops[0]!;
  return op.type === "finish" && op.runId === pending.fence.runId ? { fence: pending.fence, op } : null;
}

function stepOnly(batch: PendingCommit[]): { fence: Fence; steps: StepRecord[] }[] | null {
  const seen = new Set<string>();
  const commits: { fence: Fence; steps: StepRecord[] }[] = [];
  for (const pending of batch) {
    if (pending.fence === null) return null;
    const steps: StepRecord[] = [];
    for (const op of pending.ops) {
      if (op.type !== "step") return null;
      const key = `${op.step.runId}\u0000${op.step.seq}`;
      if (seen.has(key)) return null;
      seen.add(key);
      steps.push(op.step);
    }
    commits.push({ fence: pending.fence, steps });
  }
  return commits;
}

/**
 * The user's SQL inside a transactional step. Each statement runs under a savepoint, so a failed
 * statement the body catches leaves the transaction usable — as it does on SQLite — instead of
 * aborting it (PostgreSQL's default).
 */
function sqlClient(client: PoolClient): SqlClient {
  async function run(text: string, params: unknown[]): Promise<pg.QueryResult> {
    await client.query("SAVEPOINT cairn_statement");
    try {
      const result = await client.query(text, params);
      await client.query("RELEASE SAVEPOINT cairn_statement");
      return result;
    } catch (error) {
      await client.query("ROLLBACK TO SAVEPOINT cairn_statement");
      throw error;
    }
  }
  return {
    async query<Row = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<Row[]> {
      return (await run(text, params)).rows as Row[];
    },
    async execute(text: string, params: unknown[] = []): Promise<{ rowCount: number }> {
      return { rowCount: (await run(text, params)).rowCount ?? 0 };
    },
  };
}

async function retrying<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= MAX_ATTEMPTS || !RETRYABLE_SQLSTATES.has(sqlState(error) ?? "")) throw error;
    }
  }
}

function migrationSql(db: pg.Pool | PoolClient): MigrationSql {
  return {
    async exec(text: string): Promise<void> {
      await db.query(text);
    },
    async all<Row>(text: string, params: unknown[] = []): Promise<Row[]> {
      return (await db.query(text, params)).rows as Row[];
    },
  };
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "the database";
  }
}

function fenced(fence: Fence): FencedError {
  return new FencedError(`executor ${fence.executorId} no longer owns run ${fence.runId}`, { runId: fence.runId });
}

/** SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation): this commit's own fault. */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && (code.startsWith("22") || code.startsWith("23"));
}
