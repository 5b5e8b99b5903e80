import Database from "better-sqlite3";
import { FencedError, NotACairnDatabaseError } from "../../errors.js";
import { Mutex } from "../mutex.js";
import { SQLITE } from "../dialect.js";
import { LayerRegistry, type StoreExtension } from "../extension.js";
import { checkSchema, runMigrations, type MigrationSql } from "../migration-runner.js";
import { numbered, positionalPlaceholders, toExecutorRow, toRunRow, toStepRow } from "../rows.js";
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
import type { DeletedRuns, RunDeleteFilter } from "../retention.js";
import { sqliteOperatorQuery } from "./sqlite-operator-query.js";
import { sqliteCollectPayloads, sqliteDeleteRuns } from "./sqlite-retention.js";
import { SqliteWrites } from "./sqlite-writes.js";

export interface SqliteStoreOptions {
  /** "FULL" (the default) survives power loss; "NORMAL" survives process crashes only. */
  synchronous?: "FULL" | "NORMAL" | "OFF";
  /** Open without creating or writing (the CLI's read commands). */
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
 * The embedded backend: one SQLite file in WAL mode. better-sqlite3 is synchronous, so group
 * commit works by deferring: commits that arrive during one turn of the event loop (the steps of
 * many concurrent runs finishing together) are written in one transaction on the next turn, and
 * pay for one fsync. A user's transactional step holds the connection across its awaits, so every
 * write goes through one mutex.
 */
export class SqliteStore implements Store {
  readonly backend = "sqlite" as const;
  private readonly db: Database.Database;
  private readonly writes: SqliteWrites;
  private readonly layers = new LayerRegistry(SQLITE);
  private readonly lock = new Mutex();
  private queue: PendingCommit[] = [];
  private flushScheduled = false;

  constructor(
    readonly path: string,
    options: SqliteStoreOptions = {},
  ) {
    this.db = new Database(path, options.readonly ? { readonly: true, fileMustExist: true } : {});
    this.db.pragma("busy_timeout = 10000");
    if (!options.readonly) {
      this.db.pragma("journal_mode = WAL");
      this.db.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
    }
    this.writes = new SqliteWrites(this.db, this.layers);
    this.applyBatch = this.db.transaction((batch: PendingCommit[], outcomes: unknown[]) => {
      batch.forEach((pending, i) => {
        if (pending.fence !== null && !this.writes.fenceHolds(pending.fence)) {
          outcomes[i] = fenced(pending.fence);
          return;
        }
        if (batch.length === 1) {
          for (const op of pending.ops) this.writes.apply(op);
          return;
        }
        // Several commits share the transaction: each gets a savepoint, so one that breaks a
        // constraint fails alone instead of taking the others' commits down with it.
        try {
          this.applyInSavepoint(pending.ops);
        } catch (error) {
          outcomes[i] = error;
        }
      });
    });
    // Called inside the group commit's transaction, better-sqlite3 runs this as a savepoint.
    this.applyInSavepoint = this.db.transaction((ops: WriteOp[]) => {
      for (const op of ops) this.writes.apply(op);
    });
  }

  private readonly applyInSavepoint: (ops: WriteOp[]) => void;
  private readonly statements = new Map<string, Database.Statement>();

