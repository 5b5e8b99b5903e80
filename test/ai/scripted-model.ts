import type { LanguageModelV3CallOptions, LanguageModelV3Content, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { MockLanguageModel } from "./sdk-matrix.js";

/** The usage every scripted answer reports: 10 tokens (6 in, 4 out). */
export function usage(input = 6, output = 4): LanguageModelV3GenerateResult["usage"] {
  return {
    inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: output, reasoning: undefined },
  };
}

export function answer(content: LanguageModelV3Content[], finish: "stop" | "tool-calls" = "stop"): LanguageModelV3GenerateResult {
  return { content, finishReason: { unified: finish, raw: finish }, usage: usage(), warnings: [] };
}

export function toolCall(toolName: string, input: unknown, toolCallId = `call-${toolName}`): LanguageModelV3Content {
  return { type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) };
}

/** The tool results (role "tool" parts) the model was shown in a call's prompt. */
export function toolOutputs(call: LanguageModelV3CallOptions): unknown[] {
  return call.prompt.flatMap((message) =>
    message.role === "tool" ? message.content.flatMap((part) => (part.type === "tool-result" ? [part.output] : [])) : [],
  );
}

/**
 * The AI SDK's own test double, scripted by the prompt (so a replay or a repeated call gets the same
 * answer): no tool result yet → call `toolName` with `input`; else → say what the tool returned.
 */
export function toolThenAnswer(toolName: string, input: unknown, options: { modelId?: string } = {}): MockLanguageModel {
  return new MockLanguageModel({
    modelId: options.modelId ?? "mock-model-id",
    doGenerate: async (call) => {
      const outputs = toolOutputs(call);
      if (outputs.length === 0) return answer([toolCall(toolName, input)], "tool-calls");
      return answer([{ type: "text", text: `tool said ${JSON.stringify(outputs.at(-1))}` }]);
    },
  });
}

/** A model that always answers `text` (10 tokens a call). */
export function plainText(text: string, modelId = "mock-model-id"): MockLanguageModel {
  return new MockLanguageModel({ modelId, doGenerate: async () => answer([{ type: "text", text }]) });
}
