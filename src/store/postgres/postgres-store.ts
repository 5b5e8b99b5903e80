import pg from "pg";
import type { PoolClient, QueryConfig } from "pg";
import { InvalidSpecError, NotACairnDatabaseError, RunNotFoundError } from "../../errors.js";
import { postgresConnection, type Connection, type Statement } from "../connection.js";
import { POSTGRES } from "../dialect.js";
import { checkSchema, migrationScript, type MigrationSql } from "../migration-runner.js";
import { createdRunRow, toRunRow } from "../rows.js";
import { fenced, runIdsOf, SqlStore } from "../sql-store.js";
import { runAsync, type Request, type Script } from "../script.js";
import { anyClaimable, claimableAtOnce, PARKER_FIRST, PARKER_GRACE_MS } from "../statements.js";
import { claimStatement } from "./postgres-claim.js";
import { batchDefers, deferralOf, Durability, type Deferral } from "../durability.js";
import type {
  ClaimRequest,
  CommitOptions,
  ExecutorRow,
  Fence,
  NewRun,
  OperatorQueryOptions,
  QueryResult,
  RunRow,
  SqlClient,
  StepRecord,
  Store,
  StoreCapabilities,
  WriteOp,
} from "../store.js";
import { classifyStoreError, isCancelledStoreError, isConstraintError, isRetryableStoreError, isTransientStoreError } from "../store-errors.js";
import { postgresOperatorQuery } from "./postgres-operator-query.js";
import { AnswerWatch, DEFAULT_ANSWER_TIMEOUT_MS } from "./answer-watch.js";
import { HeldClient } from "./held-client.js";
import { ownWakeChannel, PostgresSession } from "./postgres-session.js";
import { CLAIMABLE_WAKE, PostgresWrites, WAKE_CHANNEL } from "./postgres-writes.js";
import { StatementClient } from "./statement-client.js";
import { StatisticsKeeper } from "./statistics-keeper.js";

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). A transactional step holds one for its whole body. */
  poolSize?: number;
  /** Every transaction is read-only (the CLI's read commands). */
  readonly?: boolean;
  /**
   * A connection whose server has not answered one of Cairn's statements for this long is dropped,
   * and the statement fails as if the connection had been lost (answer-watch.ts): a frozen backend
   * or a half-open connection otherwise stalls the executor for about fifteen minutes, unseen.
   * Default 30_000. Not the operator's own queries (`cairn.query`, `cairn sql`), nor migrations.
   */
  answerTimeoutMs?: number;
}

interface PendingCommit {
  fence: Fence | null;
  ops: WriteOp[];
  /** CommitOptions.deferDurability and rederivable. */
  defer: Deferral;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** `commitRuns`: filled with the ids of the runs this commit created (see flush). */
  created?: Set<string>;
}

type Raw = Record<string, unknown>;

/**
 * int8 (BIGINT: every time column, COUNT, MIN) parses to a number on this store's connections
 * only; pg's global parsers stay as the application set them. Milliseconds fit a double exactly.
 */
const INT8_OID = 20;
const TYPES = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary" ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** What every pooled session runs before its first use (the pool's `onConnect`). */
const READ_COMMITTED = "SET default_transaction_isolation = 'read committed'";

/** Key of the advisory lock that makes concurrent `migrate()` calls take turns ("cairn" in ASCII). */
const MIGRATION_LOCK = 0x636169726e;

/** Deadlocks and serialization failures abort a transaction that may simply run again, this often. */
const MAX_ATTEMPTS = 5;
/** How often a statement cancelled before it committed is tried in all (few: a timeout that recurs is load). */
const CANCELLED_ATTEMPTS = 3;

/** How long `close()` waits for the commit in flight and the connections to end. */
const CLOSE_BOUND_MS = 5_000;

/** The most due runs a full parker hands on in one pass (PostgresStore.passOnClaimable). */
const HAND_ON_LIMIT = 64;

