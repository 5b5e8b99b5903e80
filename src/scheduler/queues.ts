import { createHash } from "node:crypto";
import { InvalidSpecError } from "../errors.js";
import type { Connection, Statement } from "../store/connection.js";
import { POSTGRES, SQLITE, type SqlDialect } from "../store/dialect.js";
import { toRunRow } from "../store/rows.js";
import { isPermissionError } from "../store/store-errors.js";
import { RUN_SELECT } from "../store/statements.js";
import type { RunRow, Store } from "../store/store.js";
import { dispatchFunction, ensureFunctionSql, FENCED_SQLSTATE } from "./dispatch-function.js";
import { enqueueFunction } from "./enqueue-function.js";
import { decideInOne, dispatchStatements, lookSql, nextBatch, nextDecision } from "./dispatch-sql.js";
import { isBuiltInPolicy, type BuiltInPolicy } from "./policies.js";
import { queueSpec, type QueueOptions, type QueueSpec } from "./queue-spec.js";

/** One dispatch decision: `executorId` took `runId` (also in `cairn_queue_runs`). */
export interface QueueDecision {
  queue: string;
  runId: string;
  executorId: string;
  /**
   * A run the dispatcher gave itself, as the decision left it (PostgreSQL's dispatch function reads
   * it in the same transaction), and whether it has journal rows to load: the executor starts it
   * without reading it again. Absent: read it (`getRun`, `loadJournal`).
   */
  loaded?: { run: RunRow; hasSteps: boolean };
}

/** What an executor serves: by default every queue declared in its process, and no partition. */
export interface ServeOptions {
  /** The queues this executor takes runs of (each must be declared here). Default: all declared. */
  queues?: string[];
  /** Partition keys this executor serves first (the "locality" policy). */
  partitions?: string[];
}

/** PostgreSQL: `assigned`'s runs ($1 the executor, $2 the ids it has loaded), read as getRun reads them. */
const ASSIGNED_ROWS: Statement = {
  name: "cairn_queue_assigned_rows",
  text: `SELECT x.*, EXISTS (SELECT 1 FROM cairn_steps s WHERE s.run_id = x.id) AS has_steps
    FROM (${RUN_SELECT} WHERE r.executor_id = $1 AND r.status = 'running' AND NOT (r.id = ANY($2::text[]))) x`,
};

/** SQLite: rows of runs ($1 list of ids) as getRun reads them, and whether each has journal rows. */
const RUNS_WITH_STEPS: Statement = {
  name: "cairn_queue_runs_with_steps",
  text: `SELECT x.*, EXISTS (SELECT 1 FROM cairn_steps s WHERE s.run_id = x.id) AS has_steps
    FROM (${RUN_SELECT} WHERE ${SQLITE.inList("r.id", "$1")}) x`,
};

/** A dispatch pass riding the commit that released runs (SQLite, `Queues.dispatchWithin`). */
export interface ReleaseDispatch {
  decisions: QueueDecision[];
  /** More may be decided now than this pass did. */
  more: boolean;
  /**
   * The pass did all the ordinary pass after the releases would have done but for reading the runs
   * peers in other processes dispatched to this executor: the executor skips that pass.
   */
  complete: boolean;
  /** The next delayed start among the queues looked at, for the executor's wake-up timer. */
  nextWakeAt: number | null;
}

/** How many decisions one dispatch transaction makes before letting other writers in. */
const DECISIONS_PER_PASS = 100;

/**
 * The queues declared in one process, and their dispatch. Any executor that declared a queue
 * dispatches it: it asks the queue's policy for the next (run, executor) pair and commits each
 * answer, for itself or for a peer serving the queue, under the queue's row lock (PostgreSQL) or
 * SQLite's one writer, so two dispatchers never both fill the last slot of a limit. A peer learns
 * of its runs by NOTIFY (PostgreSQL), a poke (same process) or its next poll, and loads them.
 *
 * Failure semantics: a decision is one transaction with the run's move to `running` (on SQLite,
 * often the transaction of the group commit that ended the runs whose slots it fills:
 * `dispatchWithin`): a dispatcher that dies mid-pass leaves each run either still queued or
 * dispatched, never both. A run
 * dispatched to an executor that dies before (or while) running it is taken over like any run of a
 * dead executor — at once when the death is observable, else after the lease — and keeps its slot
 * meanwhile (it is still running, as far as the limits can tell).
 */
