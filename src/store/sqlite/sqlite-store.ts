import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { resolve } from "node:path";
import { NotACairnDatabaseError } from "../../errors.js";
import { SqliteStatements, type Connection, type Statement } from "../connection.js";
import { Mutex } from "../mutex.js";
import { SQLITE } from "../dialect.js";
import { checkSchema, migrationScript, type MigrationSql } from "../migration-runner.js";
import { positionalPlaceholders, toRunRow } from "../rows.js";
import { fenced, SqlStore } from "../sql-store.js";
import { runSync, type Request, type Script } from "../script.js";
import { CLAIM_SET, claimIds, PARKER_FIRST } from "../statements.js";
import { batchDefers, deferralOf, Durability, type Deferral } from "../durability.js";
import type {
  ClaimRequest,
  CommitOptions,
  Fence,
  NewRun,
  OperatorQueryOptions,
  QueryResult,
  ReleaseClaim,
  RunRow,
  SqlClient,
  StepRecord,
  Store,
  StoreCapabilities,
  WriteOp,
} from "../store.js";
import { sqliteOperatorQuery } from "./sqlite-operator-query.js";

/** The claim's fence inside an immediate transaction (one writer: the row cannot go before the commit). */
const EXECUTOR_EXISTS = "SELECT 1 AS ok FROM cairn_executors WHERE id = $1";
import { SqliteWrites } from "./sqlite-writes.js";
import { presizeWal } from "./wal-presize.js";

/** Whether a write ends or unloads a run, freeing its executor's slot (see `claimOnRelease`). */
function releasesRun(op: WriteOp): op is Extract<WriteOp, { type: "finish" | "suspend" }> {
  return op.type === "finish" || op.type === "suspend";
}

export interface SqliteStoreOptions {
  /** "FULL" (the default) survives power loss; "NORMAL" survives process crashes only. */
  synchronous?: "FULL" | "NORMAL" | "OFF";
  /** Open without creating or writing (the CLI's read commands). */
  readonly?: boolean;
}

interface PendingCommit {
  fence: Fence | null;
  ops: WriteOp[];
  /** CommitOptions.deferDurability and rederivable. */
  defer: Deferral;
  resolve: () => void;
  reject: (error: unknown) => void;
}

type Raw = Record<string, unknown>;

/** A commit of a group broke while the group was written without savepoints (see writeBatch). */
class CommitBroke extends Error {
  constructor(override readonly cause: unknown) {
    super("a commit of the group failed");
  }
}

/**
 * The embedded backend: one SQLite file in WAL mode. better-sqlite3 is synchronous, so group
 * commit works by deferring: commits that arrive during one turn of the event loop (the steps of
 * many concurrent runs finishing together) are written in one transaction on the next turn, and
 * pay for one fsync. A user's transactional step holds the connection across its awaits, so every
 * write goes through one mutex.
 */
/**
 * One write lock per database file in this process, shared by every store open on it. SQLite's
 * busy wait (busy_timeout) sleeps on the calling thread: a second store in this process beginning a
 * write while the first holds the file's write lock across an await would block the very thread
 * the first needs to commit, and fail with "database is locked" after 10 s. Waiting on a shared
 * async lock instead, the second store's write starts when the first's ends. Other processes still
 * meet SQLite's own lock and busy wait, which is right there: they have threads of their own.
 */
const fileLocks = new Map<string, Mutex>();

function writeLockFor(path: string): Mutex {
  if (path === "" || path === ":memory:" || path.startsWith("file:")) return new Mutex();
  const key = resolve(path);
  let lock = fileLocks.get(key);
  if (lock === undefined) {
    lock = new Mutex();
    fileLocks.set(key, lock);
  }
  return lock;
}

export class SqliteStore extends SqlStore<null> implements Store {
  readonly backend = "sqlite" as const;
  /** One process's file: no session other executors could watch, and executors poll for work. */
  readonly capabilities: StoreCapabilities = { sessionLiveness: null, wakeNotifications: null };
  private readonly db: Database.Database;
  private readonly writes: SqliteWrites;
  private readonly statements: SqliteStatements;
  private readonly lock: Mutex;
  /**
   * This store's name as the parker of the runs it suspends (Store.ownParker): unique to this open
   * store, so each executor sharing the file — in this process or another — knows its own runs.
   */
  private readonly parker = `sqlite_${randomBytes(8).toString("hex")}`;
  private queue: PendingCommit[] = [];
  private flushScheduled = false;
  readonly durability = new Durability();
  /**
   * Deferred commits run at NORMAL only when the store is FULL (or EXTRA): below that no commit
   * waits for an fsync, and there is nothing to defer.
   */
  private readonly deferrable: boolean;
  private readonly synchronousNormal: Database.Statement | null = null;
  private readonly synchronousRestore: Database.Statement | null = null;

