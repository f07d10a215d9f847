import { defineConfig } from 'vitest/config';

/**
 * Three projects, all run by `npm test`: `unit` needs no server (and no Go), so
 * `npm run test:unit` is the fast loop; `workflow` runs each workflow against stubbed
 * activities on a dev server of the cached Temporal CLI; `integration` runs against the real
 * stack, which its global setup obtains and starts.
 */
export default defineConfig({
  test: {
    // The machine-wide bound on test processes (Temporal's bridge wants processes, not threads).
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Property tests run hundreds of long random sessions; no server is waited on.
          testTimeout: 60_000,
        },
      },
      {
        test: {
          // Workflows alone: a dev server of the cached Temporal CLI per file, activities stubbed.
          name: 'workflow',
          include: ['test/workflow/**/*.test.ts'],
          globalSetup: ['test/support/workflowSetup.ts'],
          pool: 'forks',
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/globalSetup.ts'],
          pool: 'forks',
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
