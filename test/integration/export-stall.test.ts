import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { serverDeps, startHttpServer } from '../../cli/commands/serve';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { registerAgent } from '../../store/agents';
import { insertNewEntries } from '../../store/entries';
import { createKey } from '../../store/keys';
import { requireKey } from '../../server/auth';
import { buildHttpServer } from '../../server/http';
import { useTestEnv } from '../support/env';
import { episode } from '../support/memories';

/**
 * An export holds a store cursor while the connection takes its lines (docs/export.md). A
 * connection that stops taking them must not hold it past the store's timeout: the process
 * has few cursors (a fifth of its connections), and every tenant's exports, index loads and
 * night pages share them (docs/invariants.md, No store wedge).
 */

// One cursor for the process's store, and a short timeout, so one stalled export would show.
const env = useTestEnv({ MEMGATE_STORE_CONNECTIONS: '24', MEMGATE_STORE_TIMEOUT_MS: '3000' });

describe('an export whose connection stops reading', () => {
  it("does not hold the store's cursor from another tenant's export", async () => {
    const stalled = env.agent('export-stalled');
    const other = env.agent('export-other');
    const policy = memoryPolicy(env.config);
    const now = Date.now();
    // About 8 MB of lines, more than the sockets' buffers between the two ends hold.
    const text = (i: number) => `Entry ${i}: ${'a long note about the harbour ledger '.repeat(100)}`;
    for (let page = 0; page < 20; page++) {
      await insertNewEntries(
        env.store,
        Array.from({ length: 100 }, (_, j) => {
          const i = page * 100 + j;
          return buildEntry(`${stalled}/e${i}`, stalled, episode(text(i), now - i), policy);
        }),
      );
    }
    await insertNewEntries(env.store, [
      buildEntry(`${other}/e0`, other, episode('The other agent has one note.', now), policy),
    ]);
    await registerAgent(env.store, stalled, now);
    await registerAgent(env.store, other, now);

    const server = await startHttpServer(env.client, env.config, { port: 0 });
    const { key } = await createKey(env.store, '*', now);
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    try {
      // Asks for the large export, and never reads a byte of it.
      socket.pause();
      socket.write(
        `GET /v1/agents/${stalled}/export HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
      );
      // Until the server has filled the connection and its cursor waits on it.
      await new Promise((r) => setTimeout(r, 1_000));
      const res = await fetch(`${server.url}/v1/agents/${other}/export`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(res.status).toBe(200);
      const lines = (await res.text()).trimEnd().split('\n');
      expect(lines.map((l) => (JSON.parse(l) as { type?: string }).type)).toContain('entry');
    } finally {
      socket.destroy();
      await server.close();
    }
  }, 300_000);

  it('breaks the stalled connection off once it has ended the answer', async () => {
    const stalled = env.agent('export-broken-off');
    const now = Date.now();
    const text = (i: number) => `Entry ${i}: ${'a long note about the harbour ledger '.repeat(100)}`;
    await insertNewEntries(
      env.store,
      Array.from({ length: 2_000 }, (_, i) =>
        buildEntry(`${stalled}/e${i}`, stalled, episode(text(i), now - i), memoryPolicy(env.config)),
      ),
    );
    await registerAgent(env.store, stalled, now);
    const app = buildHttpServer(serverDeps(env.client, env.config), {
      authenticate: requireKey((key) => env.client.authenticate(key)),
    });
    const { key } = await createKey(env.store, '*', now);
    const closed = new Promise<void>((resolve) =>
      app.server.once('connection', (conn: Socket) => conn.once('close', () => resolve())),
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    try {
      socket.pause();
      socket.write(
        `GET /v1/agents/${stalled}/export HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`,
      );
      // The server's end of the connection closes, with the client still there and not reading.
      let deadline: NodeJS.Timeout | undefined;
      await Promise.race([
        closed,
        new Promise((_, reject) => {
          deadline = setTimeout(() => reject(new Error('the stalled connection is still open')), 60_000);
        }),
      ]).finally(() => clearTimeout(deadline));
      expect(socket.destroyed).toBe(false);
    } finally {
      socket.destroy();
      await app.close();
    }
  }, 300_000);
});
