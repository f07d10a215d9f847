import { once } from 'node:events';
import { open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Writable } from 'node:stream';
import type { Command } from 'commander';
import { z } from 'zod';
import { agentIdSchema } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { MAX_EXPORT_LINE_BYTES, refusedLine } from '../../core/exportFormat';
import { agentHoldsIds, exportChunks, importExport } from '../../store/portable';
import { printJson, withClient } from './context';
import { parseOptions, switchFlag, unreadableFile } from './options';

export const exportOptions = z.object({ agent: agentIdSchema, out: z.string().min(1).optional() });

export const importOptions = z.object({
  agent: agentIdSchema,
  file: z.string().min(1).optional(),
  intoExisting: switchFlag,
});

/** A file the user named, opened, or InvalidInput naming the flag. */
async function opened(path: string, flags: 'r' | 'w', flag: string, command: string) {
  let handle: FileHandle;
  try {
    handle = await open(path, flags);
  } catch (err) {
    throw unreadableFile(command, flag, path, err);
  }
  // A directory opens for reading, and would fail only at its first read, untyped.
  if (flags === 'r' && (await handle.stat()).isDirectory()) {
    await handle.close();
    throw unreadableFile(command, flag, path, Object.assign(new Error('a directory'), { code: 'EISDIR' }));
  }
  return handle;
}

/**
 * Every chunk, written as the output takes it: no more than one chunk waits in memory. A
 * reader that closes the pipe early (`| head`) has taken what it wanted: the export stops
 * there, its cursors closed, as a command piped into `head` does.
 */
async function writeAll(chunks: AsyncIterable<string>, out: Writable): Promise<void> {
  let failed: NodeJS.ErrnoException | undefined;
  const onError = (err: NodeJS.ErrnoException) => (failed ??= err);
  out.on('error', onError);
  try {
    for await (const chunk of chunks) {
      if (!out.write(chunk)) await once(out, 'drain').catch(() => undefined);
      if (failed) break;
    }
  } finally {
    out.off('error', onError);
  }
  if (failed && failed.code !== 'EPIPE') throw failed;
}

/**
 * The export into the file `path`, whole or not at all: written beside it under another name,
 * and renamed over it once the last chunk is written. An export that fails midway (the store
 * gone after its first page) leaves a file already there as it was, a previous export kept.
 */
export async function writeExportFile(path: string, chunks: AsyncIterable<string>): Promise<void> {
  const isDirectory = await stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (isDirectory) {
    throw unreadableFile(
      'export',
      '--out',
      path,
      Object.assign(new Error('a directory'), { code: 'EISDIR' }),
    );
  }
  const partial = join(dirname(path), `.${basename(path)}.${process.pid}.partial`);
  let file: FileHandle;
  try {
    file = await open(partial, 'w');
  } catch (err) {
    // Named by the path the user gave, not the one beside it.
    throw unreadableFile('export', '--out', path, err);
  }
  try {
    const out = file.createWriteStream();
    await writeAll(chunks, out);
    out.end();
    await once(out, 'close');
    await rename(partial, path);
  } catch (err) {
    await file.close().catch(() => undefined);
    await rm(partial, { force: true });
    throw err;
  }
}

/**
 * The input's lines, without their newlines (a `\r` before one goes too). A line longer than
 * an export's longest is refused with its number before it is read whole.
 */
async function* inputLines(input: AsyncIterable<Buffer>): AsyncGenerator<string> {
  let lineNo = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const line = (parts: Buffer[]) => {
    lineNo++;
    const text = Buffer.concat(parts).toString('utf8');
    return text.endsWith('\r') ? text.slice(0, -1) : text;
  };
  for await (const chunk of input) {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      if (pendingBytes + nl - start > MAX_EXPORT_LINE_BYTES) break;
      yield line([...pending, chunk.subarray(start, nl)]);
      pending = [];
      pendingBytes = 0;
      start = nl + 1;
    }
    pending.push(chunk.subarray(start));
    pendingBytes += chunk.length - start;
    if (pendingBytes > MAX_EXPORT_LINE_BYTES) {
      throw refusedLine(lineNo + 1, `longer than ${MAX_EXPORT_LINE_BYTES} bytes`);
    }
  }
  if (pendingBytes > 0) yield line(pending);
}

export function registerExportCommands(program: Command): void {
  program
    .command('export')
    .description(
      "write an agent's memory as JSON Lines (docs/export.md): its tombstones, hot and cold entries as stored, with provenance, summaries and supersession; read page by page, in constant memory",
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--out <file>', 'write to this file (default: standard output)')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(exportOptions, raw, command);
      await withClient(async (c) => {
        const chunks = exportChunks(c.store, o.agent, Date.now());
        // The first chunk before the file: an agent that has nothing leaves no empty file.
        const first = await chunks.next();
        const rest = (async function* () {
          if (!first.done) yield first.value;
          yield* chunks;
        })();
        if (o.out === undefined) return writeAll(rest, process.stdout);
        await writeExportFile(o.out, rest);
      });
    });

  program
    .command('import')
    .description(
      'read an export (docs/export.md) into an agent: each line checked, the first malformed one refused with its number (what came before it is written, nothing of it); an agent that already holds entries needs --into-existing',
    )
    .requiredOption('-a, --agent <agentId>', 'agent id to import into')
    .option('--file <file>', 'read this file (default: standard input)')
    .option('--into-existing', 'import into an agent that already holds entries: what it holds is kept')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(importOptions, raw, command);
      const file = o.file === undefined ? undefined : await opened(o.file, 'r', '--file', 'import');
      try {
        await withClient(async (c) => {
          if (!o.intoExisting && (await agentHoldsIds(c.store, o.agent))) {
            throw new InvalidInputError('invalid arguments to memgate import', [
              {
                path: '--into-existing',
                message: `agent ${o.agent} already holds entries; give --into-existing to import into it`,
              },
            ]);
          }
          const input = file ? file.createReadStream({ autoClose: false }) : process.stdin;
          printJson(await importExport(c.store, o.agent, inputLines(input), Date.now()));
        });
      } finally {
        await file?.close();
      }
    });
}