/**
 * The scale-out backend: many executor processes, on many machines, share one PostgreSQL.
 *
 * Group commit: at most one flush is in flight; commits that arrive meanwhile queue, and the next
 * flush takes them all. A batch of fenced commits that only write steps (the steady state of
 * running workflows) is one autocommitted statement — one round trip, one WAL flush for the whole
 * batch. So are a batch of starts (unfenced commits that only create runs: `startMany`, or
 * concurrent `start()` calls) and a batch of fenced commits of distinct runs that write steps,
 * record completions and finish (runs waking together). Any other batch is one transaction on one
 * connection: every run row it writes locked in one statement, then each commit's ops in order.
 *
 * Each store also keeps one dedicated session for its lifetime (`PostgresSession`): its backend
 * pid is the executor's liveness, and it LISTENs for wake-ups.
 */
export class PostgresStore extends SqlStore<PoolClient> implements Store {
  readonly backend = "postgres" as const;
  /** Both through the store's dedicated session (`PostgresSession`). */
  readonly capabilities: StoreCapabilities = { sessionLiveness: this, wakeNotifications: this };
  private readonly pool: pg.Pool;
  private readonly poolConnection: Connection;
  private readonly writes = new PostgresWrites(this.layers, () => this.session.currentOwnChannel());
  private queue: PendingCommit[] = [];
  private flushing: Promise<void> | null = null;
  private readonly session: PostgresSession;
  readonly durability = new Durability();

  constructor(
    readonly url: string,
    options: PostgresStoreOptions = {},
  ) {
    super(POSTGRES);
    const answerTimeoutMs = options.answerTimeoutMs ?? DEFAULT_ANSWER_TIMEOUT_MS;
    if (typeof answerTimeoutMs !== "number" || !(answerTimeoutMs > 0) || !Number.isFinite(answerTimeoutMs)) {
      throw new InvalidSpecError("answerTimeoutMs", answerTimeoutMs, "must be a number of milliseconds > 0");
    }
    this.pool = new pg.Pool({
      Client: StatementClient,
      connectionString: url,
      max: options.poolSize ?? 10,
      types: TYPES,
      keepAlive: true,
      // A checkout that cannot get a connection (the server is down, every slot busy) fails
      // instead of waiting forever; the error is transient, so its caller retries with backoff.
      connectionTimeoutMillis: 10_000,
      ...(options.readonly ? { options: "-c default_transaction_read_only=on" } : {}),
      // Cairn's statements are written for READ COMMITTED: a statement that waited for a row lock,
      // or the migrations after their advisory lock, see what committed meanwhile. A database
      // whose default a DBA raised to REPEATABLE READ or SERIALIZABLE made two processes launching
      // together both create the tables ("relation cairn_runs already exists"), the second on a
      // snapshot taken before the first committed. pg-pool runs this on each new connection before
      // handing it out, its error listener already on (a connection lost meanwhile is an error of
      // the checkout, not an uncaught one).
      onConnect: (client: pg.ClientBase) => client.query(READ_COMMITTED),
    });
    // An idle pooled connection that breaks (a server restart) is discarded by the pool and the
    // next checkout opens a new one; without a listener the 'error' event would kill the process.
    this.pool.on("error", () => undefined);
    this.answers = new AnswerWatch(this.pool, answerTimeoutMs);
    this.writer = new HeldClient(this.pool);
    this.layerClient = new HeldClient(this.pool);
    this.session = new PostgresSession(url, TYPES);
    this.poolConnection = postgresConnection(this.pool);
    this.statistics = new StatisticsKeeper(this.pool);
  }

  /** Drops connections whose server stopped answering (answer-watch.ts). */
  private readonly answers: AnswerWatch;

  /** Keeps the planner's statistics of Cairn's tables in step with them while an executor of this store runs (statistics-keeper.ts). */
  private readonly statistics: StatisticsKeeper;

  override async registerExecutor(executor: ExecutorRow): Promise<void> {
    await super.registerExecutor(executor);
    this.statistics.start();
  }

  protected reader(): Connection {
    return (this.readConnection ??= retryingCancelled(this.poolConnection));
  }

  /** The pool, for reads: a read cancelled by a timeout or an operator is tried again (see retrying). */
  private readConnection: Connection | undefined;

  protected write<T>(fn: (db: Connection) => Promise<T>): Promise<T> {
    return fn(this.poolConnection);
  }

