import { NotACairnDatabaseError } from "../errors.js";
import type { LayerRegistry, StoreExtension } from "./extension.js";
import { act, all, run, type Script } from "./script.js";
import { CORE_MIGRATIONS, LAYERED_SCHEMA_VERSION, LEDGER_TABLE, LEGACY_MIGRATIONS_TABLE } from "./migrations.js";

/**
 * The one migration runner, for both backends and every layer, written as a script the store runs
 * in one transaction that holds off concurrent migrators (SQLite: BEGIN IMMEDIATE; PostgreSQL: an
 * advisory lock, the `lockMigrations` act), so many processes may start at once.
 *
 * Each layer's migrations are recorded in `cairn_layer_migrations` under its name. A database
 * from before layers records versions 1-5 of one list in `cairn_migrations`; a layer with nothing
 * recorded yet first takes over the migrations that list already applied (`legacyVersion`), so an
 * old database keeps every row and no statement runs twice.
 */
/** Reads for checking the schema without a transaction (`$n` placeholders on both backends). */
export interface MigrationSql {
  all<Row = Record<string, unknown>>(text: string, params?: unknown[]): Promise<Row[]>;
}

const CORE: StoreExtension = { name: "core", migrations: CORE_MIGRATIONS, tables: [], stepKinds: [], hooks: {} };

/** The core layer first, then the registered layers in the order they were registered. */
function layersOf(registry: LayerRegistry): readonly StoreExtension[] {
  return [CORE, ...registry.list()];
}

/** Applies every pending migration; a script (`script.ts`), run in the caller's one transaction. */
export function* migrationScript(registry: LayerRegistry, now: () => number): Script<void> {
  yield* act({ type: "lockMigrations" });
  yield* exec(LEGACY_MIGRATIONS_TABLE);
  yield* exec(LEDGER_TABLE);
  const legacy = numbers(yield* all<{ version: unknown }>({ text: "SELECT version FROM cairn_migrations" }, []));
  if (Math.max(0, ...legacy) > LAYERED_SCHEMA_VERSION) throw newerSchema(`schema version ${Math.max(...legacy)}`, `${LAYERED_SCHEMA_VERSION}`);
  for (const layer of layersOf(registry)) {
    const applied = numbers(yield* all<{ version: unknown }>(APPLIED, [layer.name]));
    if (applied.size === 0) {
      for (const migration of layer.migrations) {
        if (migration.legacyVersion !== undefined && legacy.has(migration.legacyVersion)) {
          yield* run(RECORD, [layer.name, migration.version, migration.name, now()]);
          applied.add(migration.version);
        }
      }
    }
    checkNotNewer(layer, applied);
    for (const migration of layer.migrations) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements) yield* exec(registry.sql(statement));
      yield* run(RECORD, [layer.name, migration.version, migration.name, now()]);
    }
  }
  if (!legacy.has(LAYERED_SCHEMA_VERSION)) {
    yield* run({ text: "INSERT INTO cairn_migrations (version, name, applied_at) VALUES ($1, $2, $3)" }, [
      LAYERED_SCHEMA_VERSION,
      "layers (see cairn_layer_migrations)",
      now(),
    ]);
  }
}

/** DDL: one statement, run once (not kept prepared). */
function exec(text: string): Script<number> {
  return run({ text }, []);
}

const APPLIED = { name: "cairn_layer_versions", text: "SELECT version FROM cairn_layer_migrations WHERE layer = $1" };
const RECORD = {
  name: "cairn_record_migration",
  text: "INSERT INTO cairn_layer_migrations (layer, version, name, applied_at) VALUES ($1, $2, $3, $4)",
};

function numbers(rows: { version: unknown }[]): Set<number> {
  return new Set(rows.map((r) => Number(r.version)));
}

/**
 * Throws NotACairnDatabaseError unless the database holds Cairn's schema at versions this Cairn
 * knows, for the core and every registered layer. `hasTable` tells whether a table exists.
 */
export async function checkSchema(
  sql: MigrationSql,
  registry: LayerRegistry,
  hasTable: (name: string) => Promise<boolean>,
  notCairn: () => NotACairnDatabaseError,
): Promise<void> {
  if (!(await hasTable("cairn_migrations"))) throw notCairn();
  const legacy = await legacyVersions(sql);
  if (Math.max(0, ...legacy) > LAYERED_SCHEMA_VERSION) throw newerSchema(`schema version ${Math.max(...legacy)}`, `${LAYERED_SCHEMA_VERSION}`);
  // A database no layered Cairn has opened yet has only the old list, which this Cairn reads.
  if (!(await hasTable("cairn_layer_migrations"))) return;
  for (const layer of layersOf(registry)) checkNotNewer(layer, await appliedVersions(sql, layer.name));
}

async function legacyVersions(sql: MigrationSql): Promise<Set<number>> {
  const rows = await sql.all<{ version: unknown }>("SELECT version FROM cairn_migrations");
  return new Set(rows.map((r) => Number(r.version)));
}

async function appliedVersions(sql: MigrationSql, layer: string): Promise<Set<number>> {
  const rows = await sql.all<{ version: unknown }>("SELECT version FROM cairn_layer_migrations WHERE layer = $1", [layer]);
  return new Set(rows.map((r) => Number(r.version)));
}

function checkNotNewer(layer: StoreExtension, applied: ReadonlySet<number>): void {
  const latest = Math.max(0, ...layer.migrations.map((m) => m.version));
  const current = Math.max(0, ...applied);
  if (current > latest) throw newerSchema(`${layer.name} schema version ${current}`, `${latest}`);
}

function newerSchema(what: string, known: string): NotACairnDatabaseError {
  return new NotACairnDatabaseError(`the database has Cairn ${what}, newer than this Cairn knows (${known}) — upgrade Cairn`);
}