export class Queues {
  private readonly specs = new Map<string, QueueSpec>();
  private readonly unsynced = new Set<string>();
  private readonly dialect: SqlDialect;
  private readonly sql: ReturnType<typeof dispatchStatements>;
  private readonly nextStatements = new Map<string, Statement>();
  /** PostgreSQL: each built-in policy's dispatch and enqueue functions, once each is known to exist in the database. */
  private readonly functions = new Map<string, Promise<Statement>>();
  private readonly look: Statement;

  constructor(
    private readonly store: Store,
    private readonly serve: ServeOptions = {},
  ) {
    this.dialect = store.backend === "postgres" ? POSTGRES : SQLITE;
    this.sql = dispatchStatements(this.dialect);
    this.look = { name: "cairn_queue_look", text: lookSql(this.dialect) };
    for (const [field, list] of [
      ["queues", serve.queues],
      ["partitions", serve.partitions],
    ] as const) {
      if (list !== undefined && (!Array.isArray(list) || list.some((item) => typeof item !== "string" || item === ""))) {
        throw new InvalidSpecError(`serve.${field}`, list, "must be an array of non-empty strings");
      }
    }
  }

  declare(name: string, options: QueueOptions = {}): QueueSpec {
    const spec = queueSpec(name, options);
    if (this.specs.has(name)) throw new InvalidSpecError("name", name, "a queue with this name is already declared in this process");
    this.specs.set(name, spec);
    this.unsynced.add(name);
    return spec;
  }

  /** Whether any queue is declared in this process. */
  get declared(): boolean {
    return this.specs.size > 0;
  }

  get(name: string): QueueSpec | undefined {
    return this.specs.get(name);
  }

  /** The queues this process's executor takes runs of. */
  served(): string[] {
    const declared = [...this.specs.keys()];
    return this.serve.queues === undefined ? declared : this.serve.queues.filter((name) => this.specs.has(name));
  }

  /** Stores the declarations not stored yet (the latest declaration of a name wins). */
  async sync(now: number): Promise<void> {
    for (const name of [...this.unsynced]) {
      const q = this.specs.get(name)!;
      await this.store.commit(null, [
        {
          type: "insert",
          table: "cairn_queues",
          values: {
            name: q.name,
            concurrency: q.concurrency,
            worker_concurrency: q.workerConcurrency,
            partition_concurrency: q.partitionConcurrency,
            rate_limit: q.rateLimit,
            rate_period_ms: q.ratePeriodMs,
            priority: q.priority ? 1 : 0,
            policy: q.policy,
            policy_sql: q.policySql,
            locality_wait_ms: q.localityWaitMs,
            updated_at: now,
          },
          onConflict: {
            keys: ["name"],
            action: "update",
          },
        },
      ]);
      if (q.policy === "sql") await this.tryPolicy(q, now);
      this.unsynced.delete(name);
    }
  }

  /**
   * A user policy is checked for its shape when declared (one SELECT); whether its columns exist
   * only the database can say, so it runs once, as a read, when first stored: a typo fails
   * `launch()` or `enqueue` with the database's words instead of every dispatch failing later.
   */
  private async tryPolicy(q: QueueSpec, now: number): Promise<void> {
    try {
      await this.store.select(this.nextStatement(q.policySql), [q.name, now, "", now]);
    } catch (error) {
      this.specs.delete(q.name);
      this.unsynced.delete(q.name);
      throw new InvalidSpecError("policy.sql", q.policySql, `the database refused it: ${(error as Error)?.message ?? String(error)}`);
    }
  }