  constructor(
    readonly path: string,
    options: SqliteStoreOptions = {},
  ) {
    super(SQLITE);
    this.lock = writeLockFor(path);
    this.db = new Database(path, options.readonly ? { readonly: true, fileMustExist: true } : {});
    this.db.pragma("busy_timeout = 10000");
    // Temporary b-trees (a MATERIALIZED CTE, a sort, a DISTINCT) in memory. In a file (SQLite's
    // default here) each one opened a pager of its own and freed it again: the heap grew and was
    // trimmed at every statement (brk, fresh zeroed pages), which made a queue's batch dispatch
    // statement (a dozen such b-trees over ~100 rows) cost 3.8 ms instead of 0.7 ms — the largest
    // part of SQLite's queued drain. Cairn's own statements keep a few hundred rows in them at most;
    // the operator's ad-hoc SQL runs in a process of its own (sqlite-operator-query.ts).
    this.db.pragma("temp_store = MEMORY");
    if (!options.readonly) {
      this.db.pragma("journal_mode = WAL");
      this.db.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
    }
    // PRAGMA synchronous is the connection's, and may change between transactions: a deferred
    // batch commits at NORMAL (its WAL frames are written, not fsynced), and the connection goes
    // back to FULL at once, so every other write here still fsyncs — and the next commit at FULL
    // fsyncs the whole WAL file, the deferred frames with it.
    this.deferrable = !options.readonly && (options.synchronous ?? "FULL") === "FULL";
    if (this.deferrable) {
      this.synchronousNormal = this.db.prepare("PRAGMA synchronous = NORMAL");
      this.synchronousRestore = this.db.prepare("PRAGMA synchronous = FULL");
    }
    this.statements = new SqliteStatements(this.db);
    this.writes = new SqliteWrites(this.db, this.statements, this.layers, this.parker);
    this.applyBatch = this.db.transaction((batch: PendingCommit[], outcomes: unknown[], isolated: boolean) => {
      batch.forEach((pending, i) => {
        if (pending.fence !== null && !this.writes.fenceHolds(pending.fence)) {
          outcomes[i] = fenced(pending.fence);
          return;
        }
        if (!isolated) {
          try {
            for (const op of pending.ops) this.writes.apply(op);
          } catch (error) {
            throw new CommitBroke(error);
          }
          return;
        }
        // Each commit in a savepoint of its own: one that breaks a constraint fails alone.
        try {
          this.applyInSavepoint(pending.ops);
        } catch (error) {
          outcomes[i] = error;
        }
      });
    });
    this.writeGroup = this.db.transaction((batch: PendingCommit[], outcomes: unknown[]) => this.writeGroupWithin(batch, outcomes));
    // Called inside the group commit's transaction, better-sqlite3 runs this as a savepoint.
    this.applyInSavepoint = this.db.transaction((ops: WriteOp[]) => {
      for (const op of ops) this.writes.apply(op);
    });
  }

  /**
   * The group's commits in one transaction. Several commits share it, and one that fails (breaks
   * a constraint) must fail alone, not take the others' down with it. A savepoint per commit does
   * that, at two statements a commit (~3 us, as much as a one-step commit's own writes), so the
   * batch is first written without them, and only when one of its commits broke is it undone and
   * written again with a savepoint per commit. A commit's writes are plain rows from its ops, so the
   * second pass writes what the first would have, and each commit either lands whole or fails alone.
   * Both passes run inside one transaction (the first as a savepoint, undone by rolling back to
   * it): the write lock is never let go between them, so no other process can write in between.
   * `own`: in a transaction of its own (else inside the caller's).
   */
  private writeBatch(batch: PendingCommit[], outcomes: unknown[], own: boolean): void {
    // One commit has no other to spare: it fails or lands whole, in one plain transaction.
    if (batch.length === 1) return this.unwrapBroke(() => (own ? this.applyBatch.immediate : this.applyBatch)(batch, outcomes, false));
    if (own) return this.writeGroup.immediate(batch, outcomes);
    this.writeGroupWithin(batch, outcomes);
  }

