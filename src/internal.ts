import type { Store } from "./store/store.js";
import type { CairnRuntime } from "./scheduler/runtime.js";

/**
 * The non-public route to a `Cairn`'s layers, for the CLI, the tools and the tests: the public
 * class exposes only what the README documents, and keeps its runtime here, keyed by the instance.
 * Not exported from `src/index.ts`, and not in package.json's `exports`, so an application that
 * depends on Cairn cannot import it; inside this repository it is `src/internal.ts` (or
 * `dist/internal.js` for the test fixtures that run compiled code).
 */
const runtimes = new WeakMap<object, CairnRuntime>();

/** Called once by the `Cairn` constructor. */
export function attachRuntime(cairn: object, runtime: CairnRuntime): void {
  runtimes.set(cairn, runtime);
}

/** The runtime behind a `Cairn`: registry, executor, store; `startRun`, `waitForRun`, `poke` ... */
export function runtimeOf(cairn: object): CairnRuntime {
  const runtime = runtimes.get(cairn);
  if (runtime === undefined) throw new TypeError("not a Cairn instance");
  return runtime;
}

/** The system database behind a `Cairn`, with every method (writes included): not migrated until `launch` or first use. */
export function storeOf(cairn: object): Store {
  return runtimeOf(cairn).store();
}