  /** Writes what `executorId` serves (after it registered), and sweeps the rows of executors that are gone. */
  async register(executorId: string, now: number): Promise<boolean> {
    if (this.serve.queues !== undefined) {
      for (const name of this.serve.queues) {
        if (!this.specs.has(name)) throw new InvalidSpecError("serve.queues", name, "no queue of this name is declared in this process");
      }
    }
    await this.sync(now);
    // Read with the row's backend pid (Executor.start, reincarnate): the same session's channel.
    const channel = this.store.capabilities.wakeNotifications?.currentOwnChannel() ?? null;
    const done = await this.store.claimWith(executorId, now, async (db) => {
      await db.run(this.sql.sweepQueues, []);
      await db.run(this.sql.sweepPartitions, []);
      for (const queue of this.served()) await db.run(this.sql.serveQueue, [executorId, queue, channel]);
      for (const key of this.serve.partitions ?? []) await db.run(this.sql.servePartition, [executorId, key]);
      return true;
    });
    return done !== null;
  }

  /**
   * Dispatches every queue declared here that has a run ready. Returns the decisions and when to look
   * again (a delayed start, the end of a rate window), or null when the dispatcher's own executor row
   * is gone (peers presumed it dead: nothing was dispatched).
   */
  async dispatch(
    executorId: string,
    now: number,
    leaseMs: number,
  ): Promise<{ decisions: QueueDecision[]; more: boolean; nextWakeAt: number | null; contended: boolean } | null> {
    const names = [...this.specs.keys()];
    if (names.length === 0) return { decisions: [], more: false, nextWakeAt: null, contended: false };
    await this.sync(now);
    // PostgreSQL, built-in policies: each queue's function looks, locks and decides in one call
    // (dispatch-function.ts). The other queues are looked at first and decided in a claim transaction.
    const called = this.dialect.name === "postgres" ? names.filter((name) => isBuiltInPolicy(this.specs.get(name)!.policy)) : [];
    const looked = names.filter((name) => !called.includes(name));
    const [calls, looks] = await Promise.all([
      Promise.all(called.map((name) => this.callDispatch(this.specs.get(name)!, executorId, now, leaseMs))),
      this.lookAndDecide(looked, executorId, now, leaseMs),
    ]);
    if (looks === null || calls.includes(null)) return null;
    const decisions = [...calls.flatMap((call) => call!.decisions), ...looks.decisions];
    const delayed = [...calls.flatMap((call) => (call!.delayed === null ? [] : [call!.delayed])), ...looks.delayed];
    const more = looks.more || calls.some((call) => call!.decisions.length >= DECISIONS_PER_PASS);
    const contended = calls.some((call) => call!.busy);
    return { decisions, more, nextWakeAt: await this.nextWakeAt(this.dialect.list(names), now, delayed), contended };
  }

  /**
   * SQLite: a dispatch pass inside a transaction the caller holds — the group commit that freed
   * slots, fenced by the store (`Store.claimOnRelease`) — for the slots those commits freed. The
   * runs it gives this executor come with their rows, read in the same transaction, so they start
   * without another read. When it did all the ordinary pass after these releases would
   * (`complete`), the executor makes none; otherwise that pass still follows (rate windows,
   * queues declared since, what this one left).
   */
  async dispatchWithin(db: Connection, executorId: string, now: number, leaseMs: number): Promise<ReleaseDispatch> {
    // A declaration not stored yet is stored by the ordinary pass (its own commit), not in here.
    const names = [...this.specs.keys()].filter((name) => !this.unsynced.has(name));
    const looks = await this.lookAndDecide(names, executorId, now, leaseMs, db, async (body) => body(db, () => undefined));
    if (looks === null) return { decisions: [], more: false, complete: false, nextWakeAt: null };
    const mine = looks.decisions.filter((decision) => decision.executorId === executorId);
    if (mine.length > 0) {
      const rows = await db.all<Record<string, unknown>>(RUNS_WITH_STEPS, [this.dialect.list(mine.map((decision) => decision.runId))]);
      const byId = new Map(rows.map((row) => [String(row.id), row]));
      for (const decision of mine) {
        const row = byId.get(decision.runId);
        if (row !== undefined) decision.loaded = { run: toRunRow(row), hasSteps: Number(row.has_steps) === 1 };
      }
    }
    // Everything the ordinary pass after these releases would do, but for reading what peers in
    // other processes gave us: every queue declared here looked at, nothing left to decide, and the
    // next wake-up known — the next delayed start is in the look; the end of a rate window is not.
    const complete = names.length === this.specs.size && !looks.more && [...this.specs.values()].every((spec) => spec.rateLimit === null);
    return { decisions: looks.decisions, more: looks.more, complete, nextWakeAt: looks.delayed.length === 0 ? null : Math.min(...looks.delayed) };
  }

