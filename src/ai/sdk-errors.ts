import { registerErrorClass, type ErrorClass } from "../error-registry.js";

/**
 * The AI SDK's error classes, registered with the journal's error registry so that a recorded
 * `APICallError` (or `RetryError`, `NoSuchToolError`, ...) comes back as one: `instanceof` and the
 * SDK's own `isInstance` hold, with `statusCode`, `isRetryable`, `responseBody` and the rest.
 *
 * Each is recorded under its error `name` ("AI_APICallError"), which is also what Cairn 0.1 wrote
 * as the name of a recorded provider error, so those older records rebuild with the class too. The
 * SDK's `isInstance` (a global-symbol marker) recognises instances from another copy of the SDK.
 */

type SdkErrorClass = ErrorClass & { isInstance?: (error: unknown) => boolean };

/** `prefix` tells apart the few classes both packages define under one name (InvalidArgumentError). */
function registerClasses(exports: Record<string, unknown>, prefix: string, taken: Set<unknown>): void {
  for (const [exportName, value] of Object.entries(exports)) {
    if (!exportName.endsWith("Error") || typeof value !== "function" || taken.has(value)) continue;
    const errorClass = value as SdkErrorClass;
    if (!(errorClass.prototype instanceof Error) || typeof errorClass.isInstance !== "function") continue;
    const name = `${prefix}AI_${exportName === "AISDKError" ? "SDKError" : exportName.replace(/^AI_/, "")}`;
    registerErrorClass(errorClass, { name, isInstance: (error) => errorClass.isInstance!(error) });
    taken.add(value);
  }
}

/** Registers the error classes of the installed `ai` and `@ai-sdk/provider` (sdk.ts calls it once). */
export function registerSdkErrors(ai: Record<string, unknown>, provider: Record<string, unknown>): void {
  const registered = new Set<unknown>();
  registerClasses(provider, "", registered);
  // "ai" re-exports most of the provider's classes (skipped: already registered) and adds its own.
  const providerNames = new Set(Object.keys(provider));
  registerClasses(Object.fromEntries(Object.entries(ai).filter(([name]) => !providerNames.has(name))), "", registered);
  registerClasses(Object.fromEntries(Object.entries(ai).filter(([name]) => providerNames.has(name))), "ai:", registered);
}