  /** A transaction on one pooled connection, run again on a deadlock or serialization failure. */
  protected writeTransaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return retrying(() => this.inTransaction(fn));
  }

  protected connection(client: PoolClient): Connection {
    return postgresConnection(client);
  }

  protected transact<T>(script: () => Script<T>): Promise<T> {
    return retrying(() =>
      this.inTransaction((client) => {
        const db = postgresConnection(client);
        return runAsync(script(), (request) => this.perform(client, db, request));
      }),
    );
  }

  private async perform(client: PoolClient, db: Connection, request: Request): Promise<unknown> {
    if (request.kind === "all") return db.all(request.statement, request.params);
    if (request.kind === "run") return db.run(request.statement, request.params);
    const act = request.act;
    switch (act.type) {
      case "fenceHolds":
        return this.writes.fenceHolds(client, act.fence);
      case "writeStep":
        return this.writes.apply(client, { type: "step", step: act.step });
      case "writeRun":
        return this.writes.apply(client, { type: "run", run: act.run });
      case "wakeParent":
        return this.writes.wakeParent(client, act.runId, act.at);
      case "notifyWake":
        return client.query(`NOTIFY ${WAKE_CHANNEL}`);
      case "lockMigrations":
        return client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    }
  }

  protected async lockPayloads(client: PoolClient): Promise<void> {
    await client.query("LOCK TABLE cairn_payloads IN SHARE ROW EXCLUSIVE MODE");
  }

  async migrate(): Promise<void> {
    await this.assertUtf8();
    await this.transact(() => migrationScript(this.layers, Date.now));
  }

  /**
   * Cairn keeps inputs, outputs, messages and errors as UTF-8 text. A database in another encoding
   * (LATIN1, say) refused every value with a character it lacks (22P05) — a run failed on its first
   * "✓" — so it is refused at launch, before anything is written, with what to do instead.
   * SQL_ASCII, which stores bytes unchecked, holds UTF-8 as it is.
   */
  private async assertUtf8(): Promise<void> {
    const encoding = (await this.pool.query<{ e: string }>("SELECT current_setting('server_encoding') AS e")).rows[0]?.e;
    if (encoding === undefined || encoding === "UTF8" || encoding === "SQL_ASCII") return;
    throw new InvalidSpecError(
      "database",
      redactedUrl(this.url),
      `its encoding is ${encoding}, which cannot hold all of the UTF-8 text Cairn stores — create the database with ENCODING 'UTF8'`,
    );
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
      await this.statistics.stop();
      while (this.flushing !== null) await this.flushing;
      this.writer.release();
      this.layerClient.release();
      await this.session.close();
      await this.pool.end();
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closing, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_BOUND_MS)))]);
    clearTimeout(timer);
    this.answers.stop(); // watching to the end: a commit in flight that hangs is dropped, not waited for
  }

  commit(fence: Fence | null, ops: WriteOp[], options?: CommitOptions): Promise<void> {
    return this.enqueue(fence, ops, deferralOf(options));
  }

  private enqueue(fence: Fence | null, ops: WriteOp[], defer: Deferral, created?: Set<string>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ fence, ops, defer, resolve, reject, ...(created === undefined ? {} : { created }) });
      this.flushing ??= this.flushQueue();
    });
  }

  /**
   * A start without a read-back: the insert says which runs it created, and a created run's row is
   * the one it wrote. Only the ids that existed already are read.
   */
  override async commitRuns(ops: WriteOp[]): Promise<Map<string, RunRow>> {
    const created = new Set<string>();
    await this.enqueue(null, ops, "wait", created);
    const rows = new Map<string, RunRow>();
    for (const op of ops) {
      if (op.type === "run" && created.has(op.run.id) && !rows.has(op.run.id)) rows.set(op.run.id, createdRunRow(op.run));
    }
    const existing = runIdsOf(ops).filter((id) => !rows.has(id));
    if (existing.length > 0) for (const [id, row] of await this.runsById(existing)) rows.set(id, row);
    return rows;
  }

  /** Drains the queue one batch at a time; never rejects (each batch settles its own callers). */
  private async flushQueue(): Promise<void> {
    // Commits made in this turn of the event loop (the steps of a Promise.all) join the first batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queue.length > 0) {
      // Bounded: a batch holds its runs' row locks until it commits, and a run's select or receive
      // (FOR UPDATE on its row) waits that long; hundreds of commits in one transaction held them
      // for seconds under a recovery's backlog.
      const batch = this.queue.length <= MAX_BATCH_COMMITS ? this.queue : this.queue.slice(0, MAX_BATCH_COMMITS);
      this.queue = batch === this.queue ? [] : this.queue.slice(MAX_BATCH_COMMITS);
      await this.flush(batch);
    }
    this.flushing = null;
  }

  private async flush(batch: PendingCommit[]): Promise<void> {
    const outcomes: unknown[] = new Array(batch.length).fill(null);
    // External synchrony (store.ts, CommitOptions): a batch of deferred commits does not wait for
    // its WAL flush (`synchronous_commit = off` for its transaction). Finishes take their fast path
    // (the statement turns the setting off itself); any other shape, the general path.
    const deferred = batchDefers(batch);
    const covers = this.durability.batchStarts();
    // Starts are idempotent inserts (ON CONFLICT DO NOTHING; a start that did land is read back as
    // existing): one whose connection broke under it — an idle pooled connection the server's
    // restart killed — is tried again on a new one, instead of failing the caller's start().
    const reconnects = runsOnly(batch) === null ? 0 : START_RECONNECTS;
    try {
      await retrying(async () => {
        outcomes.fill(null);
        for (const pending of batch) pending.created?.clear();
        const finish = finishOnly(batch);
        const steps = stepOnly(batch);
        if (deferred && finish === null && (steps !== null || !fencedOnly(batch))) return this.applyInTransaction(batch, outcomes, true);
        const single = steps?.length === 1 && steps[0]!.steps.length === 1 && steps[0]!.steps[0]!.output?.hash == null ? steps[0]! : null;
        const newRuns = runsOnly(batch);
        if (newRuns !== null && newRuns.length === 1) {
          // A run's row (and its input's payload) is one statement: it needs no transaction.
          if (await this.onWriter((writer) => this.writes.createRun(writer, newRuns[0]!))) batch[0]!.created?.add(newRuns[0]!.id);
        } else if (newRuns !== null) {
          // Starts that met in this flush (or one startMany): one multi-row statement. One whose data
          // the database refuses would take the others down with it: the general path, where each
          // commit has its savepoint, sorts them out.
          try {
            const created = await this.onWriter((writer) => this.writes.runBatch(writer, newRuns));
            // The statement inserts the first start of an id in the batch (see runBatch): its creator.
            for (const pending of batch) {
              for (const op of pending.ops) {
                if (op.type === "run" && created.delete(op.run.id)) pending.created?.add(op.run.id);
              }
            }
          } catch (error) {
            if (batch.length === 1 || !isConstraintError(error)) throw error;
            await this.inTransaction((client) => this.applyBatch(client, batch, outcomes, true));
          }
        } else if (finish !== null) {
          const held = await this.onWriter((writer) => this.writes.finishSingle(writer, finish.fence, finish.op, deferred));
          if (!held) outcomes[0] = fenced(finish.fence);
        } else if (single !== null) {
          const held = await this.onWriter((writer) => this.writes.stepSingle(writer, single.fence, single.steps[0]!));
          if (!held) outcomes[0] = fenced(single.fence);
        } else if (steps !== null) {
          let held: Set<number> | null = null;
          try {
            held = await this.onWriter((writer) => this.writes.stepBatch(writer, steps));
          } catch (error) {
            // As for starts: the general path gives each commit its savepoint, so a bad one fails alone.
            if (batch.length === 1 || !isConstraintError(error)) throw error;
            await this.inTransaction((client) => this.applyBatch(client, batch, outcomes, true));
          }
          batch.forEach((pending, i) => {
            if (held !== null && !held.has(i)) outcomes[i] = fenced(pending.fence!);
          });
        } else if (fencedOnly(batch)) {
          const commits = batch.map((pending) => ({ fence: pending.fence!, ops: pending.ops }));
          let held: Set<number> | null = null;
          try {
            held = await this.onWriter((writer) => this.writes.fencedBatch(writer, commits, deferred));
          } catch (error) {
            // As for starts: the general path gives each commit its savepoint, so a bad one fails alone.
            if (batch.length === 1 || !isConstraintError(error)) throw error;
            await this.inTransaction((client) => this.applyBatch(client, batch, outcomes, true));
          }
          batch.forEach((pending, i) => {
            if (held !== null && !held.has(i)) outcomes[i] = fenced(pending.fence!);
          });
        } else {
          await this.applyInTransaction(batch, outcomes);
        }
      }, reconnects);
    } catch (error) {
      outcomes.fill(error);
    }
    this.durability.batchSettled(batch, outcomes, covers, deferred);
    batch.forEach((pending, i) => (outcomes[i] === null ? pending.resolve() : pending.reject(outcomes[i])));
  }

  /**
   * The general path's transaction (`deferDurability`: see inTransaction). Optimistically without a
   * savepoint per commit (two round trips each); only when one commit's data breaks a constraint is
   * the batch done again, each commit isolated.
   */
  private async applyInTransaction(batch: PendingCommit[], outcomes: unknown[], deferDurability = false): Promise<void> {
    try {
      await this.inTransaction((client) => this.applyBatch(client, batch, outcomes, false), deferDurability);
    } catch (error) {
      if (batch.length === 1 || !(isConstraintError(error) || error instanceof RunNotFoundError)) throw error;
      outcomes.fill(null);
      for (const pending of batch) pending.created?.clear();
      await this.inTransaction((client) => this.applyBatch(client, batch, outcomes, true), deferDurability);
    }
  }

  /**
   * The general path. Every run row the batch will write is locked up front, in one statement
   * and in id order, which also reads each fence. Only this transaction can change a locked run's
   * status or owner afterwards, so a fence is read again, in order, only when an earlier commit of
   * the batch wrote to its run (finished it, suspended it, or inserted it).
   */
  private async applyBatch(client: PoolClient, batch: PendingCommit[], outcomes: unknown[], isolate: boolean): Promise<void> {
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
      // Several commits share the transaction. Isolated (the second try, see flush), each gets a
      // savepoint, so one whose data breaks a constraint fails alone instead of taking the others'
      // commits down with it.
      const isolated = isolate && batch.length > 1;
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
          if (op.type !== "run") await this.writes.apply(client, op);
          else if (await this.writes.createRun(client, op.run)) pending.created?.add(op.run.id);
          if (op.type === "run") touched.add(op.run.id);
          if (op.type === "finish" || op.type === "suspend") touched.add(op.runId);
        }
        if (isolated) await client.query("RELEASE SAVEPOINT cairn_commit");
      } catch (error) {
        if (!isolated || !(isConstraintError(error) || error instanceof RunNotFoundError)) throw error;
        await client.query("ROLLBACK TO SAVEPOINT cairn_commit");
        pending.created?.clear();
        outcomes[i] = error;
      }
    }
  }

  async transaction(fence: Fence, body: (sql: SqlClient) => Promise<StepRecord>): Promise<void> {
    await this.inTransaction(async (client) => {
      if (!(await this.writes.fenceHolds(client, fence))) throw fenced(fence);
      const step = await body(sqlClient(client));
      await this.writes.apply(client, { type: "step", step });
    });
  }

  /** `SKIP LOCKED`: executors claiming at the same moment take different runs instead of queueing. */
  async claimRuns(request: ClaimRequest): Promise<RunRow[] | null> {
    const values = [
      request.executorId,
      request.appVersion,
      request.now,
      POSTGRES.deadExecutors(request.deadExecutors),
      request.limit,
      POSTGRES.list(request.workflows),
      this.session.currentOwnChannel(),
    ];
    // A look first, which writes nothing: most claims find nothing (every executor woken by a
    // NOTIFY claims, one gets the run), and the claim's renewal of the claimant's row was a write
    // whose commit waited for a WAL flush, in every executor at every wake-up. A run that becomes
    // claimable after the look comes with its own NOTIFY, and the next pass takes it.
    const allVersions = request.appVersion === null;
    const [look] = (
      await retrying(() =>
        this.pool.query<{ alive: boolean; any: boolean }>({
          name: allVersions ? "cairn_claim_look_all_versions" : "cairn_claim_look",
          text: `SELECT EXISTS (SELECT 1 FROM cairn_executors WHERE id = $1) AS alive,
                   $5::int > 0 AND (${allVersions ? (this.lookAllVersions ??= anyClaimable(POSTGRES, this.heldRuns(), true, PARKER_FIRST)) : (this.lookThisVersion ??= anyClaimable(POSTGRES, this.heldRuns(), false, PARKER_FIRST))}) AS any`,
          values,
        }),
      )
    ).rows;
    if (look?.alive !== true) return null;
    if (look.any !== true) return [];
    // One statement: renew our row, pick and take the runs (postgres-claim.ts). No row at all: null.
    const result = await retrying(() =>
      this.pool.query<Raw>({
        name: allVersions ? "cairn_claim_all_versions" : "cairn_claim",
        text: allVersions
          ? (this.claimAllVersions ??= claimStatement(this.heldRuns(), true))
          : (this.claimThisVersion ??= claimStatement(this.heldRuns(), false)),
        values,
      }),
    );
    if (result.rows.length === 0) return null;
    return result.rows.filter((r) => r.id !== null && r.id !== undefined).map(toRunRow);
  }

  /** Its session's own wake channel: what a run this store parks carries (ParkerFirst, statements.ts). */
  ownParker(): string | null {
    return this.session.currentOwnChannel();
  }

  /** The claim, built once the layers are registered (their `holdsRuns` are in it): for this version, for all. */
  private claimThisVersion: string | undefined;
  private claimAllVersions: string | undefined;
  /** The look before it (whether any run is claimable), likewise. */
  private lookThisVersion: string | undefined;
  private lookAllVersions: string | undefined;

  protected async notifyWake(client: PoolClient): Promise<void> {
    await client.query(`NOTIFY ${WAKE_CHANNEL}`);
  }

  async liveBackendPids(): Promise<Set<number> | null> {
    const result = await this.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL");
    return new Set(result.rows.map((r) => r.pid));
  }

  /** The layers' parameterised reads: one statement on a pooled connection, `$n` placeholders. */
  async select<Row = Record<string, unknown>>(sql: string | Statement, params: unknown[] = []): Promise<Row[]> {
    return this.poolConnection.all<Row>(typeof sql === "string" ? { text: sql } : sql, params);
  }

  /**
   * Runs inside a READ ONLY transaction that is rolled back, over the extended protocol (which
   * takes exactly one statement, so `SELECT 1; COMMIT; DELETE ...` cannot slip past it).
   */
  async query(sql: string, params: unknown[] = []): Promise<QueryResult> {
    const client = await this.pool.connect();
    // As in inTransaction: a socket error while checked out must not crash the process.
    const ignore = (): void => undefined;
    client.on("error", ignore);
    try {
      await client.query("BEGIN READ ONLY");
      const result = await client.query<Record<string, unknown>>({ text: sql, values: params, queryMode: "extended" } as QueryConfig);
      return { columns: result.fields.map((f) => f.name), rows: result.rows };
    } catch (error) {
      if (sqlState(error) === "25006") {
        throw new TypeError("only read-only queries (SELECT, WITH ... SELECT) are allowed here", { cause: error });
      }
      throw error;
    } finally {
      let broken: Error | undefined;
      await client.query("ROLLBACK").catch((error: unknown) => (broken = error instanceof Error ? error : new Error(String(error))));
      client.removeListener("error", ignore);
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

  currentSessionPid(): number | null {
    return this.session.currentPid();
  }

  /**
   * Calls `listener` whenever a transaction commits a wake-up on `cairn_wake` (a run enqueued or
   * resumed, a message sent, a run finished or cancelled, a suspend that found its wait already
   * over), and once if the session is lost. Notifications are not guaranteed: still poll.
   */
  onWake(listener: (payload?: string) => void): void {
    this.session.onWake(listener);
  }

  currentOwnChannel(): string | null {
    return this.session.currentOwnChannel();
  }

  ownChannelOf(backendPid: number): string {
    return ownWakeChannel(backendPid);
  }

  async passOnClaimable(appVersion: string, now: number, ownDueOnly = false): Promise<void> {
    // Started runs (left alone if a layer holds them: a queued run waits for its queue's dispatch,
    // not for a claim) and waiting runs fallen due (a message or a child's end woke them) that a
    // peer may claim: not those a live peer parked, due less than the grace ago (ParkerFirst).
    // The EXISTS read the statement's snapshot: the runs handed on are `released`.
    // The hand-on skips rows locked by a write in flight (a message's, a child's end's: that write
    // sends the run its own wake-up): waiting for them, in its own order, could deadlock with a
    // group commit that locks runs by id. It hands on only runs still within the grace (one past
    // it is anyone's already), only if another executor is registered (of any version: one
    // recovering every version claims ours too), and at most HAND_ON_LIMIT a pass (the earliest
    // due; peers take the rest at the grace's end): with 10,000 runs falling due at once, a lone
    // executor's full passes rewrote all 10,000 rows for nobody, locking the rows its own claims
    // were reaching for (`bench:scale --only wake`, p99 ~700 → 750–1,240 ms). A limit spent on
    // runs past the grace, or a version-filtered peer check, kept a message's run from a peer told
    // to look (a review measured ~520 ms, a peer's poll).
    this.passOnStatement ??= `WITH released AS (
        UPDATE cairn_runs SET wake_channel = NULL
        WHERE id IN (SELECT id FROM cairn_runs
          WHERE status = 'waiting' AND app_version = $1 AND wake_at <= $2 AND wake_at > $2 - ${PARKER_GRACE_MS} AND wake_channel = $3
            AND EXISTS (SELECT 1 FROM cairn_executors e WHERE e.wake_channel IS DISTINCT FROM $3)
          ORDER BY wake_at LIMIT ${HAND_ON_LIMIT} FOR UPDATE SKIP LOCKED)
        RETURNING 1)
      SELECT pg_notify('${WAKE_CHANNEL}', '${CLAIMABLE_WAKE}')
      WHERE EXISTS (SELECT 1 FROM released) OR (NOT $4::boolean AND (
        EXISTS (SELECT 1 FROM cairn_runs WHERE status = 'enqueued' AND held_by IS NULL AND app_version = $1
          ${this.heldRuns()
            .map((held) => `AND NOT (${held})`)
            .join(" ")})
        OR EXISTS (SELECT 1 FROM cairn_runs WHERE status = 'waiting' AND app_version = $1 AND wake_at <= $2
          AND (${claimableAtOnce("$3")} OR wake_at <= $2 - ${PARKER_GRACE_MS}))))`;
    await this.pool.query({
      name: "cairn_pass_on_claimable",
      text: this.passOnStatement,
      values: [appVersion, now, this.session.currentOwnChannel(), ownDueOnly],
    });
  }

  private passOnStatement: string | undefined;

  /** Runs a one-statement flush on the writer (HeldClient: only one flush is in flight at a time). */
  private onWriter<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.writer.use(fn);
  }

  /** The group commit's connection. */
  private readonly writer: HeldClient;
  /** The layers' writing statements' connection (see execute). */
  private readonly layerClient: HeldClient;

  /**
   * On a connection of their own (HeldClient): the scheduler's dispatch function is compiled and
   * planned once in that session, not again in each pooled one a call lands on.
   */
  override execute<Row = Record<string, unknown>>(statement: Statement, params: readonly unknown[], options?: { concurrent?: boolean }): Promise<Row[]> {
    if (options?.concurrent === true) return super.execute(statement, params); // one autocommit statement on the pool
    return this.layerClient.use((client) => postgresConnection(client).all<Row>(statement, params));
  }

  operatorQuery(sql: string, options: OperatorQueryOptions = {}): Promise<QueryResult> {
    return postgresOperatorQuery(this.pool, this.url, TYPES, sql, options);
  }

  /**
   * `deferDurability`: the commit does not wait for its WAL to be flushed (SET LOCAL, so only this
   * transaction; sent with BEGIN as one simple query, one round trip).
   */
  private async inTransaction<T>(fn: (client: PoolClient) => Promise<T>, deferDurability = false): Promise<T> {
    const client = await this.pool.connect();
    // pg emits a socket error (a server restart, a terminated backend) on the checked-out client as
    // well as failing its query; the pool listens only while a client is idle, so with no listener
    // here the 'error' event would crash the process. The failed query carries the error to us.
    const ignore = (): void => undefined;
    client.on("error", ignore);
    let broken: Error | undefined;
    try {
      await client.query(deferDurability ? "BEGIN; SET LOCAL synchronous_commit = off" : "BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => {
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      });
      // A session the database failed under, or that holds a stale prepared statement or may not
      // write (store-errors.ts), would fail the next use as well: drop it.
      if (isTransientStoreError(error)) broken ??= error as Error;
      throw error;
    } finally {
      // A connection that cannot even roll back is destroyed, not returned to the pool.
      client.removeListener("error", ignore);
      client.release(broken);
    }
  }
}

