import type { DeletedRuns, RunDeleteFilter } from "./retention.js";
import type { CORE_STEP_KINDS, StoreExtension } from "./extension.js";
import type { RowOp } from "./row-ops.js";
import type { Connection, Statement } from "./connection.js";

/**
 * The system database behind Cairn: one async interface, two backends with mirrored file sets
 * (`sqlite/` on better-sqlite3, the embedded default; `postgres/` on pg, for many processes and
 * machines). Both hold the same tables and columns (see `migrations.ts`, and the layers' own
 * schemas registered through `extension.ts`); the engine never writes SQL of its own.
 *
 * Every write made on behalf of a run carries a {@link Fence}: it applies only while that run is
 * `running` and owned by that executor. A cancelled run, or one whose lease passed to another
 * executor, refuses the old owner's writes with a `FencedError`, and none of that commit's
 * operations apply.
 */

export type RunStatus = "enqueued" | "running" | "waiting" | "succeeded" | "failed" | "cancelled";

export const TERMINAL_STATUSES: readonly RunStatus[] = ["succeeded", "failed", "cancelled"];

/**
 * What kind of durable operation a journal row records. `step` and `transaction` run user code;
 * the rest are the engine's own recorded acts. A layer above adds its own kinds (its
 * `StoreExtension.stepKinds`) by declaring them in {@link ExtensionStepKinds}.
 */
export type StepKind = (typeof CORE_STEP_KINDS)[number] | keyof ExtensionStepKinds;

/** Step kinds declared by layers (module augmentation: `interface ExtensionStepKinds { kind: true }`). */
export interface ExtensionStepKinds {}

/** `pending` marks a wait that has begun (a `recv` with a deadline) but not ended. */
export type StepStatus = "succeeded" | "failed" | "pending";

/**
 * An encoded value on its way to the database. Values longer than the inline limit carry a hash
 * and are stored once in `cairn_payloads`, referenced from the row (content addressing).
 */
export interface StoredValue {
  text: string;
  hash: string | null;
}

export interface Fence {
  runId: string;
  executorId: string;
}

export interface StepRecord {
  runId: string;
  seq: number;
  name: string;
  kind: StepKind;
  status: StepStatus;
  output: StoredValue | null;
  /** JSON of an ErrorRecord. */
  error: string | null;
  startedAt: number;
  finishedAt: number | null;
  attempts: number;
  /**
   * Where the operation was called: the enclosing operation's identity (empty at the workflow's
   * top), `#`, and how many operations of the same scope, kind, name and fingerprint came before it
   * (see src/engine/replay-journal.ts). Null for a top-level first occurrence — most rows — and for
   * every row written before paths existed.
   */
  path?: string | null;
  /**
   * The order in which the workflow saw operations complete (0, 1, 2, ... per run). Replay
   * delivers recorded outcomes in this order, so concurrent branches interleave as they did live.
   */
  completion?: number | null;
  /** What the operation was called with, where known (a hash of its input). */
  fingerprint?: string | null;
}

/** A journal row as read back: the payload is already resolved to its text. */
export interface StepRow {
  runId: string;
  seq: number;
  name: string;
  kind: StepKind;
  status: StepStatus;
  output: string | null;
  outputHash: string | null;
  error: string | null;
  startedAt: number;
  finishedAt: number | null;
  attempts: number;
  /** StepRecord.path as stored. */
  storedPath: string | null;
  completion: number | null;
  fingerprint: string | null;
}

export interface NewRun {
  id: string;
  workflow: string;
  status: "enqueued" | "running";
  input: StoredValue;
  parentId: string | null;
  parentSeq: number | null;
  rootId: string;
  appVersion: string;
  executorId: string | null;
  deadlineAt: number | null;
  createdAt: number;
  forkedFrom: string | null;
  forkedFromSeq: number | null;
  /**
   * The layer whose own dispatch starts this run while it is `enqueued` (the scheduler's queues:
   * `cairn_runs.held_by`): the core claim never reads it, so a backlog of held runs costs a claim
   * nothing. Absent: the core claim's, unless a layer's `holdsRuns` predicate holds it (see
   * ExtensionHooks.holdsRuns).
   */
  heldBy?: string | null;
}

