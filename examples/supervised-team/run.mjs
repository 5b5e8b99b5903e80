// Runs the supervised team once, against `cairn mock-llm` (LLM_URL, or one started here with
// script.json), on DATABASE (default: a fresh file in a temp dir), waits until every child has
// finished, and prints the tree and the supervisor's decisions.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startMockLlm } from "cairn/testing";
import { Cairn, defineTeam } from "./team.mjs";

const here = new URL(".", import.meta.url);
const llm = process.env.LLM_URL === undefined ? await startMockLlm({ script: JSON.parse(readFileSync(new URL("script.json", here), "utf8")) }) : null;
const database = process.env.DATABASE ?? join(mkdtempSync(join(tmpdir(), "supervised-team-")), "team.db");
const cairn = new Cairn({ database });
const team = defineTeam(cairn, process.env.LLM_URL ?? llm.url);
await cairn.launch();
await team.start(undefined, { id: "team-1" });

// The supervisors keep running (they wait for their children's next exit); the team's work is
// done when the latest run of each worker and the verifier have succeeded.
const deadline = Date.now() + 30_000;
for (;;) {
  const { rows } = await cairn.query(
    "SELECT count(*) AS n FROM cairn_tree WHERE root_id = 'team-1' AND child_id IN ('durable', 'supervision', 'verifier') AND replaced_by IS NULL AND state = 'succeeded'",
  );
  if (Number(rows[0].n) === 3) break;
  if (Date.now() > deadline) throw new Error("the team did not finish in 30 s");
  await new Promise((resolve) => setTimeout(resolve, 50));
}
const decisions = await cairn.query(
  "SELECT seq, event, child_id, child_run_id, previous_run_id, reason FROM cairn_supervision WHERE run_id = 'team-1/workers' ORDER BY seq",
);
console.log(`$ cairn tree team-1 --database ${database}`);
console.log(
  execFileSync(process.execPath, [fileURLToPath(new URL("../../dist/cli/main.js", here)), "tree", "team-1", "--database", database], { encoding: "utf8" }),
);
console.log("the workers supervisor's decisions (cairn_supervision):");
console.table(decisions.rows);
await cairn.cancel("team-1"); // stop the tree: supervisors run until stopped
await cairn.shutdown();
await llm?.close();
