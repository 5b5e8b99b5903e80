import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Crash tests spawn processes; two workers match this machine's two cores.
    maxWorkers: 2,
    globalSetup: ["test/global-setup.ts"],
    // The global teardown drops the run's PostgreSQL databases: on a busy server the checkpoint a
    // DROP DATABASE waits for can take a minute (the default allows 10 s).
    teardownTimeout: 180_000,
  },
});
