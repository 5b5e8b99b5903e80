import { describe, expect, it } from "vitest";
import { canonicalCallOptions, canonicalGenerateResult, canonicalStreamPart, sdkGenerateResult, sdkStreamPart, specOf } from "../../src/ai/sdk-version.js";

/**
 * The adapter boundary (src/ai/sdk-version.ts): what a v4 model (ai@7) gives is recorded in the v3
 * form a v3 model (ai@6, or ai@7 with a v3 model) gives, and handed back in the model's own form.
 * Pure functions, so this runs the same on every leg.
 */
describe("the AI SDK version adapter", () => {
  const bytes = new Uint8Array([1, 2, 3]);

  it("records a v4 prompt's file data and tool-result files in the v3 form, and leaves v3 prompts alone", () => {
    const v4 = {
      prompt: [
        { role: "system", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "see" },
            { type: "file", mediaType: "image/png", data: { type: "data", data: bytes } },
            { type: "file", mediaType: "image/png", data: { type: "url", url: new URL("https://x.test/a.png") } },
          ],
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "c",
              toolName: "t",
              output: {
                type: "content",
                value: [
                  { type: "text", text: "ok" },
                  { type: "file", mediaType: "text/plain", data: { type: "data", data: "aGk=" } },
                ],
              },
            },
          ],
        },
      ],
    };
    const canonical = canonicalCallOptions(v4, "v4");
    expect(canonical.prompt).toEqual([
      { role: "system", content: "Be brief." },
      {
        role: "user",
        content: [
          { type: "text", text: "see" },
          { type: "file", mediaType: "image/png", data: bytes },
          { type: "file", mediaType: "image/png", data: new URL("https://x.test/a.png") },
        ],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c",
            toolName: "t",
            output: {
              type: "content",
              value: [
                { type: "text", text: "ok" },
                { type: "file-data", data: "aGk=", mediaType: "text/plain" },
              ],
            },
          },
        ],
      },
    ]);
    expect(canonicalCallOptions(v4, "v3")).toBe(v4);
  });

  it("records v4 file content as v3 has it and returns it tagged again; text and tool calls are the same in both", () => {
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 1, text: 1, reasoning: undefined },
    };
    const v4 = {
      content: [
        { type: "text", text: "hi" },
        { type: "tool-call", toolCallId: "c", toolName: "t", input: "{}" },
        { type: "file", mediaType: "image/png", data: { type: "data", data: "AQID" } },
      ],
      finishReason: { unified: "stop", raw: "stop" },
      usage,
      warnings: [],
    };
    const recorded = canonicalGenerateResult(v4, "v4");
    expect(recorded.content).toEqual([v4.content[0], v4.content[1], { type: "file", mediaType: "image/png", data: "AQID" }]);
    expect(sdkGenerateResult(recorded, "v4")).toEqual(v4);
    expect(sdkGenerateResult(recorded, "v3")).toBe(recorded);
  });

  it("drops v4 keep-alive pings from streams and converts file parts both ways", () => {
    expect(canonicalStreamPart({ type: "ping" }, "v4")).toBeNull();
    const file = canonicalStreamPart({ type: "file", mediaType: "image/png", data: { type: "data", data: bytes } }, "v4");
    expect(file).toEqual({ type: "file", mediaType: "image/png", data: bytes });
    expect(sdkStreamPart(file!, "v4")).toEqual({ type: "file", mediaType: "image/png", data: { type: "data", data: bytes } });
    const delta = { type: "text-delta", id: "1", delta: "a" } as const;
    expect(canonicalStreamPart(delta, "v4")).toEqual(delta);
    expect(sdkStreamPart(delta, "v3")).toBe(delta);
  });

  it("takes a model's specification from the model", () => {
    expect(specOf({ specificationVersion: "v4" })).toBe("v4");
    expect(specOf({ specificationVersion: "v3" })).toBe("v3");
  });
});
