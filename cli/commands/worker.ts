import { maskUri } from '../../core/config';
import type { Command } from 'commander';
import { stackDown, stackUp } from '../../stack/stack';
import { ensureNightlySchedule } from '../../client/schedule';
import { resolveEmbeddings } from '../../stack/connection';
import { MemgateClient } from '../../client/client';
import { handOverRunning } from '../../client/admin';
import { config, printJson, resolveEndpoints, withClient } from './context';
import { announce, startHttpServer } from './serve';

export function registerWorkerCommands(program: Command): void {
  program
    .command('start')
    .description(
      'run memgate: the local stack (unless TEMPORAL_ADDRESS and MONGODB_URI are set) and the worker',
    )
    .action(async () => {
      const c = config();
      let started: string[] = [];
      let ui = 'the Web UI of your Temporal server';
      let servers = { temporalAddress: c.temporalAddress ?? '', mongoUri: c.mongoUri ?? '' };
      if (!c.temporalAddress || !c.mongoUri) {
        const up = await stackUp(c);
        started = up.started;
        servers = {
          temporalAddress: c.temporalAddress ?? up.temporalAddress,
          mongoUri: c.mongoUri ?? up.mongoUri,
        };
        if (!c.temporalAddress) ui = up.uiUrl;
      }
      const embeddings = await resolveEmbeddings(c, c);
      const endpoints = { ...servers, embeddings };
      try {
        // The HTTP API's client first: the worker searches the client's vector indexes, so the
        // process holds one set (store/vectorIndexes.ts).
        const client = await MemgateClient.connect(c, endpoints);
        try {
          const { createMemgateWorker } = await import('../../worker/worker');
          const handle = await createMemgateWorker(c, endpoints, { vectorIndexes: client.vectorIndexes });
          const schedule = await ensureNightlySchedule(c, endpoints.temporalAddress);
          console.log(
            `schedule ${schedule.scheduleId} ${schedule.action}: nightly at ${c.nightlyAt} ${c.nightlyTimezone}`,
          );
          console.log(
            `memgate is running: Temporal ${endpoints.temporalAddress}, MongoDB ${maskUri(endpoints.mongoUri)}, ` +
              ('queryUrls' in embeddings
                ? `embeddings ${embeddings.queryUrls.map(maskUri).join(', ')} (hybrid recall)`
                : `no embeddings (${embeddings.unavailable}): recall is lexical only`),
          );
          // The HTTP API beside the worker; the worker's run ends on Ctrl-C, and the API with it.
          const server = await startHttpServer(client, c);
          console.log(announce(server));
          console.log(`Temporal UI: ${ui}   (Ctrl-C stops everything)`);
          try {
            await handle.run();
          } finally {
            await server.close();
          }
        } finally {
          await client.close();
        }
      } finally {
        if (started.length) {
          const stopped = await stackDown(c, started);
          console.log(`stopped: ${stopped.join(', ') || 'nothing'}`);
        }
      }
    });

  program
    .command('worker')
    .description('run only the worker, against the configured servers or a running local stack')
    .action(async () => {
      // Loaded here: the worker runtime is the heaviest module, and other commands skip it.
      const { createMemgateWorker } = await import('../../worker/worker');
      const handle = await createMemgateWorker(config(), await resolveEndpoints());
      console.log(`memgate worker polling task queue ${config().taskQueue}`);
      await handle.run();
    });

  program
    .command('hand-over')
    .description(
      "wake every running agent memory and context window, so that each moves to the Worker Deployment's current version (docs/versioning.md)",
    )
    .action(() =>
      withClient(async (c) => printJson({ woken: await handOverRunning(c.temporal, config().taskQueue) })),
    );
}