  /** Inside an open transaction: the batch without savepoints, then, if a commit broke, with one each. */
  private writeGroupWithin(batch: PendingCommit[], outcomes: unknown[]): void {
    try {
      this.applyBatch(batch, outcomes, false);
    } catch (error) {
      // SQLite itself may have rolled the whole transaction back (a full disk, an I/O error): then
      // there is nothing to write again into, and the batch fails as a whole.
      if (!(error instanceof CommitBroke) || !this.db.inTransaction) throw error instanceof CommitBroke ? error.cause : error;
      outcomes.fill(null);
      this.applyBatch(batch, outcomes, true);
    }
  }

  private unwrapBroke(write: () => void): void {
    try {
      write();
    } catch (error) {
      throw error instanceof CommitBroke ? error.cause : error;
    }
  }

  /** `writeGroupWithin` in a transaction of its own (made once, as `applyBatch`). */
  private readonly writeGroup: Database.Transaction<(batch: PendingCommit[], outcomes: unknown[]) => void>;

  private readonly applyInSavepoint: (ops: WriteOp[]) => void;
  /**
   * The group commit's transaction, made once: better-sqlite3's `db.transaction(fn)` builds four
   * wrapper functions per call (~5 µs), more than the statements of a one-step commit cost.
   */
  private readonly applyBatch: Database.Transaction<(batch: PendingCommit[], outcomes: unknown[], isolated: boolean) => void>;

  async migrate(): Promise<void> {
    await this.transact(() => migrationScript(this.layers, Date.now));
    this.writes.prepare();
    // Only a store whose commits fsync (the one that can defer) pays for growing the WAL file
    // (wal-presize.ts, which also leaves databases without a WAL file alone).
    if (this.deferrable) await this.lock.run(() => presizeWal(this.db));
  }

  async assertCairnDatabase(): Promise<void> {
    await checkSchema(
      this.migrationSql(),
      this.layers,
      async (name) => this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined,
      () =>
        new NotACairnDatabaseError(
          `${this.path} is not a Cairn database (it has no cairn_migrations table) — point --database at the file your application uses`,
        ),
    );
  }

  private migrationSql(): MigrationSql {
    const db = this.db;
    return {
      async all<Row>(text: string, params: unknown[] = []): Promise<Row[]> {
        const q = positionalPlaceholders(text, params);
        const statement = db.prepare(q.text);
        return (statement.reader ? statement.all(...q.params) : (statement.run(...q.params), [])) as Row[];
      },
    };
  }

  async close(): Promise<void> {
    await this.lock.run(() => undefined);
    if (this.queue.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    this.db.close();
  }

  commit(fence: Fence | null, ops: WriteOp[], options?: CommitOptions): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ fence, ops, defer: deferralOf(options), resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    // Free, as it is unless a transactional step holds it: taken without a turn of the microtask queue.
    if (!this.lock.tryAcquire()) await this.lock.acquire();
    const batch = this.queue;
    this.queue = [];
    this.flushScheduled = false;
    const outcomes: unknown[] = new Array(batch.length).fill(null);
    const riders = this.releaseClaims.size > 0 && batch.some((pending) => pending.ops.some(releasesRun)) ? [...this.releaseClaims] : [];
    const rode: { result?: unknown; error?: unknown }[] = [];
    // External synchrony (store.ts, CommitOptions): a batch of deferred commits only skips the fsync.
    // It never carries a ridden claim: a run loaded here counts on its claim's commit having made
    // every record before it durable (a rederivable finish may be deferred, its riders are not).
    const deferred = this.deferrable && riders.length === 0 && batchDefers(batch);
    const covers = this.durability.batchStarts();
    try {
      if (deferred) this.synchronousNormal!.run();
      try {
        if (riders.length === 0) this.writeBatch(batch, outcomes, true);
        else await this.applyRidden(batch, outcomes, riders, rode);
      } finally {
        if (deferred) this.synchronousRestore!.run();
      }
    } catch (error) {
      outcomes.fill(error);
      rode.length = 0;
      for (let i = 0; i < riders.length; i++) rode.push({ error });
    } finally {
      this.lock.release();
    }
    this.durability.batchSettled(batch, outcomes, covers, deferred);
    batch.forEach((pending, i) => (outcomes[i] === null ? pending.resolve() : pending.reject(outcomes[i])));
    if (riders.length === 0) return;
    const released = batch.flatMap((pending, i) => (outcomes[i] === null ? pending.ops.filter(releasesRun).map((op) => op.runId) : []));
    riders.forEach((rider, i) => {
      const outcome = rode[i];
      if (outcome === undefined) return;
      if ("error" in outcome) rider.failed(outcome.error);
      else rider.committed(outcome.result, released);
    });
  }

