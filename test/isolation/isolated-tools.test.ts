import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { describe, expect, it } from "vitest";
import { isolated } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import { toolThenAnswer } from "../ai/scripted-model.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/** The AI SDK tool wrapper takes the same isolation options for a tool's execute as ctx.step does. */

const TASKS = new URL("./fixtures/tasks.mjs", import.meta.url);

describe.each(BACKENDS)("isolated tools on $name", (backend) => {
  const env = cairnFactory(backend);

  it("runs an isolated tool's export in a pool process; a crash there fails the tool call alone", async () => {
    const cairn = env.cairn(await env.database());
    const inputSchema = jsonSchema<{ n: number }>({ type: "object", properties: { n: { type: "number" } } });
    const tools = {
      double: tool({
        inputSchema,
        execute: isolated<(input: { n: number }) => { doubled: number; pid: number }>(TASKS, "double").tool({ isolation: "process", timeoutMs: 5_000 }),
      }),
      exitThree: tool({ inputSchema, execute: isolated(TASKS, "exitThree").tool({ isolation: "process" }) }),
    };
    const wf = cairn.workflow("tools", async (ctx, input: { tool: "double" | "exitThree" }) => {
      const result = await generateText({
        model: ctx.model(toolThenAnswer(input.tool, { n: 21 })),
        prompt: "go",
        tools: ctx.tools(tools),
        stopWhen: stepCountIs(2),
      });
      return result.text;
    });
    await cairn.launch();
    const good = (await (await wf.start({ tool: "double" }, { id: "tool-double" })).result()) as string;
    expect(good).toMatch(/^tool said \{"type":"json","value":\{"doubled":42,"pid":(\d+)\}\}$/);
    expect(Number(/"pid":(\d+)/.exec(good)![1])).not.toBe(process.pid);

    const bad = (await (await wf.start({ tool: "exitThree" }, { id: "tool-exit" })).result()) as string;
    // The model is told what happened, as for any tool error; the run itself goes on and ends.
    expect(bad).toContain('isolated step \\"exitThree\\" (run tool-exit, seq 1) crashed: its process');
    expect(bad).toContain("exited with code 3");
    const rows = await storeOf(cairn).query("SELECT run_id, tool_name, status, output_excerpt FROM cairn_tool_calls ORDER BY run_id", []);
    expect(rows.rows).toMatchObject([
      { run_id: "tool-double", tool_name: "double", status: "succeeded" },
      { run_id: "tool-exit", tool_name: "exitThree", status: "failed" },
    ]);
    expect(rows.rows[1]!.output_excerpt).toMatch(/^error: isolated step "exitThree" .* exited with code 3/);
  });
});
