import { table } from "../../internal.js";
import type { ExperimentResults } from "../results.js";
import { RESULT_COLUMNS } from "./columns.js";

/** The results as an aligned table for the terminal. */
export function renderTable(results: ExperimentResults): string {
  return table(
    RESULT_COLUMNS.map((c) => ({ header: c.header, align: c.align })),
    results.arms.map((r) => RESULT_COLUMNS.map((c) => c.cell(r))),
  );
}
