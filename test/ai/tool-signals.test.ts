import { generateText, jsonSchema, tool } from "ai";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { toolThenAnswer } from "./scripted-model.js";

/** Issue 7, point 7: the caller's abortSignal is combined with the step's, not replaced by it. */
describe.each(BACKENDS)("tool signals on $name", (backend) => {
  const env = cairnFactory(backend);

  it("aborts a running tool when the caller's abortSignal aborts", async () => {
    const cairn = env.cairn(await env.database());
    const seen: string[] = [];
    const wf = cairn.workflow("aborting", async (ctx) => {
      const caller = new AbortController();
      const slow = tool({
        inputSchema: jsonSchema<Record<string, never>>({ type: "object" }),
        execute: (_input, { abortSignal }) =>
          new Promise((resolve, reject) => {
            const timer = setTimeout(() => resolve("finished"), 5_000);
            abortSignal?.addEventListener("abort", () => {
              clearTimeout(timer);
              seen.push("aborted");
              reject(new Error("tool aborted"));
            });
            setTimeout(() => caller.abort(new Error("caller gave up")), 50);
          }),
      });
      try {
        await generateText({ model: ctx.model(toolThenAnswer("slow", {})), prompt: "go", tools: ctx.tools({ slow }), abortSignal: caller.signal });
        return "no abort";
      } catch (error) {
        return `stopped: ${(error as Error).message}`;
      }
    });
    await cairn.launch();
    await (await wf.start(undefined, { id: "aborting-1" })).result();
    // The tool heard the caller's abort (before, it got only the step's signal and ran its 5 s).
    expect(seen).toEqual(["aborted"]);
  });
});
