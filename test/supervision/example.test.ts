import { execFile } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { scratchDir } from "../scratch.js";

/** examples/supervised-team runs (over the built package and its mock LLM) and shows its restarts. */
describe.each(BACKENDS)("examples/supervised-team on $name", (backend) => {
  const env = cairnFactory(backend);

  it("restarts each worker once after its flaky tool fails, and the team finishes its work", async () => {
    const database = backend.name === "sqlite" ? join(scratchDir("supervised-team-"), "team.db") : await env.database();
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ["examples/supervised-team/run.mjs"],
        { env: { ...process.env, DATABASE: database, NO_COLOR: "1" }, timeout: 60_000 },
        (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`))),
      ),
    );
    expect(out).toMatch(/team-1\/workers\/durable~1\s+worker\s+succeeded\s+durable\s+1/);
    const cairn = env.cairn(database);
    const restarts = await cairn.query(
      "SELECT child_id, child_run_id, previous_run_id FROM cairn_supervision WHERE run_id = 'team-1/workers' AND event = 'restart' ORDER BY child_id",
    );
    expect(restarts.rows).toEqual([
      { child_id: "durable", child_run_id: "team-1/workers/durable~1", previous_run_id: "team-1/workers/durable" },
      { child_id: "supervision", child_run_id: "team-1/workers/supervision~1", previous_run_id: "team-1/workers/supervision" },
    ]);
  }, 90_000);
});
