import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { PersistedAt } from './protocol';

/**
 * The files of a persisted index (vectorEngine/thread.ts writes them): `<base>.state`, which
 * names the generation of `<base>-<gen>.usearch` it describes, holds a header (with the
 * caller's `meta`), then the ids by label, their recall states and the background sample. The
 * state is written last and deleted first, so an index file is only ever opened with the
 * state written for it. Header and ids are JSON, each after its length (4 bytes), so the
 * header is read without the rest.
 */

export const STATE_VERSION = 1;

export interface StateHeader {
  version: number;
  dimensions: number;
  generation: number;
  /** Labels given: the ids that follow hold one entry id (or null, where it left) per label. */
  labels: number;
  scrubs: string[];
  nextScrub: string;
  sampleLabels: number[];
  sampled: number;
  meta: unknown;
}

/** The names in a directory; none if it does not exist (nothing was persisted yet). */
function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

export function stateFile(at: PersistedAt): string {
  return `${at.base}.state`;
}

export function indexFile(at: PersistedAt, generation: number): string {
  return `${at.base}-${generation}.usearch`;
}

/** Every generation's index file of `at`, but `keep`'s. */
export function otherGenerations(at: PersistedAt, keep: number | undefined): string[] {
  const dir = dirname(at.base);
  const prefix = `${basename(at.base)}-`;
  return namesIn(dir)
    .filter((n) => n.startsWith(prefix) && /^\d+\.usearch(\.tmp)?$/.test(n.slice(prefix.length)))
    .filter((n) => keep === undefined || n !== basename(indexFile(at, keep)))
    .map((n) => join(dir, n));
}

export function unlinkPersisted(at: PersistedAt): void {
  // The state first: without it, no index file is opened.
  rmSync(stateFile(at), { force: true });
  for (const f of otherGenerations(at, undefined)) rmSync(f, { force: true });
}

/** A value as it is written in a state file: its JSON's length, then its JSON. */
export function lengthPrefixed(value: unknown): Buffer[] {
  const json = Buffer.from(JSON.stringify(value));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(json.length);
  return [length, json];
}

function prefixedAt(buf: Buffer, offset: number): { value: unknown; end: number } {
  const length = buf.readUInt32LE(offset);
  const start = offset + 4;
  return { value: JSON.parse(buf.subarray(start, start + length).toString('utf8')), end: start + length };
}

/** A whole state file's header and ids, and where its binary part starts. */
export function readState(buf: Buffer): { header: StateHeader; ids: (string | null)[]; end: number } {
  const header = prefixedAt(buf, 0);
  const ids = prefixedAt(buf, header.end);
  return { header: header.value as StateHeader, ids: ids.value as (string | null)[], end: ids.end };
}

/** A state file's header alone, read without the rest of the file. */
export function readStateHeader(at: PersistedAt): StateHeader {
  const fd = openSync(stateFile(at), 'r');
  try {
    const length = Buffer.alloc(4);
    readSync(fd, length, 0, 4, 0);
    const json = Buffer.alloc(length.readUInt32LE(0));
    readSync(fd, json, 0, json.length, 4);
    return JSON.parse(json.toString('utf8')) as StateHeader;
  } finally {
    closeSync(fd);
  }
}

/** The entry ids a persisted index holds; undefined when its state does not read whole. */
export function persistedIds(at: PersistedAt): string[] | undefined {
  try {
    return readState(readFileSync(stateFile(at))).ids.filter((id): id is string => id !== null);
  } catch {
    return undefined;
  }
}

/**
 * Every index persisted in `dir`, with its header; undefined for a state file that does not
 * read (cut off by a machine lost before its save reached the disk): such an index never
 * opens, and what it holds cannot be told.
 */
export function persistedIndexes(dir: string): { at: PersistedAt; header: StateHeader | undefined }[] {
  return namesIn(dir)
    .filter((n) => n.endsWith('.state'))
    .map((n) => {
      const at = { base: join(dir, n.slice(0, -'.state'.length)) };
      try {
        return { at, header: readStateHeader(at) };
      } catch {
        return { at, header: undefined };
      }
    });
}

/** The file in a directory of persisted indexes that names the process keeping it. */
export const OWNER_FILE = 'owner.pid';

/** The directories this process keeps. */
const kept = new Set<string>();

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user's process.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether this process may keep its persisted indexes in `dir`: one process at a time does
 * (two saving the same indexes under the same names would each delete the other's files). The
 * first to ask records its pid there; a record left by a process that is gone is taken over.
 */
export function keepDirectory(dir: string): boolean {
  if (kept.has(dir)) return true;
  mkdirSync(dir, { recursive: true });
  const owner = join(dir, OWNER_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(owner, String(process.pid), { flag: 'wx' });
      if (kept.size === 0)
        process.once('exit', () => kept.forEach((d) => rmSync(join(d, OWNER_FILE), { force: true })));
      kept.add(dir);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = Number(readFileSync(owner, 'utf8').trim());
    if (pid === process.pid) {
      kept.add(dir);
      return true;
    }
    if (Number.isInteger(pid) && pid > 0 && running(pid)) return false;
    rmSync(owner, { force: true });
  }
  return false;
}
