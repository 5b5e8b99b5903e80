import type { Store } from "../store/store.js";

/**
 * What the read model needs from the system database: reads only. The CLI hands it a store opened
 * read-only (`openStore(database, { readonly: true })`); the dashboard (issue 12) will do the same.
 * Nothing in src/observe/ writes.
 */
export type ReadStore = Pick<Store, "getRun" | "listRuns" | "select" | "query" | "operatorQuery">;
