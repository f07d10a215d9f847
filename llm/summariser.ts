/**
 * The consolidate phase's summariser. Whatever writes the text, the phase checks it against
 * every source with the atom check (core/atoms.ts) and flags it `lossy_summary` unless it
 * keeps every fact, so an implementation is trusted for wording, never for losslessness.
 */

export interface SummarySource {
  id: string;
  text: string;
}

export interface Summariser {
  readonly name: string;
  /** One summary of near-duplicate sources, given oldest first. */
  summarise(sources: readonly SummarySource[]): Promise<string>;
}

/** Sentences of a text, split after terminal punctuation or at line breaks. */
export function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function sentenceKey(sentence: string): string {
  return sentence.replace(/\s+/g, ' ').toLowerCase();
}

/**
 * The union of the sources' distinct sentences: each source in turn contributes, as one
 * line, its sentences that no earlier source already said. Every sentence survives
 * verbatim, and each stays beside its own neighbours, so the merge is lossless by
 * construction; a line that does not end a sentence gets a full stop, so no number or
 * name runs into the next line.
 */
export function extractiveSummary(sources: readonly SummarySource[]): string {
  const said = new Set<string>();
  const lines: string[] = [];
  for (const source of sources) {
    const fresh = sentences(source.text).filter((s) => {
      const key = sentenceKey(s);
      if (said.has(key)) return false;
      said.add(key);
      return true;
    });
    if (fresh.length === 0) continue;
    const line = fresh.join(' ');
    lines.push(`- ${/[.!?]$/.test(line) ? line : `${line}.`}`);
  }
  return lines.join('\n');
}

/** The default: deterministic, local, no model call. */
export const extractiveSummariser: Summariser = {
  name: 'extractive',
  summarise: async (sources) => extractiveSummary(sources),
};
