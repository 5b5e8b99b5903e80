import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { cli, expectOk } from "../cli/cli.js";

describe.each(BACKENDS)("cairn schedules on $name", (backend) => {
  const env = cairnFactory(backend);

  it("lists the schedules with their last and next tick", async () => {
    const db = await env.database();
    const empty = env.cairn(db);
    await empty.launch();
    const none = await cli(["schedules", "--database", db]);
    expectOk(none);
    expect(none.stdout).toMatch(/no schedules/);
    await empty.shutdown();

    const cairn = env.cairn(db);
    const wf = cairn.workflow("report", async () => "ok");
    cairn.schedule("nightly", { cron: "0 3 * * *", timezone: "Europe/Paris", workflow: wf, catchUp: "latest" });
    await cairn.launch();
    await eventually(async () => (await cairn.query("SELECT name FROM cairn_schedules")).rows.length === 1);
    const listed = await cli(["schedules", "--database", db]);
    expectOk(listed);
    const lines = listed.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+CRON\s+TIMEZONE\s+WORKFLOW\s+CATCH-UP\s+LAST TICK\s+NEXT TICK$/);
    expect(lines[1]).toMatch(/^nightly\s+0 3 \* \* \*\s+Europe\/Paris\s+report\s+latest\s/);
    const json = await cli(["schedules", "--database", db, "--json"]);
    expectOk(json);
    const [row] = JSON.parse(json.stdout) as { name: string; nextTick: string }[];
    expect(row!.name).toBe("nightly");
    // 03:00 in Paris is 01:00 or 02:00 UTC, by season.
    expect(row!.nextTick).toMatch(/T0[12]:00:00\.000Z$/);
  });
});
