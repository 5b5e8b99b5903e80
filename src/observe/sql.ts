import type { OperatorQueryOptions, QueryResult } from "../store/store.js";
import type { ReadStore } from "./read-store.js";

export { DEFAULT_OPERATOR_QUERY_TIMEOUT_MS } from "../store/operator-query.js";

/**
 * An operator's SQL (`cairn sql`, the dashboard's query box): one statement, which the database
 * itself refuses unless it only reads Cairn's tables, stopped after `timeoutMs` (see
 * Store.operatorQuery for which mechanism refuses what on each backend).
 */
export function operatorQuery(store: ReadStore, sql: string, options: OperatorQueryOptions = {}): Promise<QueryResult> {
  return store.operatorQuery(sql, options);
}
