import type Database from "better-sqlite3";
import { RunNotFoundError } from "../../errors.js";
import type { Compiled, SqliteStatements } from "../connection.js";
import { InsertShapes } from "../insert-shapes.js";
import type { LayerRegistry } from "../extension.js";
import { buildRowOp } from "../row-ops.js";
import { numbered, splitStored } from "../rows.js";
import type { Fence, NewRun, StepRecord, StoredValue, WaitCondition, WriteOp } from "../store.js";

type Statement = Database.Statement;

/**
 * What a run woken by a message or a child's end keeps as its parker (ParkerFirst, statements.ts):
 * its parker only if that is the store writing the wake-up (`?3`), which pokes its own executor.
 * SQLite has no NOTIFY, so a parker in another store (another process, or another Cairn here)
 * hears of the wake-up only at its next poll, while the writer's executor is poked at once: the
 * run is anyone's, as it was before parker-first — waiting the grace for a parker that cannot
 * have heard would delay it ~100 ms, and the peer would replay it all the same.
 */
const WOKEN_PARKER = "wake_channel = CASE WHEN wake_channel = ?3 THEN wake_channel END";

/**
 * The SQLite writes of the group commit, as prepared statements called with positional arguments
 * (the hot path: no placeholder rewriting, no parameter reordering). Every method runs inside a
 * transaction its caller opened (the store's group commit, or one of `SqlStore`'s transactions).
 */
export class SqliteWrites {
  private s!: Record<
    | "fence"
    | "runExists"
    | "payload"
    | "step"
    | "run"
    | "message"
    | "wakeRun"
    | "event"
    | "finish"
    | "wakeParent"
    | "suspend"
    | "inbox"
    | "childFinished"
    | "completion"
    | "touchRun",
    Statement
  >;
  private messagePosition = 0;
  private readonly inserts: InsertShapes<Compiled>;

  constructor(
    private readonly db: Database.Database,
    private readonly statements: SqliteStatements,
    private readonly layers: LayerRegistry,
    /** What a run it suspends records as its parker (Store.ownParker). */
    private readonly parker: string,
  ) {
    this.inserts = new InsertShapes((built) => statements.compiled(built.text));
  }

