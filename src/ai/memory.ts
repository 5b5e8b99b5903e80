import { CairnError, InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import { toStored, fromStored } from "../store/value/index.js";
import type { Store, WriteOp } from "../store/store.js";

/** One version of a memory key, as `history` returns it. */
export interface MemoryEntry<T = unknown> {
  /** 1 for the first version of the key; each `set` or `delete` adds the next. */
  version: number;
  /** The value stored by this version; undefined for a deletion. */
  value: T | undefined;
  /** This version is a tombstone written by `delete`. */
  deleted: boolean;
  /** The run and seq of the step that wrote this version (provenance). */
  runId: string;
  seq: number;
  updatedAt: number;
}

/**
 * An agent's long-lived memory: keys whose values outlive the run, kept as versioned rows of
 * `cairn_memory` (one row per version, never overwritten) so every later run of the same agent
 * reads what earlier runs wrote, and `SELECT * FROM cairn_memory` shows who wrote what, when.
 *
 * The namespace (`agent`) is the run's workflow name unless `scope` names another, so the runs of
 * one agent share one memory and different agents do not see each other's. Values are anything the
 * journal can store (see `encodeValue`); long ones are content-addressed in `cairn_payloads`.
 *
 * Every method is a durable operation (kind "memory"): it takes a seq when it is called and its
 * outcome is recorded, so replay returns what the first execution saw, never what the table holds
 * now.
 */
export interface Memory {
  /** The namespace these keys live in. */
  readonly agent: string;

  /**
   * The key's latest value, or undefined if it was never set or its latest version is a deletion.
   *
   * Failure semantics: the value read is recorded (step `get:<key>`) before it is returned, and
   * replay returns that record without reading the table: a run sees the same value after a crash
   * even if another run has written the key since. A crash before the record commits reads the
   * table again on recovery, and may then see a newer version. Reads see committed versions only:
   * a `set` this run has called but not awaited may not be visible yet.
   */
  get<T = unknown>(key: string): Promise<T | undefined>;

  /**
   * Writes a new version of the key and returns its version number.
   *
   * Failure semantics: the version row and the step's checkpoint (`set:<key>`, whose output is the
   * version number) commit in one transaction, so the write happens exactly once: replay after a
   * crash returns the recorded version and writes nothing. The next version number is read live,
   * when the step runs; a crash before the commit writes nothing and recovery reads it again.
   * Versions increase strictly but may skip a number where a commit failed. Two processes that set
   * the same key at the same moment can pick the same number: the later commit then fails on the
   * table's primary key, its run is reloaded, and the step runs again with the next number.
   */
  set(key: string, value: unknown): Promise<number>;

  /**
   * Deletes the key by writing a new version that is a tombstone (the history keeps every earlier
   * value) and returns its version number. Failure semantics: those of `set`.
   */
  delete(key: string): Promise<number>;

  /**
   * Every version of the key, oldest first, tombstones included.
   *
   * Failure semantics: those of `get`: the whole list is recorded (step `history:<key>`) and
   * replayed as recorded. The record grows with the history, so prefer `get` in a loop.
   */
  history<T = unknown>(key: string): Promise<MemoryEntry<T>[]>;

  /** The memory of another namespace (another agent's, or one shared by several workflows). */
  scope(agent: string): Memory;
}

export function memoryFor(run: DurableRun, agent: string): Memory {
  checkName("agent", agent);
  return {
    agent,
    get: async <T>(key: string) => {
      checkName("key", key);
      return run.operation<T | undefined>({
        kind: "memory",
        name: `get:${key}`,
        execute: async () => {
          const [row] = await readVersions(run.store, agent, key, "latest");
          return row === undefined ? undefined : (decode(row) as T | undefined);
        },
      });
    },
    set: (key, value) => writeVersion(run, agent, key, { value }),
    delete: (key) => writeVersion(run, agent, key, "tombstone"),
    history: async <T>(key: string) => {
      checkName("key", key);
      return run.operation<MemoryEntry<T>[]>({
        kind: "memory",
        name: `history:${key}`,
        execute: async () =>
          (await readVersions(run.store, agent, key, "all")).map((row) => ({
            version: Number(row.version),
            value: decode(row) as T | undefined,
            deleted: row.value === null && row.value_hash === null,
            runId: row.run_id,
            seq: Number(row.seq),
            updatedAt: Number(row.updated_at),
          })),
      });
    },
    scope: (other) => memoryFor(run, other),
  };
}

async function writeVersion(run: DurableRun, agent: string, key: string, content: { value: unknown } | "tombstone"): Promise<number> {
  checkName("key", key);
  const op = content === "tombstone" ? "delete" : "set";
  let text: string | null = null;
  let hash: string | null = null;
  return run.operation<number>({
    kind: "memory",
    name: `${op}:${key}`,
    execute: ({ idempotencyKey }) => {
      // Encoded before the first await: the value is taken as it was when `set` was called.
      if (content !== "tombstone") ({ text, hash } = toStored(content.value, `memory "${key}" of agent "${agent}"`));
      return nextVersion(run.store, agent, key, idempotencyKey);
    },
    alsoWrite: (outcome, seq): WriteOp[] => {
      if (!outcome.ok) return [];
      const now = run.clock.now();
      const ops: WriteOp[] = [];
      if (text !== null && hash !== null) {
        ops.push({
          type: "insert",
          table: "cairn_payloads",
          values: { hash, body: text, size: text.length, created_at: now },
          onConflict: { keys: ["hash"], action: "ignore" },
        });
      }
      ops.push({
        type: "insert",
        table: "cairn_memory",
        values: {
          agent,
          key,
          version: outcome.value,
          value: hash === null ? text : null,
          value_hash: hash,
          run_id: run.runId,
          seq,
          updated_at: now,
        },
      });
      return ops;
    },
    onRecorded: (_version, seq, live) => {
      if (live) release(run.store, agent, key, `${run.runId}:${seq}`);
    },
  });
}

interface VersionRow {
  version: number | string;
  value: string | null;
  value_hash: string | null;
  body: string | null;
  run_id: string;
  seq: number | string;
  updated_at: number | string;
}

function readVersions(store: Store, agent: string, key: string, which: "latest" | "all"): Promise<VersionRow[]> {
  return store.select<VersionRow>(
    `SELECT m.version, m.value, m.value_hash, p.body, m.run_id, m.seq, m.updated_at
     FROM cairn_memory m LEFT JOIN cairn_payloads p ON p.hash = m.value_hash
     WHERE m.agent = $1 AND m.key = $2
     ORDER BY m.version ${which === "latest" ? "DESC LIMIT 1" : "ASC"}`,
    [agent, key],
  );
}

function decode(row: VersionRow): unknown {
  if (row.value !== null) return fromStored(row.value);
  if (row.value_hash === null) return undefined; // a tombstone
  if (row.body === null) {
    throw new CairnError(`memory row version ${row.version} refers to payload ${row.value_hash}, which is missing from cairn_payloads`);
  }
  return fromStored(row.body);
}

/**
 * Version numbers handed out in this process whose rows are not committed yet, per store and key,
 * by the idempotency key of the step that took them.
 *
 * Why: the next version is read (`MAX(version)`) when the step runs, but the row is written later,
 * by the group commit. Two sets of one key in flight together — a `Promise.all` in one run, or two
 * runs on one executor — would read the same maximum and write the same (agent, key, version); the
 * second commit would fail the whole group and, for the `Promise.all`, fail again on every reload.
 * A step that runs again after its commit failed takes back its own number, so no gap opens.
 */
const reserved = new WeakMap<Store, Map<string, Map<string, number>>>();

async function nextVersion(store: Store, agent: string, key: string, idempotencyKey: string): Promise<number> {
  const rows = await store.select<{ v: number | string | null }>("SELECT MAX(version) AS v FROM cairn_memory WHERE agent = $1 AND key = $2", [agent, key]);
  const committed = Number(rows[0]?.v ?? 0);
  let byStore = reserved.get(store);
  if (byStore === undefined) reserved.set(store, (byStore = new Map()));
  const slot = JSON.stringify([agent, key]);
  let pending = byStore.get(slot);
  if (pending === undefined) byStore.set(slot, (pending = new Map()));
  for (const [owner, version] of pending) if (version <= committed) pending.delete(owner);
  const own = pending.get(idempotencyKey);
  if (own !== undefined) return own;
  const version = Math.max(committed, ...pending.values()) + 1;
  pending.set(idempotencyKey, version);
  return version;
}

function release(store: Store, agent: string, key: string, idempotencyKey: string): void {
  const byStore = reserved.get(store);
  const slot = JSON.stringify([agent, key]);
  const pending = byStore?.get(slot);
  pending?.delete(idempotencyKey);
  if (pending?.size === 0) byStore?.delete(slot);
}

function checkName(field: "agent" | "key", name: unknown): void {
  if (typeof name !== "string" || name.length === 0) {
    throw new InvalidSpecError(field, name, `a memory ${field} must be a non-empty string`);
  }
}