  /**
   * The queues decided in a claim transaction (SQLite's, and user policies'), after one look at them
   * all. `read` is where the looks run (the store, or the transaction `claim` runs in).
   */
  private async lookAndDecide(
    names: string[],
    executorId: string,
    now: number,
    leaseMs: number,
    read: Pick<Connection, "all"> = { all: (statement, params) => this.store.select(statement, [...params]) },
    claim: <T>(body: (db: Connection, wake: () => void) => Promise<T>) => Promise<T | null> = (body) => this.store.claimWith(executorId, now, body),
  ): Promise<{ decisions: QueueDecision[]; more: boolean; delayed: number[] } | null> {
    if (names.length === 0) return { decisions: [], more: false, delayed: [] };
    // One read first, for every queue (lookSql): which have a run ready, when the next delayed one
    // starts, and whether anything could be dispatched. A queue at its limits (every executor
    // full, the rate spent) costs no write transaction — on a SQLite file shared by processes, no
    // turn at the one write lock.
    const looks = await read.all<{ queue: string; ready: unknown; delayed: unknown; open: unknown }>(this.look, [
      this.dialect.list(names),
      now,
      executorId,
      now - leaseMs,
    ]);
    const decisions: QueueDecision[] = [];
    let more = false;
    for (const look of looks) {
      if (Number(look.ready) !== 1 || Number(look.open) !== 1) continue;
      const spec = this.specs.get(look.queue)!;
      if (spec.partitionConcurrency !== null || spec.policy === "locality" || spec.policy === "sql") {
        // Limits the look does not see: ask the candidates themselves before taking the lock.
        const [possible] = await read.all(this.nextStatement(spec.policySql), [spec.name, now, executorId, now - leaseMs]);
        if (possible === undefined) continue;
      }
      const taken = await claim(async (db, wake) => {
        const decided = await this.decide(db, spec, executorId, now, leaseMs);
        // Peers hear of it only when it gave someone else a run: a pass that decided nothing, or
        // only for itself, wakes nobody (else every dispatch would wake every peer into another).
        if (decided.some((d) => d.executorId !== executorId)) wake();
        return decided;
      });
      if (taken === null) return null;
      decisions.push(...taken);
      if (taken.length === DECISIONS_PER_PASS) more = true;
    }
    const delayed = looks.map((look) => look.delayed).filter((w) => w !== null && w !== undefined);
    return { decisions, more, delayed: delayed.map(Number) };
  }

  /** PostgreSQL, a built-in policy: the queue's decisions by calls of its dispatch function; null when fenced. */
  private async callDispatch(
    spec: QueueSpec,
    executorId: string,
    now: number,
    leaseMs: number,
  ): Promise<{ decisions: QueueDecision[]; delayed: number | null; busy: boolean } | null> {
    const call = await this.dispatchFunction(spec.policy as BuiltInPolicy, spec.policySql);
    const decisions: QueueDecision[] = [];
    let delayed: number | null = null;
    let busy = false;
    while (decisions.length < DECISIONS_PER_PASS) {
      let rows: { run_id: unknown; executor_id: unknown; again: unknown; delayed: unknown; run_row: unknown; has_steps: unknown; busy: unknown }[];
      try {
        rows = await this.store.execute(call, [spec.name, now, executorId, now - leaseMs, spec.policy, DECISIONS_PER_PASS - decisions.length]);
      } catch (error) {
        // Our row is gone: this call's decisions rolled back; runs an earlier call gave us are a dead executor's now.
        if ((error as { code?: unknown } | null)?.code === FENCED_SQLSTATE) return null;
        throw error;
      }
      let again = false;
      for (const row of rows) {
        if (row.run_id === null) {
          if (row.delayed !== null) delayed = Number(row.delayed);
          if (row.busy === true) busy = true;
          continue;
        }
        const decision: QueueDecision = { queue: spec.name, runId: String(row.run_id), executorId: String(row.executor_id) };
        if (row.run_row !== null && typeof row.run_row === "object") {
          decision.loaded = { run: toRunRow(row.run_row as Record<string, unknown>), hasSteps: row.has_steps === true };
        }
        decisions.push(decision);
        if (Number(row.again) === 1) again = true;
      }
      // A batch that says nothing more can be decided now ends the pass without another call.
      if (!again) break;
    }
    return { decisions, delayed, busy };
  }