export interface RunRow {
  id: string;
  workflow: string;
  status: RunStatus;
  input: string;
  output: string | null;
  error: string | null;
  parentId: string | null;
  parentSeq: number | null;
  rootId: string;
  appVersion: string;
  executorId: string | null;
  wakeAt: number | null;
  deadlineAt: number | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  recoveries: number;
  /** `recoveries` when the run was last resumed; recoveries past it count toward maxRecoveryAttempts. */
  recoveryBase: number;
  forkedFrom: string | null;
  forkedFromSeq: number | null;
}

export interface MessageRecord {
  /**
   * Idempotency: a sender inside a run uses `runId:seq`, so a replayed send inserts nothing;
   * `cairn.send` with a key uses `send:["<destination>","<key>"]`. The destination run must exist:
   * a commit with a message to no run fails with a `RunNotFoundError` and applies nothing.
   */
  id: string;
  runId: string;
  topic: string;
  body: StoredValue;
  sender: string | null;
  createdAt: number;
}

/** What a run that unloads itself waits for; the store wakes it at once if any is already true. */
export interface WaitCondition {
  wakeAt: number | null;
  topics: string[];
  childRunIds: string[];
}

export type WriteOp =
  | { type: "step"; step: StepRecord }
  | { type: "run"; run: NewRun }
  | { type: "message"; message: MessageRecord }
  | { type: "event"; runId: string; key: string; value: StoredValue; at: number }
  | {
      type: "finish";
      runId: string;
      status: "succeeded" | "failed";
      output: StoredValue | null;
      error: string | null;
      at: number;
      /**
       * False when the run is known to have no parent (a run's parent never changes): the store
       * need not look for a parent to wake. Absent: it looks.
       */
      hasParent?: boolean;
    }
  | { type: "suspend"; runId: string; wait: WaitCondition; at: number }
  /** Records when the workflow saw a step that was written earlier complete (a sleep's wake-up). */
  | { type: "completion"; runId: string; seq: number; completion: number }
  /**
   * The durability barrier of external synchrony (see {@link CommitOptions}): touches the run's row
   * (`updated_at`), so that the commit writes something and waits for its flush — a commit that
   * writes nothing forces no fsync on SQLite and no WAL flush on PostgreSQL — and with it every
   * commit before it. Commit it under the run's fence: a run lost meanwhile gets a FencedError.
   */
  | { type: "barrier"; runId: string; at: number }
  | RowOp;

/**
 * External synchrony (Nightingale et al., "Rethink the sync"): a commit may resolve before it is
 * durable, as long as nothing the outside world can see depends on it before a later commit made it
 * durable. Every commit without `deferDurability` waits for its own durability, and so makes every
 * commit before it durable too: SQLite in WAL mode fsyncs the whole WAL file at a commit with
 * `synchronous=FULL`, frames of earlier commits at NORMAL included; PostgreSQL flushes WAL up to a
 * synchronous commit's record, past every earlier commit's.
 */
export interface CommitOptions {
  /**
   * Resolve once committed (visible to readers, surviving a crash of this process), without waiting
   * for an fsync (SQLite: the transaction runs at `synchronous=NORMAL`) or a WAL flush (PostgreSQL:
   * `SET LOCAL synchronous_commit = off`). A power loss — or, on PostgreSQL, a crash of the server —
   * may erase it until a later commit without this option has resolved. Counted in
   * {@link Store.durability}. Commits that meet in one group commit with one that waits all wait.
   */
  deferDurability?: boolean;
  /**
   * With `deferDurability`: the commit writes only what a replay of records already durable would
   * write again (a run's succeeded finish, `WorkflowOptions.deferFinishFsync`), so losing it costs a
   * replay, never a repeated effect. It resolves as `deferDurability` does but is not counted in
   * {@link Store.durability}: no operation waits for a barrier on its account.
   */
  rederivable?: boolean;
}

/**
 * The store's durability watermark (external synchrony): `deferred` counts the commits that resolved
 * without waiting for durability (commits with `deferDurability` that did not share a flush with a
 * durable one); `durable` is how many of them a `barrier` commit has since made durable. Equal: no
 * commit of this store is at risk of a power loss. Other commits that wait for durability make the
 * earlier ones durable too, but only a barrier moves the watermark.
 */