/**
 * The most commits one flush writes in one transaction (see flushQueue). Larger batches cost the
 * server less per commit (10,000 runs waking at once: 84 flushes of 128 took 1.3–2.0 s of writer
 * time, 26–31 of 512 took 0.75–1.0 s); a batch this size is a few tens of milliseconds.
 */
const MAX_BATCH_COMMITS = 512;

/**
 * A batch of unfenced commits that only create runs (top-level starts, `startMany`): their new
 * runs, in commit order. Null for any other batch.
 */
function runsOnly(batch: PendingCommit[]): NewRun[] | null {
  const runs: NewRun[] = [];
  for (const pending of batch) {
    if (pending.fence !== null || pending.ops.length === 0) return null;
    for (const op of pending.ops) {
      if (op.type !== "run") return null;
      runs.push(op.run);
    }
  }
  return runs;
}

/** A batch that is one fenced commit of one finish: the common end of a run, written in one statement. */
function finishOnly(batch: PendingCommit[]): { fence: Fence; op: Extract<WriteOp, { type: "finish" }> } | null {
  if (batch.length !== 1) return null;
  const [pending] = batch;
  if (pending === undefined || pending.fence === null || pending.ops.length !== 1) return null;
  const op = pending.ops[0]!;
  return op.type === "finish" && op.runId === pending.fence.runId ? { fence: pending.fence, op } : null;
}