  /** The call of a built-in policy's dispatch function, created in the database on first use. */
  private dispatchFunction(policy: BuiltInPolicy, policySql: string): Promise<Statement> {
    return this.ensured(`${policy}:${policySql}`, async () => {
      const fn = dispatchFunction(policy, policySql);
      await this.store.execute(ensureFunctionSql(fn), []);
      return fn.call;
    });
  }

  /**
   * PostgreSQL, a queue under a built-in policy: the call of its enqueue function, which dispatches
   * the run it stores (enqueue-function.ts), created in the database on first use; null elsewhere
   * (SQLite, a user policy: the plain enqueue, and a dispatch pass by the executors).
   */
  enqueueCall(spec: QueueSpec): Promise<Statement | null> | null {
    if (this.dialect.name !== "postgres" || !isBuiltInPolicy(spec.policy) || this.mayNotCreateFunctions) return null;
    const policy = spec.policy;
    const call = this.ensured(`enqueue:${policy}:${spec.policySql}`, async () => {
      await this.dispatchFunction(policy, spec.policySql);
      const fn = enqueueFunction(dispatchFunction(policy, spec.policySql), spec.policySql);
      await this.store.execute(ensureFunctionSql(fn), []);
      return fn.call;
    });
    // A producer whose role may not create functions enqueues with the plain statement (null)
    // from then on, and leaves the dispatch to the executors.
    return call.catch((error: unknown) => {
      if (!isPermissionError(error)) throw error;
      this.mayNotCreateFunctions = true;
      return null;
    });
  }

  private mayNotCreateFunctions = false;

  /** A function's call, once it is known to exist; a failed creation (the database unreachable) is tried again next time. */
  private ensured(key: string, create: () => Promise<Statement>): Promise<Statement> {
    let ready = this.functions.get(key);
    if (ready === undefined) {
      ready = create();
      ready.catch(() => this.functions.delete(key));
      this.functions.set(key, ready);
    }
    return ready;
  }

