import { describe, expect, inject, it } from 'vitest';
import { adminClient, ginTwinsOf, provisionPostgres } from '../../stack/postgres';
import { useTestEnv } from '../support/env';

/**
 * The local stack's GIN twins (stack/postgres.ts) keep no pending list: every lookup by an
 * indexed field (an entry by id, a term's postings) would otherwise scan the index's whole
 * list of unmerged entries, and the insert that fills it would pay for merging it. An older
 * data directory, whose twins kept one, is brought up to date when the stack starts.
 */
const postgres = inject('postgres');
const env = useTestEnv();

async function twinsOf(collection: string): Promise<{ name: string; options: string[] | null }[]> {
  const pg = await adminClient(postgres!, postgres!.port);
  try {
    return await ginTwinsOf(pg, env.config.database, collection);
  } finally {
    await pg.end();
  }
}

async function alterTwin(name: string, fastupdate: 'on' | 'off'): Promise<void> {
  const pg = await adminClient(postgres!, postgres!.port);
  try {
    await pg.query(`ALTER INDEX "${env.config.database}"."${name}" SET (fastupdate = ${fastupdate})`);
  } finally {
    await pg.end();
  }
}

describe.skipIf(!postgres)("the local stack's GIN twins", () => {
  it('are created without a pending list', async () => {
    const probes = env.store.db.collection<{ _id: string; tags: string[]; owner: string }>('twin_probes');
    await probes.createIndex({ tags: 1 });
    await probes.createIndex({ owner: 1, tags: 1 });
    await probes.insertMany(
      Array.from({ length: 50 }, (_, i) => ({ _id: `p${i}`, tags: [`t${i % 5}`], owner: 'o' })),
    );
    expect(await probes.countDocuments({ tags: 't3' })).toBe(10);

    const twins = await twinsOf('twin_probes');
    // `_id`, `tags` and `owner`: one twin per indexed field.
    expect(twins).toHaveLength(3);
    for (const twin of twins) expect(twin.options).toContain('fastupdate=off');
  });

  it('lose the pending list an older data directory gave them when the stack starts', async () => {
    const probes = env.store.db.collection<{ _id: string; colour: string }>('older_twins');
    await probes.createIndex({ colour: 1 });
    const [before] = await twinsOf('older_twins');
    await alterTwin(before!.name, 'on');
    expect((await twinsOf('older_twins')).find((t) => t.name === before!.name)?.options).toContain(
      'fastupdate=on',
    );

    await provisionPostgres(postgres!, postgres!.port);

    for (const twin of await twinsOf('older_twins')) expect(twin.options).toContain('fastupdate=off');
  });
});
