import { get, post } from "./api.js";
import { add, h } from "./dom.js";
import type { Params } from "./route.js";

/** The read-only SQL console (the operator query path of `cairn sql`), with the shipped views as examples. */
export async function sqlPage(root: HTMLElement, params: Params): Promise<void> {
  const { examples } = await get<{ examples: { title: string; sql: string }[] }>("/sql/examples");
  const text = h("textarea", { class: "sql mono", name: "sql", spellcheck: "false" }) as HTMLTextAreaElement;
  text.value = params.query.get("q") ?? examples[0]?.sql ?? "SELECT count(*) FROM cairn_runs";
  const out = h("div", { "data-testid": "sql-result" });
  async function run(): Promise<void> {
    out.replaceChildren(h("p", { class: "muted" }, "Running…"));
    try {
      const result = await post<{ columns: string[]; rows: Record<string, unknown>[]; ms: number }>("/sql", { sql: text.value });
      out.replaceChildren(
        h("p", { class: "muted" }, `${result.rows.length} rows · ${result.ms} ms`),
        h(
          "table",
          {},
          h("thead", {}, h("tr", {}, ...result.columns.map((c) => h("th", {}, c)))),
          h("tbody", {}, ...result.rows.map((r) => h("tr", {}, ...result.columns.map((c) => h("td", { class: "mono" }, cell(r[c])))))),
        ),
      );
    } catch (error) {
      out.replaceChildren(h("p", { class: "error" }, (error as Error).message));
    }
  }
  add(
    root,
    h("h1", {}, "SQL (read-only)"),
    h("p", { class: "muted" }, "One statement; the database itself refuses anything that writes. Examples from the views Cairn ships:"),
    h("div", { class: "filters" }, ...examples.map((e) => h("button", { onclick: () => ((text.value = e.sql), void run()) }, e.title))),
    text,
    h("div", { class: "actions" }, h("button", { class: "primary", onclick: () => void run() }, "Run")),
    out,
  );
  await run();
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}