export interface DurabilityWatermark {
  readonly deferred: number;
  readonly durable: number;
  /** Commits with `rederivable` that resolved without waiting (not part of the watermark: no barrier waits for them). */
  readonly rederivable: number;
}

export interface ReceiveRequest {
  runId: string;
  seq: number;
  name: string;
  topic: string;
  now: number;
  /** Absolute time after which the receive ends empty-handed; null waits forever. */
  deadline: number | null;
  path?: string | null;
  /** The completion ordinal to record if the receive ends now (a message, or the deadline). */
  completion?: number | null;
}

/**
 * A select's look at what it waits for (`ctx.select`, src/engine/run/select.ts), in one write
 * transaction: the oldest unconsumed message on each topic and the rows of the child runs. `decide`
 * (synchronous, engine code) picks a winner and returns the record to write and the message to
 * consume with it, or null to write nothing.
 */
export interface SelectRequest<T> {
  runId: string;
  topics: readonly string[];
  childRunIds: readonly string[];
  decide(ready: { messages: ReadonlyMap<string, { id: string; body: string }>; children: readonly RunRow[] }): {
    step: StepRecord | null;
    consume: string | null;
    result: T;
  };
}

export type ReceiveResult = { status: "received"; text: string } | { status: "timed-out" } | { status: "waiting"; deadline: number | null };

export interface ExecutorRow {
  id: string;
  hostname: string;
  pid: number;
  /** The PostgreSQL backend (session) pid of the executor's listening connection; null on SQLite. */
  backendPid: number | null;
  /**
   * The pid namespace `pid` belongs to ("<boot id>:<namespace>", Linux) or null where unknown: a
   * pid is checked for life only by an executor on the same host in the same namespace.
   */
  pidNamespace: string | null;
  appVersion: string;
  startedAt: number;
  heartbeatAt: number;
  /** How many runs it may hold at once (the scheduler's Worker table); null for an older Cairn's executor. */
  capacity?: number | null;
  /**
   * The channel its session hears the wake-ups meant for it alone (PostgreSQL: `cairn_wake_<backend
   * pid>`), recorded with the pid it derives from; null on SQLite, for a registration made while
   * the session was lost, and for an older Cairn's executor (which listens on `cairn_wake` only). A
   * start wakes one executor with such a channel instead of every executor (postgres-writes.ts,
   * CLAIM_WAKE).
   */
  wakeChannel?: string | null;
  /**
   * The workflows it had registered when it registered (stored as a JSON array): a start wakes only
   * an executor that knows the run's workflow. Null for an older Cairn's executor.
   */
  workflows?: readonly string[] | null;
  /**
   * Whether the session `backendPid` names is open, read in the same statement as the row
   * (`listExecutors`, PostgreSQL): a death check costs one round trip instead of two, and an
   * executor no longer reads every session's pid at each poll. Null where there is no such pid
   * (SQLite, a row showing none); absent in a row that was not listed (then `liveBackendPids`).
   */
  sessionOpen?: boolean | null;
}

/** An executor judged dead, and the heartbeat (as listed) it was judged dead by. */
export interface DeadExecutor {
  id: string;
  heartbeatAt: number;
}

/** A claim that rides the commits releasing runs (`Store.claimOnRelease`). */
export interface ReleaseClaim<T> {
  executorId: string;
  /** The time of the claim, asked when the commit carrying it begins. */
  now(): number;
  claim(db: Connection, now: number): Promise<T>;
  /**
   * After the commit: what `claim` returned, or null when the claimant's row was gone; `released`,
   * the runs whose end or unload that commit carried (their commits went through): the slots the
   * claim was made for.
   */
  committed(result: T | null, released: readonly string[]): void;
  failed(error: unknown): void;
}

export interface ClaimRequest {
  executorId: string;
  /** null claims runs of every version. */
  appVersion: string | null;
  now: number;
  /**
   * Executors judged dead, each with the heartbeat it was judged by: their running runs are taken
   * over, unless that heartbeat moved since (the executor woke up from a pause and claimed again).
   */
  deadExecutors: DeadExecutor[];
  /** Only runs of these workflows (the ones this executor has code for). */
  workflows: string[];
  limit: number;
}