  /** SQLite, and PostgreSQL under a user policy: a pass's decisions inside the claim transaction. */
  private async decide(db: Connection, spec: QueueSpec, executorId: string, now: number, leaseMs: number): Promise<QueueDecision[]> {
    await db.all(this.sql.lockQueue, [spec.name]);
    const decisions: QueueDecision[] = [];
    const policy = isBuiltInPolicy(spec.policy) ? spec.policy : null;
    if (this.dialect.name === "postgres") {
      const decide = this.named(`one:${spec.policySql}`, () => decideInOne(this.dialect, spec.policySql));
      while (decisions.length < DECISIONS_PER_PASS) {
        const taken = await db.all<{ run_id: string; executor_id: string }>(decide, [spec.name, now, executorId, now - leaseMs, spec.policy]);
        for (const row of taken) decisions.push({ queue: spec.name, runId: String(row.run_id), executorId: String(row.executor_id) });
        if (taken.length === 0) break;
      }
      return decisions;
    }
    const next =
      policy === null
        ? this.nextStatement(spec.policySql)
        : this.named(`batch-read:${policy}:${spec.policySql}`, () => nextBatch(this.dialect, policy, spec.policySql));
    while (decisions.length < DECISIONS_PER_PASS) {
      const params = [spec.name, now, executorId, now - leaseMs];
      if (policy !== null) params.push(spec.policy, DECISIONS_PER_PASS - decisions.length);
      let pairs = await db.all<{ run_id: string; executor_id: string; again?: unknown }>(next, params);
      if (pairs.length === 0 && policy !== null) {
        // The batch decided nothing (runs of several app versions, locality with partition keys,
        // every run tied with a bound): one decision under the policy's own query, as nextBatch says.
        const one = await db.all<{ run_id: string; executor_id: string }>(this.nextStatement(spec.policySql), [spec.name, now, executorId, now - leaseMs]);
        pairs = one.map((pair) => ({ ...pair, again: 1 }));
      }
      // Taken and recorded per executor, in the policy's order: a FIFO pass gives them all to one.
      const byExecutor = new Map<string, string[]>();
      for (const pair of pairs) {
        const runId = String(pair.run_id);
        const target = String(pair.executor_id);
        const runIds = byExecutor.get(target);
        if (runIds === undefined) byExecutor.set(target, [runId]);
        else runIds.push(runId);
        decisions.push({ queue: spec.name, runId, executorId: target });
      }
      for (const [target, runIds] of byExecutor) {
        const list = this.dialect.list(runIds);
        const taken = new Set((await db.all<{ id: string }>(this.sql.takeRuns, [list, target, now])).map((row) => String(row.id)));
        const stray = runIds.find((runId) => !taken.has(runId));
        if (stray !== undefined) {
          throw new InvalidSpecError("policy", spec.policySql, `returned run ${stray}, which is not a candidate: select from \`candidates\``);
        }
        await db.run(this.sql.recordAll, [list, target, now, spec.policy]);
      }
      if (pairs.length === 0 || (policy !== null && !pairs.some((pair) => Number(pair.again) === 1))) break;
    }
    return decisions;
  }

  private nextStatement(policySql: string): Statement {
    return this.named(`next:${policySql}`, () => nextDecision(this.dialect, policySql));
  }

  /** A statement built once per policy, prepared under a name derived from its text. */
  private named(key: string, build: () => Statement): Statement {
    let statement = this.nextStatements.get(key);
    if (statement === undefined) {
      const built = build();
      statement = { name: `cairn_queue_${createHash("sha256").update(built.text).digest("hex").slice(0, 16)}`, text: built.text };
      this.nextStatements.set(key, statement);
    }
    return statement;
  }

  /** The next delayed start (from the look) or end of a rate window, whichever comes first. */
  private async nextWakeAt(list: unknown, now: number, delayed: number[]): Promise<number | null> {
    const rateLimited = [...this.specs.values()].some((spec) => spec.rateLimit !== null);
    const [rate] = rateLimited ? await this.store.select<{ w: unknown }>(this.sql.nextRateWindow, [list, now]) : [];
    const times = [...delayed, rate?.w].filter((w) => w !== null && w !== undefined).map(Number);
    return times.length === 0 ? null : Math.min(...times);
  }

  /**
   * The runs dispatched to `executorId` that are running under it, but for those in `loaded` (it
   * loads the others). On PostgreSQL each comes with its row and whether it has a journal, in the
   * same read, so a run a peer gave us starts after one round trip instead of two (its id, then
   * its row and journal).
   */
  async assigned(executorId: string, loaded: readonly string[]): Promise<{ runId: string; loaded?: { run: RunRow; hasSteps: boolean } }[]> {
    if (this.dialect.name !== "postgres") {
      const rows = await this.store.select<{ id: string }>(this.sql.assigned, [executorId]);
      return rows.map((r) => ({ runId: String(r.id) }));
    }
    const rows = await this.store.select<Record<string, unknown>>(ASSIGNED_ROWS, [executorId, this.dialect.list(loaded)]);
    return rows.map((row) => ({ runId: String(row.id), loaded: { run: toRunRow(row), hasSteps: row.has_steps === true } }));
  }
}
