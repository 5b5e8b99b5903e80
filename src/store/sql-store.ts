import { FencedError, RunNotFoundError } from "../errors.js";
import type { Connection, Statement } from "./connection.js";
import type { SqlDialect } from "./dialect.js";
import { LayerRegistry, type HookName, type StoreExtension } from "./extension.js";
import { FORK_EVENTS, forkIdTaken } from "./fork.js";
import {
  collectHashes,
  deletableTrees,
  deleteRunRows,
  matchingRuns,
  payloadPage,
  validateDeleteFilter,
  type DeletedRuns,
  type LayerDeletion,
  type RetentionSql,
  type RunDeleteFilter,
} from "./retention.js";
import { ReadBatch } from "./read-batch.js";
import { toExecutorRow, toRunRow, toStepRow } from "./rows.js";
import { act, all, run, type Script } from "./script.js";
import { statements, type Statements } from "./statements.js";
import type {
  CommitOptions,
  DeadExecutor,
  ExecutorRow,
  Fence,
  NewRun,
  ReceiveRequest,
  ReceiveResult,
  RunFilter,
  RunRow,
  RunStatus,
  SelectRequest,
  StepRecord,
  StepRow,
  WriteOp,
} from "./store.js";

type Raw = Record<string, unknown>;

/**
 * What both backends do the same way, written once over the dialect: every read, the executors'
 * rows, receive, cancel, resume and fork (as scripts, `script.ts`), retention, and the layers'
 * hooks. A backend supplies how a statement reaches its database ({@link SqlStore.reader},
 * {@link SqlStore.write}, {@link SqlStore.writeTransaction}, {@link SqlStore.transact}) and
 * performs the few acts whose shape differs (`script.ts`'s `Act`): writing a step or a run (SQLite:
 * prepared statements; PostgreSQL: one round trip with the payload in a CTE), checking a fence,
 * waking a waiting parent, notifying listeners. Group commit, the claim's round trips, the user's
 * transactional step and the operator's SQL stay with each backend.
 *
 * `Tx` is the backend's handle on an open write transaction.
 */
export abstract class SqlStore<Tx> {
  protected readonly layers: LayerRegistry;
  protected readonly sql: Statements;

  constructor(protected readonly dialect: SqlDialect) {
    this.layers = new LayerRegistry(dialect);
    this.sql = statements(dialect);
  }

