import { InvalidSpecError } from "../errors.js";
import type { SqlDialect } from "./dialect.js";

/**
 * The extension contract: how a layer above the engine (agents today; the scheduler and
 * supervision to come) brings its own schema to the system database without the store knowing it.
 * A layer declares its numbered migrations under its own name, the tables it writes through row
 * operations, the step kinds it records, and what its rows do when a run is forked, cancelled,
 * resumed or deleted. The store applies all of it generically, in the same transactions as its own
 * statements, so a layer's rows follow its runs atomically.
 *
 * Hook SQL uses `$n` placeholders (rewritten for SQLite) and may depend on the dialect.
 */

/** SQL written once, or per dialect where the two databases differ (JSON functions, casts). */
export type DialectSql = string | ((dialect: SqlDialect) => string);

export interface LayerMigration {
  /** 1, 2, 3 ... within the layer; never edit one that has shipped, add one. */
  version: number;
  name: string;
  statements: readonly DialectSql[];
  /**
   * The version of the single schema list (before layers had their own) that applied this
   * migration's statements: a database written then is recorded as having it, not given it twice.
   */
  legacyVersion?: number;
}

export interface StoreExtension {
  /** The layer's name, its migrations' key in the ledger ("core" is the store's own). */
  name: string;
  migrations: readonly LayerMigration[];
  /** Tables this layer writes with row operations (`WriteOp` insert/update/delete) in a commit. */
  tables: readonly string[];
  /** The `cairn_steps.kind` values this layer records (declare them in `ExtensionStepKinds` too). */
  stepKinds: readonly string[];
  hooks: ExtensionHooks;
}

export interface ExtensionHooks {
  /** `$1` fork id, `$2` original run id, `$3` fromSeq: copy what the fork inherits. */
  onFork?: readonly DialectSql[];
  /** `$1` run id: run once the run and its unfinished descendants are cancelled. */
  onCancel?: readonly DialectSql[];
  /** `$1` run id: run once a cancelled or failed run (and its tree) is back in the queue. */
  onResume?: readonly DialectSql[];
  onDelete?: DeleteHook;
  /**
   * A predicate over `cairn_runs` (unaliased): the enqueued runs it matches are this layer's to
   * dispatch, and the core claim leaves them alone (the scheduler's queued runs). Running runs are
   * never held: a dead executor's runs are taken over by the core claim whatever layer started them.
   */
  holdsRuns?: DialectSql;
}

/** What retention needs to know of a layer's rows. */
export interface DeleteHook {
  /** Tables keyed by `run_id` whose rows go with a deleted run. */
  runTables: readonly string[];
  /** Columns holding a payload hash: a payload is kept while any row names it. */
  payloadColumns: readonly { table: string; column: string }[];
  /**
   * Hashes named inside values (JSON), as a query with columns `run_id` and `h`; a payload is kept
   * while any of its rows names it.
   */
  payloadHashes?: DialectSql;
}

export type HookName = "onFork" | "onCancel" | "onResume";

/** The tables and step kinds of the store's own layer (the engine's journal, runs and messages). */
const CORE_TABLES = ["cairn_runs", "cairn_steps", "cairn_payloads", "cairn_messages", "cairn_events", "cairn_executors"];
export const CORE_STEP_KINDS = [
  "step",
  "transaction",
  "sleep",
  "recv",
  "send",
  "event",
  "child",
  "child-result",
  "now",
  "random",
  "uuid",
  "patch",
  // ctx.select / ctx.race (one record for the winner) and a child's cancel (src/engine/run/select.ts, children.ts)
  "select",
  "child-cancel",
] as const;

/** Tables a layer may write that the core owns: a large value's payload is written with its row. */
const SHARED_WRITABLE = ["cairn_payloads"];

/** The layers registered with one store, in registration order (the order their migrations run). */
export class LayerRegistry {
  private readonly layers: StoreExtension[] = [];
  private readonly writable = new Set<string>(SHARED_WRITABLE);
  private readonly hookCache = new Map<string, readonly string[]>();

  constructor(private readonly dialect: SqlDialect) {}

  register(extension: StoreExtension): void {
    const existing = this.layers.find((layer) => layer.name === extension.name);
    if (existing === extension) return;
    if (existing !== undefined || extension.name === "core") {
      throw new InvalidSpecError("name", extension.name, "a layer with this name is already registered with the store");
    }
    for (const table of extension.tables) {
      if (CORE_TABLES.includes(table) && !SHARED_WRITABLE.includes(table)) {
        throw new InvalidSpecError("tables", table, "is the engine's own table; a layer may not write it");
      }
      if (this.layers.some((layer) => layer.tables.includes(table))) {
        throw new InvalidSpecError("tables", table, "is written by another layer");
      }
    }
    for (const kind of extension.stepKinds) {
      if ((CORE_STEP_KINDS as readonly string[]).includes(kind) || this.layers.some((layer) => layer.stepKinds.includes(kind))) {
        throw new InvalidSpecError("stepKinds", kind, "is already a step kind of another layer");
      }
    }
    this.layers.push(extension);
    for (const table of extension.tables) this.writable.add(table);
    this.hookCache.clear();
  }

  list(): readonly StoreExtension[] {
    return this.layers;
  }

  /** Tables row operations may write: the layers' own, and cairn_payloads. */
  writableTables(): ReadonlySet<string> {
    return this.writable;
  }

  /** Every layer's statements for one hook, in this store's dialect (`$n` placeholders). */
  hook(name: HookName): readonly string[] {
    let statements = this.hookCache.get(name);
    if (statements === undefined) {
      statements = this.layers.flatMap((layer) => (layer.hooks[name] ?? []).map((sql) => this.sql(sql)));
      this.hookCache.set(name, statements);
    }
    return statements;
  }

  /** Every layer's delete hook, merged, in this store's dialect. */
  deletion(): { runTables: string[]; payloadColumns: { table: string; column: string }[]; payloadHashes: string[] } {
    const hooks = this.layers.map((layer) => layer.hooks.onDelete).filter((hook) => hook !== undefined);
    return {
      runTables: hooks.flatMap((hook) => hook.runTables),
      payloadColumns: hooks.flatMap((hook) => hook.payloadColumns),
      payloadHashes: hooks.flatMap((hook) => (hook.payloadHashes === undefined ? [] : [this.sql(hook.payloadHashes)])),
    };
  }

  sql(sql: DialectSql): string {
    return typeof sql === "string" ? sql : sql(this.dialect);
  }
}
