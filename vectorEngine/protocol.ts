import type { RecallState } from '../core/recall';
import type { Salience } from '../core/salience';
import type { Tier } from '../core/entry';

/**
 * The messages between a process and its vector engine thread (vectorEngine/thread.ts). An
 * index is named by `key`: one agent's vectors of one embedding space. Vectors travel as
 * one Float32Array of `ids.length × dimensions`, transferred, not copied.
 */

export interface Neighbour {
  id: string;
  similarity: number;
  /** The entry's salience, from the state kept beside its vector; absent where none is. */
  salience?: Salience;
  /** The entry's tier, from the same state: where a read of it looks first. */
  tier?: Tier;
}

/** Where an index is persisted: `<base>.state` names the generation `<base>-<gen>.usearch`. */
export interface PersistedAt {
  base: string;
}

export type EngineRequest =
  | { op: 'create'; key: string; dimensions: number }
  /** Open what was persisted at `at`: the index, its ids, their states and `meta`. */
  | { op: 'open'; key: string; dimensions: number; at: PersistedAt }
  | {
      op: 'apply';
      key: string;
      /**
       * Vectors to hold, with their recall states: a held id's vector is replaced, or only its
       * state when the vector is the same.
       */
      upserts: { id: string; state?: RecallState }[];
      vectors: Float32Array;
      /** Ids whose vector leaves. */
      removals: string[];
    }
  | {
      op: 'search';
      key: string;
      query: Float32Array;
      k: number;
      /** Default recall's filter at this time (core/recall.ts, stateInDefaultRecall); none for deep. */
      defaultRecallAt?: number;
      /**
       * With the filter: once this many of a search's neighbours pass, the index is not
       * searched again, wider, for the rest of `k`; unset, `k`.
       */
      enough?: number;
      /** How many of the index's vectors to measure the query against (core/hybrid.ts, Background). */
      sample: number;
    }
  /** Persist the index at `at` with `meta` (the caller's, JSON), replacing what was there. */
  | { op: 'save'; key: string; at: PersistedAt; meta: unknown }
  /** Delete what is persisted at `at`. */
  | { op: 'unlink'; at: PersistedAt }
  | { op: 'drop'; key: string };

export interface Opened {
  size: number;
  /** Scrubs in its graph (vectorEngine/thread.ts, Erasure): core/vectorCompaction.ts judges them. */
  scrubs: number;
  meta: unknown;
}

export interface Applied {
  size: number;
  /** Whether a vector left: what the index persisted no longer holds it (it was deleted). */
  removed: boolean;
  /** Scrubs in its graph (vectorEngine/thread.ts, Erasure): core/vectorCompaction.ts judges them. */
  scrubs: number;
}

export interface Found {
  neighbours: Neighbour[];
  background: number[];
  /** Neighbours the filter rejected: never read from the store. */
  rejected: number;
}

export interface EngineReplies {
  create: { size: number };
  open: Opened | null;
  apply: Applied;
  search: Found;
  save: { bytes: number };
  unlink: null;
  drop: null;
}

export type EngineReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };
