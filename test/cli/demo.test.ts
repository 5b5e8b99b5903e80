import { rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cli, expectOk } from "./cli.js";

interface DemoSummary {
  ok: boolean;
  directory: string;
  status: string;
  kills: { during: string }[];
  executions: Record<string, number>;
  charges: number;
  duplicateCharges: number;
}

describe("cairn demo", () => {
  it("survives two SIGKILLs and reports 0 duplicate charges", async () => {
    const result = await cli(["demo"]);
    expectOk(result);
    expect(result.stdout).toContain("SIGKILL worker #1");
    expect(result.stdout).toContain("SIGKILL worker #2");
    expect(result.stdout).toMatch(/card charges\s+1×\s+0 duplicate charges/);
    expect(result.stdout).toMatch(/send-confirmation\s+step\s+succeeded/);
    rmSync(/ledgers in (\S+)/.exec(result.stdout)![1]!, { recursive: true, force: true });
  });

  it.each(BACKENDS)("reports its counts as JSON on $name", async (backend) => {
    const args = backend.name === "sqlite" ? ["demo", "--json"] : ["demo", "--json", "--database", await backend.freshDatabase()];
    const result = await cli(args);
    expectOk(result);
    const summary = JSON.parse(result.stdout) as DemoSummary;
    expect(summary).toMatchObject({ ok: true, status: "succeeded", charges: 1, duplicateCharges: 0 });
    expect(summary.kills.map((k) => k.during)).toEqual(["charge-card", "sleep"]);
    expect(summary.executions).toEqual({ "reserve-stock": 1, "charge-card": 2, "send-confirmation": 1 });
    rmSync(summary.directory, { recursive: true, force: true });
  });
});
