import { relative } from "node:path";
import { displayName } from "../database.js";
import { loadRunView, renderRunView } from "../journal-view.js";
import { print, renderCell, table } from "../output.js";
import { bold, dim, green, red } from "../style.js";
import type { DemoRun } from "./run-demo.js";
import { STEPS } from "./order-workflow.js";

export interface DemoVerdict {
  ok: boolean;
  executions: Record<string, number>;
  charges: number;
  duplicateCharges: number;
  /** What went wrong, when not ok. */
  problems: string[];
}

/**
 * Counts from the ledgers, not from the journal: each step that completed ran exactly once, except
 * charge-card, which was killed after its side effect and before its checkpoint and so ran twice —
 * at-least-once, as steps are — while the provider, deduplicating by the step's idempotency key,
 * charged the card once.
 */
export function judge(demo: DemoRun): DemoVerdict {
  const counts = demo.ledger.executions();
  const executions = Object.fromEntries(STEPS.map((step) => [step, counts.get(step) ?? 0]));
  const charges = demo.ledger.charges().filter((c) => c.key.startsWith(`${demo.runId}:`)).length;
  const problems: string[] = [];
  for (const step of ["reserve-stock", "send-confirmation"]) {
    if (executions[step] !== 1) problems.push(`${step} ran ${executions[step]} times, not once`);
  }
  if ((executions["charge-card"] ?? 0) < 1 || (executions["charge-card"] ?? 0) > 2) {
    problems.push(`charge-card ran ${executions["charge-card"]} times (expected 2: killed once after charging)`);
  }
  if (charges !== 1) problems.push(`the card was charged ${charges} times`);
  if (demo.run.status !== "succeeded") problems.push(`the run is ${demo.run.status}`);
  return { ok: problems.length === 0, executions, charges, duplicateCharges: Math.max(0, charges - 1), problems };
}

export async function printReport(demo: DemoRun, verdict: DemoVerdict): Promise<void> {
  const key = demo.ledger.charges()[0]?.key ?? "?";
  const why: Record<string, string> = {
    "reserve-stock": "once",
    "charge-card":
      verdict.executions["charge-card"] === 2 ? "killed after charging, before its checkpoint: ran again (steps are at-least-once)" : "",
    "send-confirmation": "once",
  };
  print();
  print(bold(`Side effects, counted from the ledgers in ${demo.directory}`));
  print(
    indent(
      table(
        ["STEP", { header: "RAN", align: "right" }, ""],
        [
          ...STEPS.map((step) => [step, `${verdict.executions[step]}×`, dim(why[step] ?? "")]),
          [
            "card charges",
            `${verdict.charges}×`,
            verdict.duplicateCharges === 0
              ? green(`0 duplicate charges: both attempts used idempotency key ${key}`)
              : red(`${verdict.duplicateCharges} duplicate charges`),
          ],
        ],
      ),
    ),
  );
  print(
    verdict.ok
      ? green(`✔ ${demo.kills.length} SIGKILLs, and every completed step's side effect happened once`)
      : red(`✖ ${verdict.problems.join("; ")}`),
  );

  const cli = `node ${relative(process.cwd(), process.argv[1] ?? "dist/cli/main.js") || "dist/cli/main.js"}`;
  const db = `--database ${displayName(demo.database)}`;
  print();
  print(bold(`Timeline: ${cli} show ${demo.runId} ${db}`));
  print(indent(renderRunView(await loadRunView(demo.store, demo.runId))));

  const sql =
    "SELECT kind, count(*) AS entries, sum(duration_ms) AS total_ms FROM cairn_journal " +
    `WHERE run_id = '${demo.runId}' GROUP BY kind ORDER BY min(seq)`;
  const result = await demo.store.query(sql);
  print();
  print(bold(`The journal in SQL: ${cli} sql "${sql}" ${db}`));
  print(indent(table(result.columns, result.rows.map((row) => result.columns.map((c) => renderCell(row[c]))))));
  print();
  print(dim(`Explore: ${cli} runs ${db}`));
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n");
}