/**
 * `fencedBatch`'s batches: fenced commits of distinct runs, each writing only its own run's steps
 * (no seq twice), completions and at most one finish, last — many runs waking at once.
 */
function fencedOnly(batch: PendingCommit[]): boolean {
  const runs = new Set<string>();
  for (const pending of batch) {
    const fence = pending.fence;
    if (fence === null || runs.has(fence.runId)) return false;
    runs.add(fence.runId);
    const seqs = new Set<number>();
    for (const [i, op] of pending.ops.entries()) {
      if (op.type === "step") {
        if (op.step.runId !== fence.runId || seqs.has(op.step.seq)) return false;
        seqs.add(op.step.seq);
      } else if (op.type === "completion") {
        if (op.runId !== fence.runId) return false;
      } else if (op.type === "finish") {
        if (op.runId !== fence.runId || i !== pending.ops.length - 1) return false;
      } else {
        return false;
      }
    }
  }
  return true;
}

/** The fast path applies when every commit is fenced, writes only steps, and no step repeats. */
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

/**
 * Runs `fn` again on a deadlock or serialization failure; after a short pause, on a statement
 * cancelled before it committed (CANCELLED_ATTEMPTS in all: a commit cancelled once by an operator
 * or a timeout goes through, where before its run was let go, replayed, and its step's effect done
 * again); and — `reconnects` times, after a short pause — on a broken connection (only for work
 * that may run twice: see flush). Each error meant the transaction did not commit.
 */
async function retrying<T>(fn: () => Promise<T>, reconnects = 0): Promise<T> {
  for (let attempt = 1, reconnected = 0; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt < MAX_ATTEMPTS && isRetryableStoreError(error)) continue;
      if (attempt < CANCELLED_ATTEMPTS && isCancelledStoreError(error)) {
        // A pause, not at once: a statement_timeout that a loaded server hit is not hit again the same instant.
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_PAUSE_MS * attempt));
        continue;
      }
      if (reconnected >= reconnects || !isTransientStoreError(error)) throw error;
      reconnected++;
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_PAUSE_MS * reconnected));
    }
  }
}

/** `connection`, its statements tried again as `retrying` does (they read, or may run again). */
function retryingCancelled(connection: Connection): Connection {
  return {
    all: (statement, params) => retrying(() => connection.all(statement, params)),
    run: (statement, params) => retrying(() => connection.run(statement, params)),
  };
}

/** How many times a flush of starts is tried again on a new connection, and the pause before each (growing). */
const START_RECONNECTS = 3;
const RECONNECT_PAUSE_MS = 50;

function migrationSql(db: pg.Pool | PoolClient): MigrationSql {
  return {
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
