import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { selectWorkers } from "./crash-harness.js";

/**
 * A supervisor's process SIGKILLed between a child's crash and its restart (the built package,
 * test/supervision/fixtures/select-worker.mjs): killed once the crash is seen but before it is
 * recorded, and once it is recorded but before the restart. Either way exactly one restart follows.
 */
describe.each(BACKENDS)("a supervisor through a SIGKILL on $name", (backend) => {
  const env = cairnFactory(backend);
  const spawnWorker = selectWorkers();

  for (const hang of ["ready@watch", "recorded@watch"]) {
    it(`killed at ${hang.split("@")[0]} (the child's exit ${hang.startsWith("ready") ? "seen, not yet recorded" : "recorded, restart not made"}): exactly one restart`, async () => {
      const database = await env.database();
      const first = spawnWorker({ database, start: [{ workflow: "sup", id: "s" }], hang, stay: true });
      await first.line(/^hang \w+ s \d+$/, 20_000);
      await first.kill();
      spawnWorker({ database, stay: true });
      const cairn = env.cairn(database);
      const restarts = async () =>
        (await cairn.query("SELECT child_run_id, previous_run_id FROM cairn_supervision WHERE run_id = 's' AND event = 'restart'")).rows;
      await eventually(async () => (await restarts()).length >= 1, 20_000);
      await eventually(async () => (await cairn.run("s/w~1").status()).status === "waiting", 20_000);
      // Give a double restart every chance to show, then count.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await restarts()).toEqual([{ child_run_id: "s/w~1", previous_run_id: "s/w" }]);
      const runs = await cairn.query("SELECT id FROM cairn_runs WHERE parent_id = 's' ORDER BY id");
      expect(runs.rows.map((r) => r.id)).toEqual(["s/w", "s/w~1"]);
      const exits = await cairn.query("SELECT child_id, reason FROM cairn_supervision WHERE run_id = 's' AND event = 'exit' ORDER BY seq");
      expect(exits.rows).toEqual([{ child_id: "w", reason: "TypeError: first run crashes" }]);
    }, 60_000);
  }
});
