import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import type { ScratchDatabase } from "../scratch-databases.js";
import { driveRuns, expectCount, expectLastStep, stepValue, STEPS_PER_RUN, type Arm, type StepValue } from "./workload.js";

/**
 * LangGraph.js with its SQLite checkpointer: a StateGraph of 10 nodes in a chain, node `i`
 * returning step `i`'s value into the state, compiled with `SqliteSaver.fromConnString(file)`, so
 * a checkpoint is written after every node (LangGraph's durable unit). A run is one `invoke` on a
 * fresh `thread_id`; all runs share the compiled graph and the saver's one connection, as a
 * process serving many threads would.
 *
 * The state is one last-value channel, the smallest checkpoint the workflow allows.
 *
 * Two configurations:
 * - `sameDurability: true` (the one the goal is measured against): `durability: "sync"`, so each
 *   node's checkpoint is committed before the next node starts, as a Cairn or DBOS step is; and
 *   `synchronous=FULL`, an fsync per commit, as Cairn's SQLite default.
 * - `false`: LangGraph's defaults, `durability: "async"` (the checkpoint is written while the next
 *   node runs) on better-sqlite3's WAL default of synchronous=NORMAL (commits reach the WAL without
 *   an fsync; a power loss can take the last ones). Shown for reference.
 */
export function langGraphArm(sameDurability: boolean, fresh: () => Promise<ScratchDatabase>): Arm {
  return {
    name: sameDurability ? "langgraph-sqlite" : "langgraph-sqlite-defaults",
    backend: "sqlite",
    durability: sameDurability ? 'WAL, synchronous=FULL, durability "sync"' : 'WAL, synchronous=NORMAL, durability "async" (defaults)',
    modes: ["sequential", "concurrent"],
    async measure(runs, inFlight) {
      const scratch = await fresh();
      const saver = SqliteSaver.fromConnString(scratch.database);
      try {
        const graph = chainOfSteps(STEPS_PER_RUN).compile({ checkpointer: saver });
        // The saver creates its tables on first use; do that before the clock starts, as Cairn's and
        // DBOS's migrations run in their (untimed) launch.
        await saver.getTuple({ configurable: { thread_id: "setup" } });
        if (sameDurability) saver.db.pragma("synchronous = FULL");
        const durability = sameDurability ? "sync" : "async";
        const timing = await driveRuns(runs, inFlight, async (index) => {
          const id = `run-${index}`;
          const state = await graph.invoke({ value: null }, { configurable: { thread_id: id }, durability });
          expectLastStep(state.value, id);
        });
        const threads = saver.db.prepare("SELECT count(DISTINCT thread_id) AS n FROM checkpoints").get() as { n: number };
        expectCount("checkpointed threads", threads.n, runs);
        return timing;
      } finally {
        saver.db.close();
        await scratch.dispose();
      }
    },
  };
}

const State = Annotation.Root({ value: Annotation<StepValue | null> });

/** START → step0 → step1 → … → step(n-1) → END. */
function chainOfSteps(steps: number) {
  // Node names are computed, so the builder is typed with `string` names rather than literals.
  const builder = new StateGraph(State) as unknown as StateGraph<typeof State.spec, typeof State.State, typeof State.Update, string>;
  for (let i = 0; i < steps; i++) builder.addNode(`step${i}`, () => ({ value: stepValue(i) }));
  builder.addEdge(START, "step0");
  for (let i = 1; i < steps; i++) builder.addEdge(`step${i - 1}`, `step${i}`);
  builder.addEdge(`step${steps - 1}`, END);
  return builder;
}