  /** Where reads run: outside any transaction, without the write lock. */
  protected abstract reader(): Connection;
  /** Runs one autocommitted write (SQLite: under the store's write lock). */
  protected abstract write<T>(fn: (db: Connection) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` in a write transaction (SQLite: BEGIN IMMEDIATE under the write lock; PostgreSQL:
   * retried on deadlock). Only for work that must await (retention's batches): on SQLite other
   * JavaScript may run while it holds the lock, so algorithms use {@link SqlStore.transact}.
   */
  protected abstract writeTransaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  protected abstract connection(tx: Tx): Connection;
  /**
   * Runs a script (an algorithm written once, `script.ts`) in one write transaction: SQLite
   * synchronously, PostgreSQL retried on deadlock. `script` makes a fresh one for each attempt.
   */
  protected abstract transact<T>(script: () => Script<T>): Promise<T>;
  /**
   * Holds off every writer of payload rows until the transaction ends (PostgreSQL: a table lock that
   * waits for the transactions that wrote one; SQLite: nothing, its one writer is this transaction).
   */
  protected abstract lockPayloads(tx: Tx): Promise<void>;

  abstract commit(fence: Fence | null, ops: WriteOp[], options?: CommitOptions): Promise<void>;

  /** `Store.commitRuns`: the commit, then one read of the runs' rows (PostgreSQL overrides it without the read). */
  async commitRuns(ops: WriteOp[]): Promise<Map<string, RunRow>> {
    await this.commit(null, ops);
    return this.runsById(runIdsOf(ops));
  }

  /** The rows of the runs among `ids` that exist; a single id's read shares a statement with its turn's others (getRun). */
  protected async runsById(ids: readonly string[]): Promise<Map<string, RunRow>> {
    const rows = ids.length === 1 ? [await this.getRun(ids[0]!)] : await this.getRuns(ids);
    return new Map(rows.flatMap((row) => (row === undefined ? [] : [[row.id, row] as const])));
  }

  register(extension: StoreExtension): void {
    this.layers.register(extension);
  }

  /** Reads of one turn share one statement (`read-batch.ts`): 500 concurrent starts read their rows back at once. */
  getRun(id: string): Promise<RunRow | undefined> {
    return this.runs.load(id);
  }

  private readonly runs = new ReadBatch<RunRow | undefined>(
    async (ids) => {
      const rows =
        ids.length === 1 ? await this.reader().all<Raw>(this.sql.getRun, ids) : await this.reader().all<Raw>(this.sql.runsIn, [this.dialect.list(ids)]);
      return new Map(rows.map((raw) => [String(raw.id), toRunRow(raw)]));
    },
    () => undefined,
    (row) => (row === undefined ? undefined : { ...row }),
  );

  async getRuns(ids: readonly string[]): Promise<RunRow[]> {
    if (ids.length === 0) return [];
    return (await this.reader().all<Raw>(this.sql.runsIn, [this.dialect.list([...ids])])).map(toRunRow);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = await this.reader().all<Raw>(this.sql.listRuns, [
      filter.status ?? null,
      filter.workflow ?? null,
      filter.parentId ?? null,
      filter.limit ?? 100,
    ]);
    return rows.map(toRunRow);
  }

  /** Journal loads of one turn share one read (`read-batch.ts`): a claimed batch's journals in one round trip. */
  loadJournal(runId: string): Promise<StepRow[]> {
    return this.journals.load(runId);
  }

  private readonly journals = new ReadBatch<StepRow[]>(
    async (ids) => {
      const byRun = new Map<string, StepRow[]>(ids.map((id) => [id, []]));
      const rows =
        ids.length === 1
          ? await this.reader().all<Raw>(this.sql.journal, ids)
          : await this.reader().all<Raw>(this.sql.journalsIn, [this.dialect.list(ids)]);
      for (const raw of rows) {
        const row = toStepRow(raw);
        byRun.get(row.runId)?.push(row);
      }
      return byRun;
    },
    () => [],
    (rows) => [...rows],
  );

  async getEvent(runId: string, key: string): Promise<string | undefined> {
    const [row] = await this.reader().all<{ v: string }>(this.sql.getEvent, [runId, key]);
    return row?.v;
  }

  /**
   * The earliest time this executor may claim a waiting run at (ParkerFirst, statements.ts): its
   * own runs' wake-ups, and those of runs no live executor parked; others' `PARKER_GRACE_MS` later.
   */
  async nextWakeAt(appVersion: string | null, workflows: readonly string[]): Promise<number | null> {
    const own = this.ownParker();
    const list = this.dialect.list([...workflows]);
    const [row] =
      appVersion === null
        ? await this.reader().all<{ w: string | number | null }>(this.sql.nextWakeAnyVersion, [own, list])
        : await this.reader().all<{ w: string | number | null }>(this.sql.nextWake, [appVersion, own, list]);
    return row?.w === null || row?.w === undefined ? null : Number(row.w);
  }

  abstract ownParker(): string | null;

  async lostRuns(executorId: string, runIds: string[]): Promise<string[]> {
    if (runIds.length === 0) return [];
    const rows = await this.reader().all<{ id: string }>(this.sql.lostRuns, [this.dialect.list(runIds), executorId]);
    return rows.map((r) => r.id);
  }

  async registerExecutor(executor: ExecutorRow): Promise<void> {
    await this.write((db) =>
      db.run(this.sql.registerExecutor, [
        executor.id,
        executor.hostname,
        executor.pid,
        executor.pidNamespace,
        executor.backendPid,
        executor.appVersion,
        executor.startedAt,
        executor.heartbeatAt,
        executor.capacity ?? null,
        executor.wakeChannel ?? null,
        executor.workflows === undefined || executor.workflows === null ? null : JSON.stringify(executor.workflows),
      ]),
    );
  }

  async claimWith<T>(executorId: string, now: number, body: (db: Connection, wake: () => void) => Promise<T>): Promise<T | null> {
    return this.writeTransaction(async (tx) => {
      const db = this.connection(tx);
      if ((await db.run(this.sql.renewClaimant, [now, executorId])) === 0) return null;
      let woken = false;
      const result = await body(db, () => (woken = true));
      if (woken) await this.notifyWake(tx);
      return result;
    });
  }

  async execute<Row = Record<string, unknown>>(statement: Statement, params: readonly unknown[], _options?: { concurrent?: boolean }): Promise<Row[]> {
    return this.write((db) => db.all<Row>(statement, params));
  }

  /** Wakes listening executors when the transaction commits (PostgreSQL's NOTIFY; nothing on SQLite). */
  protected abstract notifyWake(tx: Tx): Promise<void>;

  /** The layers' `holdsRuns` predicates: enqueued runs the core claim leaves to their layer. */
  protected heldRuns(): string[] {
    return this.layers.list().flatMap((layer) => (layer.hooks.holdsRuns === undefined ? [] : [this.layers.sql(layer.hooks.holdsRuns)]));
  }

  async heartbeat(executorId: string, at: number): Promise<boolean> {
    return (await this.write((db) => db.run(this.sql.heartbeat, [at, executorId]))) > 0;
  }

  async listExecutors(): Promise<ExecutorRow[]> {
    return (await this.reader().all<Raw>(this.sql.listExecutors, [])).map(toExecutorRow);
  }

  async transferRuns(fromId: string, toId: string, at: number): Promise<string[]> {
    const rows = await this.write((db) => db.all<{ id: string }>(this.sql.transferRuns, [toId, at, fromId]));
    return rows.map((r) => r.id);
  }

  async removeExecutors(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.write((db) => db.run(this.sql.removeExecutors, [this.dialect.list(ids)]));
  }

  async removeDeadExecutors(dead: DeadExecutor[]): Promise<void> {
    if (dead.length === 0) return;
    await this.write((db) => db.run(this.sql.removeDeadExecutors, [this.dialect.deadExecutors(dead)]));
  }

  receive(fence: Fence, request: ReceiveRequest): Promise<ReceiveResult> {
    return this.transact(() => this.receiveScript(fence, request));
  }

  private *receiveScript(fence: Fence, request: ReceiveRequest): Script<ReceiveResult> {
    if (!(yield* act<boolean>({ type: "fenceHolds", fence }))) throw fenced(fence);
    const { runId, seq, name, topic, now, deadline } = request;
    const [message] = yield* all<{ id: string; body: string }>(this.sql.inbox, [runId, topic]);
    const base = { runId, seq, name, kind: "recv" as const, error: null, startedAt: now, attempts: 1, path: request.path ?? null };
    const completion = request.completion ?? null;
    if (message !== undefined) {
      yield* run(this.sql.consume, [`${runId}:${seq}`, now, message.id]);
      const step: StepRecord = { ...base, status: "succeeded", output: { text: message.body, hash: null }, finishedAt: now, completion };
      yield* act({ type: "writeStep", step });
      return { status: "received", text: message.body };
    }
    if (deadline !== null && now >= deadline) {
      const step: StepRecord = { ...base, status: "succeeded", output: { text: '{"$c":"undefined"}', hash: null }, finishedAt: now, completion };
      yield* act({ type: "writeStep", step });
      return { status: "timed-out" };
    }
    // The pending row remembers the deadline across unloads and crashes.
    const step: StepRecord = { ...base, status: "pending", output: { text: JSON.stringify(deadline), hash: null }, finishedAt: null };
    yield* act({ type: "writeStep", step });
    return { status: "waiting", deadline };
  }

  settleSelect<T>(fence: Fence, request: SelectRequest<T>): Promise<T> {
    return this.transact(() => this.selectScript(fence, request));
  }

  private *selectScript<T>(fence: Fence, request: SelectRequest<T>): Script<T> {
    if (!(yield* act<boolean>({ type: "fenceHolds", fence }))) throw fenced(fence);
    const messages = new Map<string, { id: string; body: string }>();
    for (const topic of request.topics) {
      const [message] = yield* all<{ id: string; body: string }>(this.sql.inbox, [request.runId, topic]);
      if (message !== undefined) messages.set(topic, message);
    }
    const children =
      request.childRunIds.length === 0 ? [] : (yield* all<Raw>(this.sql.runsIn, [this.dialect.list([...request.childRunIds])])).map(toRunRow);
    const decision = request.decide({ messages, children });
    if (decision.step !== null) {
      if (decision.consume !== null) {
        yield* run(this.sql.consume, [`${request.runId}:${decision.step.seq}`, decision.step.startedAt, decision.consume]);
      }
      yield* act({ type: "writeStep", step: decision.step });
    }
    return decision.result;
  }

  cancelRun(runId: string, error: string, at: number): Promise<string[]> {
    return this.transact(() => this.cancelScript(runId, error, at));
  }

  private *cancelScript(runId: string, error: string, at: number): Script<string[]> {
    const rows = yield* all<{ id: string }>(this.sql.cancelTree, [runId, error, at]);
    if (rows.length > 0) {
      yield* this.hook("onCancel", [runId]);
      // Executors running the cancelled runs hear of it at once, and a waiting parent wakes.
      yield* act({ type: "wakeParent", runId, at });
    }
    return rows.map((r) => r.id);
  }

  resumeRun(runId: string, at: number): Promise<boolean> {
    return this.transact(() => this.resumeScript(runId, at));
  }

  private *resumeScript(runId: string, at: number): Script<boolean> {
    if ((yield* run(this.sql.resume, [at, runId])) === 0) return false;
    yield* run(this.sql.resumeSteps, [runId]);
    yield* run(this.sql.resumeTree, [runId, at]);
    yield* this.hook("onResume", [runId]);
    yield* act({ type: "notifyWake" });
    return true;
  }

  async forkRun(runId: string, fromSeq: number, fork: NewRun): Promise<void> {
    await this.transact(() => this.forkScript(runId, fromSeq, fork));
  }

  private *forkScript(runId: string, fromSeq: number, fork: NewRun): Script<void> {
    if ((yield* all(this.sql.forkTarget, [fork.id])).length > 0) throw forkIdTaken(fork.id);
    if ((yield* all(this.sql.forkOrigin, [runId])).length === 0) throw new RunNotFoundError(runId);
    yield* act({ type: "writeRun", run: fork });
    yield* run(this.sql.forkSteps, [fork.id, runId, fromSeq]);
    yield* run(FORK_EVENTS_STATEMENT, [fork.id, runId, fromSeq]);
    yield* this.hook("onFork", [fork.id, runId, fromSeq]);
  }

  /**
   * Retention, in two transactions (see `retention.ts` for what goes with a run).
   *
   * 1. The runs: matched (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so executors running retention at
   *    once take different runs; runs named by id are waited for instead), each tree's rows locked in
   *    id order, statuses checked under the lock, rows deleted. A fork locks its origin's row
   *    `FOR SHARE`, so a fork and the deletion of its origin take turns: the fork either copies the
   *    journal before the deletion (and its rows then name the payloads) or finds its origin gone.
   * 2. The payloads the deleted rows named, under {@link SqlStore.lockPayloads}: every write of a row
   *    that names a payload upserts that payload in the same transaction, so no hash can gain a
   *    reference between the check and the delete. A writer that was waiting then re-inserts the
   *    payload it needs. The lock is held for one short statement per 500 hashes.
   */
  async deleteRuns(filter: RunDeleteFilter): Promise<DeletedRuns> {
    validateDeleteFilter(filter);
    const layers = this.layers.deletion();
    const d = this.dialect;
    const { runIds, skipped, hashes } = await this.writeTransaction(async (tx) => {
      const db = this.connection(tx);
      const sql = retentionSql(db);
      // Named runs wait for a fork or a cancel in flight; a policy's batch skips runs that are busy.
      const roots = await matchingRuns(sql, filter, filter.ids === undefined ? d.forUpdateSkipLocked : d.forUpdate);
      const trees = await deletableTrees(sql, roots, async (ids) => {
        const rows = await db.all<{ id: string; status: RunStatus }>(
          { text: `SELECT id, status FROM cairn_runs WHERE ${d.inList("id", "$1")} ORDER BY id ${d.forUpdate}` },
          [d.list(ids)],
        );
        return new Map(rows.map((r) => [r.id, r.status]));
      });
      return { ...trees, hashes: await deleteRunRows(sql, trees.runIds, layers) };
    });
    const payloads = hashes.length === 0 ? 0 : await this.collect(hashes, layers);
    return { runIds, skipped, payloads };
  }

  /** Deletes every payload no row names, a page at a time (`cairn gc`). */
  async collectPayloads(): Promise<number> {
    const layers = this.layers.deletion();
    let deleted = 0;
    let after = "";
    for (;;) {
      const page = await payloadPage(retentionSql(this.reader()), after, 2000);
      if (page.length === 0) return deleted;
      deleted += await this.collect(page, layers);
      after = page[page.length - 1]!;
    }
  }

  private collect(hashes: string[], layers: LayerDeletion): Promise<number> {
    return this.writeTransaction(async (tx) => {
      await this.lockPayloads(tx);
      return collectHashes(retentionSql(this.connection(tx)), hashes, layers);
    });
  }

  /** Runs the registered layers' statements for a hook (the extension contract). */
  private *hook(name: HookName, params: unknown[]): Script<void> {
    for (const [i, text] of this.layers.hook(name).entries()) yield* run({ name: `cairn_${name}_${i}`, text }, params);
  }
}

const FORK_EVENTS_STATEMENT = { name: "cairn_fork_events", text: FORK_EVENTS };

export function fenced(fence: Fence): FencedError {
  return new FencedError(`executor ${fence.executorId} no longer owns run ${fence.runId}`, { runId: fence.runId });
}

/** Retention's statements are built per call (their `IN` lists vary): compiled for that call only. */
function retentionSql(db: Connection): RetentionSql {
  return {
    all: <Row>(text: string, params: unknown[]) => db.all<Row>({ text }, params),
    run: (text: string, params: unknown[]) => db.run({ text }, params),
  };
}

/** The ids of the runs `ops` create, each once. */
export function runIdsOf(ops: readonly WriteOp[]): string[] {
  return [...new Set(ops.flatMap((op) => (op.type === "run" ? [op.run.id] : [])))];
}
