import { describe, expect, inject, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { runningServers } from '../../stack/stack';
import { useTestEnv } from '../support/env';
import { listeningPorts } from '../support/listening';

/**
 * The local stack's FerretDB spends on each document what a release build should
 * (stack/stack.ts, FERRETDB_PATCHES): it tracks the lifetime of no iterator, which FerretDB
 * 1.24 does in every build by adding each to a pprof profile, a stack captured each time.
 * Its debug server lists those profiles by name; reads and writes of documents leave none.
 */
const postgres = inject('postgres');
const env = useTestEnv();

/** The names of FerretDB's own profiles its debug server lists (`FerretDB/<type>`). */
async function trackingProfiles(): Promise<string[]> {
  const config = parseConfig(process.env);
  const { mongoPort } = config;
  const pid = runningServers(config).ferretdb;
  if (pid === undefined) throw new Error('the local stack runs no FerretDB');
  const [debugPort] = listeningPorts(pid).filter((port) => port !== mongoPort);
  if (debugPort === undefined) throw new Error(`FerretDB (pid ${pid}) listens on no debug port`);
  const index = await (await fetch(`http://127.0.0.1:${debugPort}/debug/pprof/`)).text();
  return [...index.matchAll(/FerretDB\/[\w.]+/g)].map((m) => m[0]);
}

describe.skipIf(!postgres)("the local stack's FerretDB (a release build)", () => {
  it('tracks no document or array iterator while it reads and writes documents', async () => {
    const probes = env.store.db.collection<{ _id: string; tags: string[] }>('tracking_probes');
    await probes.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `p${i}`, tags: ['a', `t${i}`] })));
    expect(await probes.find({ tags: 't3' }).toArray()).toEqual([{ _id: 'p3', tags: ['a', 't3'] }]);
    await probes.updateOne({ _id: 'p4' }, { $push: { tags: 'b' } });
    expect((await probes.findOne({ _id: 'p4' }))?.tags).toEqual(['a', 't4', 'b']);
    expect(await trackingProfiles()).toEqual([]);
  });
});
