import { FencedError } from "../../errors.js";
import type { SqlClient, StepRecord } from "../../store/store.js";
import { isTransientStoreError } from "../../store/transient.js";
import { storableThrown, toStored } from "../../store/value/index.js";
import { operationScopes, type OperationScope } from "../replay-journal.js";
import { never, type Began, type JournalCore } from "./journal-core.js";
import { perform, type DurableOperation } from "./operation.js";

/**
 * Transactions: `ctx.transaction` runs the user's SQL in a transaction on Cairn's own database that
 * also commits the step's record, so the record is not one commit of its own (no `record` hook: the
 * live part is all here).
 */

type TransactionFunction = (sql: SqlClient) => Promise<unknown>;

const transactionOperation: DurableOperation<TransactionFunction, unknown, unknown> = { act: transact };

export function transaction<T>(run: JournalCore, name: string, fn: (sql: SqlClient) => Promise<T>): Promise<T> {
  return perform(run, transactionOperation, fn, "transaction", name) as Promise<T>;
}

async function transact(run: JournalCore, began: Began, fn: TransactionFunction): Promise<unknown> {
  const { seq, name } = began;
  run.active++;
  const startedAt = run.clock.now();
  // Its SQL commits with this step's checkpoint: an operation journaled inside would commit apart.
  const scope: OperationScope = { owner: run, identity: began.identity, key: began.key, calls: new Map(), refuse: "ctx.transaction" };
  let reserved: number | null = null;
  let record = undefined as StepRecord | undefined;
  try {
    let value: unknown;
    try {
      // Records riding with the run's next commit go first: this transaction cannot carry them.
      if (!(await run.landRiders())) return never();
      await run.store.transaction(run.fence, async (sql) => {
        value = await operationScopes.run(scope, () => fn(sql));
        const output = toStored(value, run.where(seq, name));
        reserved = run.order.reserve();
        return (record = run.record(began, startedAt, { output }, 1, reserved));
      });
      if (record !== undefined) run.watch.step(record);
      if (run.stopped || !(await run.delivered(reserved))) return never();
      return value;
    } catch (error) {
      if (reserved !== null) run.order.release(reserved);
      if (error instanceof FencedError) return run.lostNever();
      if (run.stopped) return never();
      // The database failed (not the user's code or SQL): reload and try again, record nothing.
      if (isTransientStoreError(error)) return run.storeFailed(error);
      // The user's writes were rolled back; the failure itself is recorded so replay rethrows it.
      const thrown = storableThrown(error, run.where(seq, name));
      const step = run.record(began, startedAt, { error: thrown }, 1);
      if (!(await run.writeAndDeliver(step))) return never();
      throw thrown;
    }
  } finally {
    run.settleActive();
  }
}
