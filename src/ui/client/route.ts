/** The route, from the address's hash: `#/run/<id>?…` → path ["run", id], query. */
export interface Params {
  path: string[];
  query: URLSearchParams;
}