  /** Prepared after migration, once the tables exist. */
  prepare(): void {
    const db = this.db;
    this.s = {
      // Plucked: every commit asks, and a bare value costs no row object.
      fence: db.prepare("SELECT 1 FROM cairn_runs WHERE id = ? AND executor_id = ? AND status = 'running'").pluck(),
      runExists: db.prepare("SELECT 1 FROM cairn_runs WHERE id = ?"),
      payload: db.prepare("INSERT INTO cairn_payloads (hash, body, size, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING"),
      // A pending row (a wait that began) is the only row a later write may replace.
      step: db.prepare(
        `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, output_hash, error, started_at, finished_at, attempts,
           path, completion, fingerprint)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id, seq) DO UPDATE SET status = excluded.status, output = excluded.output,
           output_hash = excluded.output_hash, error = excluded.error, finished_at = excluded.finished_at,
           attempts = excluded.attempts, completion = excluded.completion
         WHERE cairn_steps.status = 'pending'`,
      ),
      run: db.prepare(
        `INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
           executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq, held_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
      ),
      message: db.prepare(
        `INSERT INTO cairn_messages (id, run_id, topic, body, body_hash, sender, position, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
      ),
      // A run already due keeps its earlier time (see PostgreSQL's wakeRun). min() of a NULL is NULL: coalesce first.
      // The run keeps its parker only if it is this store (?3): see WOKEN_PARKER.
      wakeRun: db.prepare(
        `UPDATE cairn_runs SET wake_at = min(coalesce(wake_at, ?1), ?1), updated_at = ?1, ${WOKEN_PARKER}
         WHERE id = ?2 AND status = 'waiting'`,
      ),
      event: db.prepare(
        `INSERT INTO cairn_events (run_id, key, value, value_hash, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value, value_hash = excluded.value_hash,
           updated_at = excluded.updated_at`,
      ),
      finish: db.prepare(
        `UPDATE cairn_runs SET status = ?, output = ?, output_hash = ?, error = ?, finished_at = ?, updated_at = ?,
           executor_id = NULL, wake_at = NULL WHERE id = ?`,
      ),
      wakeParent: db.prepare(
        `UPDATE cairn_runs SET wake_at = min(coalesce(wake_at, ?1), ?1), updated_at = ?1, ${WOKEN_PARKER}
         WHERE id = (SELECT parent_id FROM cairn_runs WHERE id = ?2) AND status = 'waiting'`,
      ),
      suspend: db.prepare("UPDATE cairn_runs SET status = 'waiting', executor_id = NULL, wake_at = ?, updated_at = ?, wake_channel = ? WHERE id = ?"),
      inbox: db.prepare(
        `SELECT m.id, COALESCE(m.body, p.body) AS body FROM cairn_messages m
         LEFT JOIN cairn_payloads p ON p.hash = m.body_hash
         WHERE m.run_id = ? AND m.topic = ? AND m.consumed_at IS NULL ORDER BY m.position, m.id LIMIT 1`,
      ),
      completion: db.prepare("UPDATE cairn_steps SET completion = ? WHERE run_id = ? AND seq = ?"),
      touchRun: db.prepare("UPDATE cairn_runs SET updated_at = ? WHERE id = ?"),
      childFinished: db.prepare(
        `SELECT 1 FROM cairn_runs WHERE id IN (SELECT value FROM json_each(?))
         AND status IN ('succeeded', 'failed', 'cancelled') LIMIT 1`,
      ),
    };
  }

  fenceHolds(fence: Fence): boolean {
    return this.s.fence.get(fence.runId, fence.executorId) !== undefined;
  }

  apply(op: WriteOp): void {
    switch (op.type) {
      case "step":
        return this.step(op.step);
      case "run":
        return this.run(op.run);
      case "message": {
        const m = op.message;
        // A message to no run would wait forever: the commit fails (and rolls back) instead.
        if (this.s.runExists.get(m.runId) === undefined) throw new RunNotFoundError(m.runId);
        const [body, hash] = this.stored(m.body, m.createdAt);
        const position = m.createdAt * 1000 + (this.messagePosition++ % 1000);
        const inserted = this.s.message.run(m.id, m.runId, m.topic, body, hash, m.sender, position, m.createdAt).changes;
        if (inserted > 0) this.s.wakeRun.run(numbered(m.createdAt, m.runId, this.parker));
        return;
      }
      case "event": {
        const [value, hash] = this.stored(op.value, op.at);
        this.s.event.run(op.runId, op.key, value, hash, op.at);
        return;
      }
      case "finish": {
        const [output, hash] = this.stored(op.output, op.at);
        this.s.finish.run(op.status, output, hash, op.error, op.at, op.at, op.runId);
        if (op.hasParent !== false) this.wakeParent(op.runId, op.at);
        return;
      }
      case "suspend":
        this.s.suspend.run(this.wakeAt(op.runId, op.wait, op.at), op.at, this.parker, op.runId);
        return;
      case "completion":
        this.s.completion.run(op.completion, op.runId, op.seq);
        return;
      case "barrier":
        // A write, so the commit has a WAL frame to fsync (store.ts, the barrier op).
        this.s.touchRun.run(op.at, op.runId);
        return;
      case "insert": {
        const { statement, values } = this.inserts.statementFor(op, this.layers.writableTables());
        statement.statement.run(...(statement.order === null ? values : statement.order.map((i) => values[i])));
        return;
      }
      case "update":
      case "delete": {
        const built = buildRowOp(op, this.layers.writableTables());
        this.statements.run(built.text, built.values);
        return;
      }
    }
  }

  /** The time to wake a run that unloads: now if what it waits for already happened. */
  private wakeAt(runId: string, wait: WaitCondition, now: number): number | null {
    for (const topic of wait.topics) {
      if (this.s.inbox.get(runId, topic) !== undefined) return now;
    }
    if (wait.childRunIds.length > 0 && this.s.childFinished.get(JSON.stringify(wait.childRunIds)) !== undefined) {
      return now;
    }
    return wait.wakeAt;
  }

  /** Wakes `runId`'s parent if it is waiting. */
  wakeParent(runId: string, at: number): void {
    this.s.wakeParent.run(numbered(at, runId, this.parker));
  }

  step(step: StepRecord): void {
    const [output, hash] = this.stored(step.output, step.startedAt);
    this.s.step.run(
      step.runId,
      step.seq,
      step.name,
      step.kind,
      step.status,
      output,
      hash,
      step.error,
      step.startedAt,
      step.finishedAt,
      step.attempts,
      step.path ?? null,
      step.completion ?? null,
      step.fingerprint ?? null,
    );
  }

  run(run: NewRun): void {
    const [input, hash] = this.stored(run.input, run.createdAt);
    this.s.run.run(
      run.id,
      run.workflow,
      run.status,
      input,
      hash,
      run.parentId,
      run.parentSeq,
      run.rootId,
      run.appVersion,
      run.executorId,
      run.deadlineAt,
      run.createdAt,
      run.createdAt,
      run.forkedFrom,
      run.forkedFromSeq,
      run.heldBy ?? null,
    );
  }

  /** Writes a large value to the payload table once; returns the row's inline and hash columns. */
  private stored(value: StoredValue | null, at: number): [string | null, string | null] {
    if (value !== null && value.hash !== null) this.s.payload.run(value.hash, value.text, value.text.length, at);
    return splitStored(value);
  }
}