export interface RunFilter {
  status?: RunStatus;
  workflow?: string;
  parentId?: string;
  limit?: number;
}

/** Runs SQL inside a transactional step; placeholders are `$1, $2, ...` on both backends. */
export interface SqlClient {
  query<Row = Record<string, unknown>>(text: string, params?: unknown[]): Promise<Row[]>;
  execute(text: string, params?: unknown[]): Promise<{ rowCount: number }>;
}

export interface QueryResult {
  columns: string[];
  rows: Record<string, unknown>[];
}

export interface OperatorQueryOptions {
  /** The statement is stopped after this long. Default 5000. */
  timeoutMs?: number;
}

/**
 * What a backend can do beyond the Store interface, declared rather than probed: null where the
 * backend has no such thing.
 */
export interface StoreCapabilities {
  /**
   * A database session held for the store's lifetime whose backend pid other executors can see
   * alive (PostgreSQL's `pg_stat_activity`): an executor's liveness. The pid is null while the
   * session is lost and being reopened, and a different pid after it was reopened.
   */
  sessionLiveness: {
    sessionPid(): Promise<number | null>;
    /** The session's pid as known now, without waiting (null while it is lost or not yet open). */
    currentSessionPid(): number | null;
  } | null;
  /**
   * Wake-ups: `listener` is called whenever a transaction commits something that may make a run
   * claimable, and once if the channel is lost. Not guaranteed: still poll. `payload` says what
   * happened when the writer said so (the scheduler's queue wake-ups); empty or absent, anything
   * may have (the channel lost included).
   */
  wakeNotifications: {
    onWake(listener: (payload?: string) => void): void;
    /**
     * The channel wake-ups meant for this store's session alone arrive on (PostgreSQL:
     * `cairn_wake_<backend pid>`), heard by the same listeners; null while the session is lost.
     * The scheduler records it with the queues an executor serves, so a dispatch wakes the
     * executor it gave runs to, not every executor.
     */
    currentOwnChannel(): string | null;
    /** The channel the session with this backend pid hears its own wake-ups on (`cairn_wake_<pid>`). */
    ownChannelOf(backendPid: number): string;
    /**
     * Tells every executor (`cairn_wake`, payload `claimable`) if a started run of `appVersion`, or
     * a waiting one due by `now` that any executor may claim, is still claimable — in the same
     * statement, so a run a peer took meanwhile wakes nobody: an executor woken alone (CLAIM_WAKE:
     * for a start, or for a run it parked) that could not take it all passes it on. The same
     * statement first hands this executor's own due runs of that version to everyone (clears their
     * `wake_channel`: see ParkerFirst, statements.ts), since it could not take them either, and
     * tells everyone if it did. `ownDueOnly`: that hand-on alone (an executor at its capacity
     * whose own runs fell due) — never the wake-up for others' runs, which every full executor
     * would otherwise send each other at each of their passes.
     */
    passOnClaimable(appVersion: string, now: number, ownDueOnly?: boolean): Promise<void>;
  } | null;
}

export interface Store {
  readonly backend: "sqlite" | "postgres";
  readonly capabilities: StoreCapabilities;
  /**
   * Adds a layer's schema, tables, step kinds and hooks (the extension contract, `extension.ts`).
   * Call before `migrate()`; registering the same extension again does nothing.
   */
  register(extension: StoreExtension): void;
  /** Creates or upgrades the schema. Safe to call from many processes at once. */
  migrate(): Promise<void>;
  /** Throws NotACairnDatabaseError unless the schema exists (used by the CLI, which never creates). */
  assertCairnDatabase(): Promise<void>;
  close(): Promise<void>;

