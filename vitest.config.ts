import { defineConfig } from 'vitest/config';

/**
 * Two projects, both run by `npm test`: `unit` needs no server (and no Go), so
 * `npm run test:unit` is the fast loop; `integration` runs against the real stack, which its
 * global setup obtains and starts.
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