  /** Reads compile once per distinct SQL text (compiling was a fifth of a short run's CPU). */
  private prepared(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
  /**
   * The group commit's transaction, made once: better-sqlite3's `db.transaction(fn)` builds four
   * wrapper functions per call (~5 µs), more than the statements of a one-step commit cost.
   */
  private readonly applyBatch: Database.Transaction<(batch: PendingCommit[], outcomes: unknown[]) => void>;

  register(extension: StoreExtension): void {
    this.layers.register(extension);
  }

  async migrate(): Promise<void> {
    await this.lock.run(async () => {
      // BEGIN IMMEDIATE: one process migrates at a time; the runner awaits only this connection.
      this.db.exec("BEGIN IMMEDIATE");
      try {
        await runMigrations(this.migrationSql(), this.layers, Date.now);
        this.db.exec("COMMIT");
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw error;
      }
    });
    this.writes.prepare();
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
      async exec(text: string): Promise<void> {
        db.exec(text);
      },
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

  commit(fence: Fence | null, ops: WriteOp[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ fence, ops, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    await this.lock.acquire();
    const batch = this.queue;
    this.queue = [];
    this.flushScheduled = false;
    const outcomes: unknown[] = new Array(batch.length).fill(null);
    try {
      this.applyBatch.immediate(batch, outcomes);
    } catch (error) {
      outcomes.fill(error);
    } finally {
      this.lock.release();
    }
    batch.forEach((pending, i) => (outcomes[i] === null ? pending.resolve() : pending.reject(outcomes[i])));
  }

  async receive(fence: Fence, request: ReceiveRequest): Promise<ReceiveResult> {
    return this.lock.run(() =>
      this.db
        .transaction((): ReceiveResult => {
          if (!this.writes.fenceHolds(fence)) throw fenced(fence);
          return this.writes.receive(request);
        })
        .immediate(),
    );
  }

  async transaction(fence: Fence, body: (sql: SqlClient) => Promise<StepRecord>): Promise<void> {
    await this.lock.run(async () => {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        if (!this.writes.fenceHolds(fence)) throw fenced(fence);
        const step = await body(this.sqlClient());
        this.writes.apply({ type: "step", step });
        this.db.exec("COMMIT");
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw error;
      }
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

  async getRun(id: string): Promise<RunRow | undefined> {
    const raw = this.prepared(`${RUN_SELECT} WHERE r.id = ?`).get(id) as Raw | undefined;
    return raw === undefined ? undefined : toRunRow(raw);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = this
      .prepared(
        `${RUN_SELECT} WHERE (?1 IS NULL OR r.status = ?1) AND (?2 IS NULL OR r.workflow = ?2)
         AND (?3 IS NULL OR r.parent_id = ?3) ORDER BY r.created_at DESC, r.id LIMIT ?4`,
      )
      .all(numbered(filter.status ?? null, filter.workflow ?? null, filter.parentId ?? null, filter.limit ?? 100)) as Raw[];
    return rows.map(toRunRow);
  }

  async loadJournal(runId: string): Promise<StepRow[]> {
    const rows = this
      .prepared(
        `SELECT s.*, COALESCE(s.output, p.body) AS output_text FROM cairn_steps s
         LEFT JOIN cairn_payloads p ON p.hash = s.output_hash WHERE s.run_id = ? ORDER BY s.seq`,
      )
      .all(runId) as Raw[];
    return rows.map(toStepRow);
  }

  async getEvent(runId: string, key: string): Promise<string | undefined> {
    const row = this
      .prepared(
        `SELECT COALESCE(e.value, p.body) AS v FROM cairn_events e LEFT JOIN cairn_payloads p ON p.hash = e.value_hash
         WHERE e.run_id = ? AND e.key = ?`,
      )
      .get(runId, key) as { v: string } | undefined;
    return row?.v;
  }

  async claimRuns(request: ClaimRequest): Promise<RunRow[] | null> {
    // One immediate transaction, so another process cannot remove our row between the renewal and
    // the claim, nor renew a dead executor's heartbeat between its check and the take-over.
    return this.lock.run(() =>
      this.db
        .transaction((): RunRow[] | null => {
          const me = this.prepared("UPDATE cairn_executors SET heartbeat_at = max(heartbeat_at, ?) WHERE id = ?").run(request.now, request.executorId);
          if (me.changes === 0) return null;
          const claimed = this
            .prepared(
              `UPDATE cairn_runs SET
                 recoveries = recoveries + (CASE WHEN status = 'running' THEN 1 ELSE 0 END),
                 status = 'running', executor_id = ?1, wake_at = NULL, updated_at = ?3
               WHERE id IN (
                 SELECT id FROM cairn_runs
                 WHERE (?2 IS NULL OR app_version = ?2) AND workflow IN (SELECT value FROM json_each(?6)) AND (
                   status = 'enqueued'
                   OR (status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= ?3)
                   OR (status = 'running' AND (executor_id IS NULL
                       OR executor_id IN (
                         SELECT e.id FROM cairn_executors e JOIN json_each(?4) d
                         ON e.id = json_extract(d.value, '$.id') AND e.heartbeat_at = json_extract(d.value, '$.heartbeatAt'))
                       OR executor_id NOT IN (SELECT id FROM cairn_executors))))
                 ORDER BY created_at LIMIT ?5)
               RETURNING id`,
            )
            .all(
              numbered(
                request.executorId,
                request.appVersion,
                request.now,
                JSON.stringify(request.deadExecutors.map((e) => ({ id: e.id, heartbeatAt: e.heartbeatAt }))),
                request.limit,
                JSON.stringify(request.workflows),
              ),
            ) as {
            id: string;
          }[];
          if (claimed.length === 0) return [];
          const rows = this
            .prepared(`${RUN_SELECT} WHERE r.id IN (SELECT value FROM json_each(?)) ORDER BY r.created_at`)
            .all(JSON.stringify(claimed.map((c) => c.id))) as Raw[];
          return rows.map(toRunRow);
        })
        .immediate(),
    );
  }

  async nextWakeAt(appVersion: string | null): Promise<number | null> {
    const row = this
      .prepared(
        `SELECT MIN(wake_at) AS w FROM cairn_runs WHERE status = 'waiting' AND wake_at IS NOT NULL
         AND (?1 IS NULL OR app_version = ?1)`,
      )
      .get(numbered(appVersion)) as { w: number | null };
    return row.w;
  }

  async lostRuns(executorId: string, runIds: string[]): Promise<string[]> {
    if (runIds.length === 0) return [];
    const rows = this
      .prepared(
        `SELECT id FROM cairn_runs WHERE id IN (SELECT value FROM json_each(?1))
         AND NOT (status = 'running' AND executor_id IS ?2)`,
      )
      .all(numbered(JSON.stringify(runIds), executorId)) as { id: string }[];
    return rows.map((r) => r.id);
  }

  async cancelRun(runId: string, error: string, at: number): Promise<string[]> {
    return this.lock.run(() => this.db.transaction(() => this.writes.cancel(runId, error, at)).immediate());
  }

  async resumeRun(runId: string, at: number): Promise<boolean> {
    return this.lock.run(() => this.db.transaction(() => this.writes.resume(runId, at)).immediate());
  }

  async forkRun(runId: string, fromSeq: number, fork: NewRun): Promise<void> {
    await this.lock.run(() => this.db.transaction(() => this.writes.fork(runId, fromSeq, fork)).immediate());
  }

  async registerExecutor(executor: ExecutorRow): Promise<void> {
    await this.lock.run(() => {
      this
        .prepared(
          `INSERT INTO cairn_executors (id, hostname, pid, pid_namespace, backend_pid, app_version, started_at, heartbeat_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET backend_pid = excluded.backend_pid, heartbeat_at = excluded.heartbeat_at`,
        )
        .run(
          executor.id,
          executor.hostname,
          executor.pid,
          executor.pidNamespace,
          executor.backendPid,
          executor.appVersion,
          executor.startedAt,
          executor.heartbeatAt,
        );
    });
  }

  async heartbeat(executorId: string, at: number): Promise<boolean> {
    return this.lock.run(() => this.prepared("UPDATE cairn_executors SET heartbeat_at = ? WHERE id = ?").run(at, executorId).changes > 0);
  }

  async listExecutors(): Promise<ExecutorRow[]> {
    return (this.prepared("SELECT * FROM cairn_executors ORDER BY started_at").all() as Raw[]).map(toExecutorRow);
  }

  async liveBackendPids(): Promise<Set<number> | null> {
    return null;
  }

  async transferRuns(fromId: string, toId: string, at: number): Promise<string[]> {
    return this.lock.run(() =>
      (
        this.prepared("UPDATE cairn_runs SET executor_id = ?, updated_at = ? WHERE executor_id = ? AND status = 'running' RETURNING id").all(
          toId,
          at,
          fromId,
        ) as { id: string }[]
      ).map((r) => r.id),
    );
  }

  async removeExecutors(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.lock.run(() => {
      this.prepared("DELETE FROM cairn_executors WHERE id IN (SELECT value FROM json_each(?))").run(JSON.stringify(ids));
    });
  }

  async removeDeadExecutors(dead: DeadExecutor[]): Promise<void> {
    if (dead.length === 0) return;
    await this.lock.run(() => {
      const remove = this.prepared("DELETE FROM cairn_executors WHERE id = ? AND heartbeat_at = ?");
      this.db.transaction(() => {
        for (const e of dead) remove.run(e.id, e.heartbeatAt);
      })();
    });
  }

  async select<Row = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<Row[]> {
    const q = positionalPlaceholders(sql, params);
    return this.prepared(q.text).all(...q.params) as Row[];
  }

  async query(sql: string): Promise<QueryResult> {
    const statement = this.db.prepare(sql);
    if (!statement.readonly || !statement.reader) {
      throw new TypeError("only read-only queries (SELECT, WITH ... SELECT) are allowed here");
    }
    const columns = statement.columns().map((c) => c.name);
    const rows = statement.all() as Record<string, unknown>[];
    return { columns, rows };
  }
  operatorQuery(sql: string, options: OperatorQueryOptions = {}): Promise<QueryResult> {
    return sqliteOperatorQuery(this.path, sql, options);
  }

  deleteRuns(filter: RunDeleteFilter): Promise<DeletedRuns> {
    return sqliteDeleteRuns(this.db, this.lock, filter, this.layers.deletion());
  }

  collectPayloads(): Promise<number> {
    return sqliteCollectPayloads(this.db, this.lock, this.layers.deletion());
  }
}

const RUN_SELECT = `SELECT r.*, COALESCE(r.input, pi.body) AS input_text, COALESCE(r.output, po.body) AS output_text
  FROM cairn_runs r
  LEFT JOIN cairn_payloads pi ON pi.hash = r.input_hash
  LEFT JOIN cairn_payloads po ON po.hash = r.output_hash`;

function fenced(fence: Fence): FencedError {
  return new FencedError(`executor ${fence.executorId} no longer owns run ${fence.runId}`, { runId: fence.runId });
}