  /**
   * Applies `ops` atomically, after the fence holds (null: no fence). Concurrent commits are
   * grouped into one database transaction (group commit); each caller resumes only after its own
   * ops are durable, and a refused fence fails only its own commit.
   */
  commit(fence: Fence | null, ops: WriteOp[], options?: CommitOptions): Promise<void>;
  /** External synchrony's watermark (see {@link CommitOptions}). */
  readonly durability: DurabilityWatermark;
  /**
   * Starts: commits `ops` unfenced, as `commit(null, ops)` does, and returns the row of every run
   * its `run` ops name — the row this commit created, or, for an id that existed already (a second
   * start of it creates nothing), the row that is there. PostgreSQL learns which runs it created
   * from the insert itself, so a start is one round trip instead of a write and a read-back.
   */
  commitRuns(ops: WriteOp[]): Promise<Map<string, RunRow>>;
  /** Consumes the oldest unconsumed message on the topic and records the step, in one transaction. */
  receive(fence: Fence, request: ReceiveRequest): Promise<ReceiveResult>;
  /**
   * Settles a select in one transaction under the fence: reads the inbox heads of its topics and
   * its children's rows, lets `decide` pick, consumes the winning message (marked consumed by
   * `runId:seq` of the record) and writes the record — or writes what `decide` says and nothing else.
   */
  settleSelect<T>(fence: Fence, request: SelectRequest<T>): Promise<T>;
  /**
   * Opens a transaction, lets `body` run SQL in it and build the step record, then writes the
   * record and commits both together (or neither).
   */
  transaction(fence: Fence, body: (sql: SqlClient) => Promise<StepRecord>): Promise<void>;

  getRun(id: string): Promise<RunRow | undefined>;
  /** The rows of the runs among `ids` that exist, in one read (any order). */
  getRuns(ids: readonly string[]): Promise<RunRow[]>;
  listRuns(filter: RunFilter): Promise<RunRow[]>;
  loadJournal(runId: string): Promise<StepRow[]>;
  getEvent(runId: string, key: string): Promise<string | undefined>;

  /**
   * Takes enqueued runs, due waiting runs and the running runs of dead executors — only while the
   * claimant's own row exists, and renewing its heartbeat in the same transaction. Returns null
   * (claiming nothing) when that row is gone: peers presumed the claimant dead and removed it, so a
   * run claimed under that id would look orphaned and be taken over while it runs here.
   */
  claimRuns(request: ClaimRequest): Promise<RunRow[] | null>;
  /**
   * A layer's own claim (the scheduler's queue dispatch): `body` runs its statements in one write
   * transaction, only while the claimant's row exists, renewing its heartbeat in the same
   * transaction — the fencing of `claimRuns`, for claims the store does not write itself. Returns
   * null (running nothing) when that row is gone. When `body` calls `wake`, the commit wakes
   * listening executors (PostgreSQL's NOTIFY; nothing on SQLite).
   */
  claimWith<T>(executorId: string, now: number, body: (db: Connection, wake: () => void) => Promise<T>): Promise<T | null>;
  /**
   * SQLite only (absent on PostgreSQL): `claim` rides every group commit that ends or unloads a run
   * (a `finish` or `suspend` op), in its transaction after its writes — the claim of the slots
   * those runs free, without a transaction (and an fsync) of its own. Fenced as `claimWith` is:
   * `claim` runs only while the claimant's row exists, renewing its heartbeat. Until the returned
   * function removes it.
   *
   * Failure semantics: the claim's writes commit with the group's or not at all. A claim that
   * throws is rolled back alone (a savepoint) and the group's commits go through without it; a
   * group that fails takes the claim down with it. `committed` hears of the claim only after the
   * commit (null: the claimant's row is gone, nothing was claimed), `failed` of its error.
   */
  claimOnRelease?<T>(rider: ReleaseClaim<T>): () => void;
  /**
   * The earliest time this executor may claim a waiting run at: of `appVersion` (null: any) and of
   * one of `workflows`, those it registered — a timer armed at a run it cannot claim would fire a
   * pass that takes nothing, and read the same time again, in a loop. Its own runs' (and unparked
   * runs') `wake_at`, others' `PARKER_GRACE_MS` later (ParkerFirst, statements.ts).
   */
  nextWakeAt(appVersion: string | null, workflows: readonly string[]): Promise<number | null>;
  /**
   * The name a run this store suspends carries as its parker (`cairn_runs.wake_channel`), which
   * its executor registers too (`cairn_executors.wake_channel`): a due run goes to its parker first
   * (ParkerFirst, statements.ts). PostgreSQL: its session's own wake channel (null while the session
   * is lost); SQLite: a name made when the store opened, one per store.
   */
  ownParker(): string | null;
  /** Ids of this executor's runs that are no longer `running` under it (cancelled, taken over). */
  lostRuns(executorId: string, runIds: string[]): Promise<string[]>;