  /**
   * The group's commits, then the claims riding them (`claimOnRelease`), in one transaction. The
   * claims run after the group's writes, so they see the slots those free. The transaction is held
   * across the claims' awaits as `writeTransaction` holds it: they await only this connection's
   * statements, which better-sqlite3 runs synchronously.
   */
  private async applyRidden(
    batch: PendingCommit[],
    outcomes: unknown[],
    riders: ReleaseClaim<unknown>[],
    rode: { result?: unknown; error?: unknown }[],
  ): Promise<void> {
    this.db.exec("BEGIN IMMEDIATE");
    try {
      // Inside an open transaction, better-sqlite3 runs the group's transaction as a savepoint.
      this.writeBatch(batch, outcomes, false);
      for (const rider of riders) {
        this.db.exec("SAVEPOINT cairn_release_claim");
        try {
          const now = rider.now();
          const connection = this.statements.connection();
          const claimed = (await connection.run(this.sql.renewClaimant, [now, rider.executorId])) === 0 ? null : await rider.claim(connection, now);
          this.db.exec("RELEASE cairn_release_claim");
          rode.push({ result: claimed });
        } catch (error) {
          // The claim alone is undone: the group's commits do not depend on it.
          this.db.exec("ROLLBACK TO cairn_release_claim");
          this.db.exec("RELEASE cairn_release_claim");
          rode.push({ error });
        }
      }
      this.db.exec("COMMIT");
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      throw error;
    }
  }

  claimOnRelease<T>(rider: ReleaseClaim<T>): () => void {
    const held = rider as ReleaseClaim<unknown>;
    this.releaseClaims.add(held);
    return () => this.releaseClaims.delete(held);
  }

  private readonly releaseClaims = new Set<ReleaseClaim<unknown>>();

  protected reader(): Connection {
    return this.statements.connection();
  }

  protected write<T>(fn: (db: Connection) => Promise<T>): Promise<T> {
    return this.lock.run(() => fn(this.statements.connection()));
  }

  protected connection(): Connection {
    return this.statements.connection();
  }

  /**
   * The store's write lock, then BEGIN IMMEDIATE. `fn` awaits only this connection's statements,
   * which better-sqlite3 runs synchronously, so nothing else runs inside the transaction.
   */
  protected writeTransaction<T>(fn: (tx: null) => Promise<T>): Promise<T> {
    return this.lock.run(async () => {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        const result = await fn(null);
        this.db.exec("COMMIT");
        return result;
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw error;
      }
    });
  }

  /**
   * Synchronously, inside one better-sqlite3 transaction: no other JavaScript (a step body, a
   * timer) runs while the script holds SQLite's write lock.
   */
  protected transact<T>(script: () => Script<T>): Promise<T> {
    return this.lock.run(() => this.db.transaction(() => runSync(script(), (request) => this.perform(request))).immediate());
  }

  private perform(request: Request): unknown {
    if (request.kind !== "act") return this.statements.perform(request.kind, request.statement, request.params);
    const act = request.act;
    switch (act.type) {
      case "fenceHolds":
        return this.writes.fenceHolds(act.fence);
      case "writeStep":
        return this.writes.step(act.step);
      case "writeRun":
        return this.writes.run(act.run);
      case "wakeParent":
        return this.writes.wakeParent(act.runId, act.at);
      case "notifyWake": // executors on SQLite poll: there is no one to tell
      case "lockMigrations": // BEGIN IMMEDIATE already makes migrators take turns
        return undefined;
    }
  }

  protected async lockPayloads(): Promise<void> {
    // The transaction is SQLite's one writer: no other can write a payload meanwhile.
  }

  async transaction(fence: Fence, body: (sql: SqlClient) => Promise<StepRecord>): Promise<void> {
    await this.writeTransaction(async () => {
      if (!this.writes.fenceHolds(fence)) throw fenced(fence);
      const step = await body(this.sqlClient());
      this.writes.apply({ type: "step", step });
    });
  }

  private sqlClient(): SqlClient {
    const db = this.db;
    return {
      async query<Row>(text: string, params: unknown[] = []): Promise<Row[]> {
        const q = positionalPlaceholders(text, params);
        return db.prepare(q.text).all(...q.params) as Row[];
      },
      async execute(text: string, params: unknown[] = []): Promise<{ rowCount: number }> {
        const q = positionalPlaceholders(text, params);
        return { rowCount: db.prepare(q.text).run(...q.params).changes };
      },
    };
  }

  async claimRuns(request: ClaimRequest): Promise<RunRow[] | null> {
    // One immediate transaction, so another process cannot remove our row between its check and
    // the claim, nor renew a dead executor's heartbeat between its check and the take-over. Our
    // heartbeat is renewed only when the claim took runs (what it protects): a renewal is a write,
    // and a claim that finds nothing — most passes of a busy executor — then commits no page and
    // waits for no fsync (it did both at every pass, and the runs' own commits queued behind it).
    return this.lock.run(() =>
      this.db
        .transaction((): RunRow[] | null => {
          if (this.statements.all(EXECUTOR_EXISTS, [request.executorId]).length === 0) return null;
          const claimed = this.statements.all<{ id: string }>(this.claimStatement(request.appVersion === null), [
            request.executorId,
            request.appVersion,
            request.now,
            SQLITE.deadExecutors(request.deadExecutors),
            request.limit,
            SQLITE.list(request.workflows),
            this.parker,
          ]);
          if (claimed.length === 0) return [];
          this.statements.run(this.sql.renewClaimant.text, [request.now, request.executorId]);
          return this.statements.all<Raw>(this.sql.runsIn.text, [SQLITE.list(claimed.map((c) => c.id))]).map(toRunRow);
        })
        .immediate(),
    );
  }

  /** The claim itself: the runs are chosen and taken in one statement (built once the layers are registered). */
  private claimStatement(allVersions: boolean): string {
    const build = () => `UPDATE cairn_runs SET ${CLAIM_SET} WHERE id IN (${claimIds(SQLITE, this.heldRuns(), allVersions, PARKER_FIRST)}) RETURNING id`;
    return allVersions ? (this.claimAllVersions ??= build()) : (this.claimThisVersion ??= build());
  }

  private claimThisVersion: string | undefined;
  private claimAllVersions: string | undefined;

  ownParker(): string {
    return this.parker;
  }

  protected async notifyWake(): Promise<void> {
    // Nobody listens on SQLite: executors in this process are poked by the layer, others poll.
  }

  async liveBackendPids(): Promise<Set<number> | null> {
    return null;
  }

  async select<Row = Record<string, unknown>>(sql: string | Statement, params: unknown[] = []): Promise<Row[]> {
    const q = positionalPlaceholders(typeof sql === "string" ? sql : sql.text, params);
    // A read: a statement that returns no rows is refused, not run (better-sqlite3's all() refused it too).
    if (this.statements.compiled(q.text).shape === null) throw new TypeError("select() reads: this statement returns no rows (use a write)");
    return this.statements.all<Row>(q.text, q.params);
  }

  async query(sql: string, params: unknown[] = []): Promise<QueryResult> {
    // Without params the text goes to SQLite as it is (a `$` inside it is SQLite's business).
    const q = params.length === 0 ? { text: sql, params } : positionalPlaceholders(sql, params);
    const statement = this.db.prepare(q.text);
    if (!statement.readonly || !statement.reader) {
      throw new TypeError("only read-only queries (SELECT, WITH ... SELECT) are allowed here");
    }
    const columns = statement.columns().map((c) => c.name);
    const rows = statement.all(...q.params) as Record<string, unknown>[];
    return { columns, rows };
  }
  operatorQuery(sql: string, options: OperatorQueryOptions = {}): Promise<QueryResult> {
    return sqliteOperatorQuery(this.path, sql, options);
  }
}