  /** Cancels the run and its unfinished descendants; returns the ids it cancelled. */
  cancelRun(runId: string, error: string, at: number): Promise<string[]>;
  /**
   * Puts a cancelled or failed run (and its cancelled descendants) back in the queue, dropping the
   * trailing failed steps that ended it and its deadline (a run that timed out would otherwise fail
   * again at once). Returns false if the run is not cancelled or failed.
   */
  resumeRun(runId: string, at: number): Promise<boolean>;
  /** Creates a new run with the journal of `runId` below `fromSeq`. */
  forkRun(runId: string, fromSeq: number, fork: NewRun): Promise<void>;

  /** Inserts the executor's row; for an id already registered, updates its backend pid and heartbeat. */
  registerExecutor(executor: ExecutorRow): Promise<void>;
  /** Renews an existing row only (never brings a removed one back); false when the row is gone. */
  heartbeat(executorId: string, at: number): Promise<boolean>;
  listExecutors(): Promise<ExecutorRow[]>;
  /** Backend pids of live database sessions (PostgreSQL); null where the backend has no sessions. */
  liveBackendPids(): Promise<Set<number> | null>;
  removeExecutors(ids: string[]): Promise<void>;
  /** Removes executors judged dead, each only if its heartbeat is still the one it was judged by. */
  removeDeadExecutors(dead: DeadExecutor[]): Promise<void>;
  /**
   * Hands the running runs of executor `fromId` to `toId` (an executor re-registering under a new
   * identity): the old id's fences stop holding, and the move is not a recovery. Returns their ids.
   */
  transferRuns(fromId: string, toId: string, at: number): Promise<string[]>;

  /** Read-only SQL for the CLI, dashboards and `cairn.query` (`$1, $2, ...` params). Refuses anything that writes. */
  query(sql: string, params?: unknown[]): Promise<QueryResult>;
  /**
   * A parameterised read (`$1, $2, ...` on both backends) for the layers above the engine. A
   * statement with a name is prepared under it on PostgreSQL (planned once per connection, not per
   * call); text alone is planned every time.
   */
  select<Row = Record<string, unknown>>(sql: string | Statement, params?: unknown[]): Promise<Row[]>;
  /**
   * A layer's one statement that writes, as a transaction of its own (prepared under its name on
   * PostgreSQL; on SQLite, under the store's write lock): the scheduler's dispatch function, which
   * fences, locks and decides inside the database in one round trip. It commits or fails whole.
   * On PostgreSQL such statements take turns on one held connection (a function is compiled and
   * planned once there); `{ concurrent: true }` lets a statement that many callers issue at once (an
   * enqueue) run beside the others on any pooled connection instead.
   */
  execute<Row = Record<string, unknown>>(statement: Statement, params: readonly unknown[], options?: { concurrent?: boolean }): Promise<Row[]>;

  /**
   * An operator's SQL (`cairn sql`): exactly one statement, which the database itself refuses unless
   * it only reads Cairn's tables, stopped after `timeoutMs`. Throws OperatorQueryRefusedError
   * (a PermissionDeniedError) for a refusal, TimeoutError at the timeout, InvalidSpecError when empty.
   */
  operatorQuery(sql: string, options?: OperatorQueryOptions): Promise<QueryResult>;
  /**
   * Deletes the finished runs the filter matches, each with its descendants and its rows in every
   * table keyed by run id, then the payloads no row names any more (see `retention.ts`). Never
   * touches an unfinished run, or a tree with one.
   */
  deleteRuns(filter: RunDeleteFilter): Promise<DeletedRuns>;
  /** Deletes every payload no row names (the full sweep of `cairn gc`); returns how many. */
  collectPayloads(): Promise<number>;
}
