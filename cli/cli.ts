import { Command, CommanderError } from 'commander';
import { MemgateError, type MemgateErrorType } from '../core/errors';

type Register = (program: Command) => void;

/**
 * Every command of `memgate`, by the module that registers it, loaded only when one of its
 * commands runs: a command's own modules load in about half the time all of them take, which
 * is most of a short command's time (docs/benchmarks.md, bench/cli-startup). Any other
 * argument (`--help`, a typo) loads them all, so the help and commander's own errors see every
 * command. `test/unit/cli-options.test.ts` holds the names to what each module registers.
 */
export const COMMAND_MODULES: readonly { commands: readonly string[]; load: () => Promise<Register> }[] = [
  {
    commands: ['start', 'worker', 'hand-over'],
    load: async () => (await import('./commands/worker')).registerWorkerCommands,
  },
  {
    commands: ['write', 'recall', 'restore', 'reembed', 'forget'],
    load: async () => (await import('./commands/memory')).registerMemoryCommands,
  },
  { commands: ['stack'], load: async () => (await import('./commands/stack')).registerStackCommands },
  { commands: ['audit'], load: async () => (await import('../audit/command')).registerAuditCommands },
  {
    commands: ['impossible'],
    load: async () => (await import('./commands/impossible')).registerImpossibleCommands,
  },
  { commands: ['window'], load: async () => (await import('./commands/window')).registerWindowCommands },
  {
    commands: ['consolidate', 'schedule'],
    load: async () => (await import('./commands/nightly')).registerNightlyCommands,
  },
  { commands: ['verify'], load: async () => (await import('./commands/verify')).registerVerifyCommands },
  {
    commands: ['export', 'import'],
    load: async () => (await import('./commands/export')).registerExportCommands,
  },
  { commands: ['policy'], load: async () => (await import('./commands/policy')).registerPolicyCommands },
  { commands: ['keys'], load: async () => (await import('./commands/keys')).registerKeyCommands },
  { commands: ['serve'], load: async () => (await import('./commands/serve')).registerServeCommands },
  { commands: ['mcp'], load: async () => (await import('./commands/mcp')).registerMcpCommands },
];

/**
 * `memgate`: the operators' command line. Exit code 2 for bad input or configuration, 1
 * otherwise. Given the command about to run, only its module's commands are registered.
 */
export async function buildProgram(command?: string): Promise<Command> {
  const program = new Command('memgate')
    .description('memory service for long-horizon LLM agents')
    .exitOverride();
  const own = COMMAND_MODULES.filter((m) => command !== undefined && m.commands.includes(command));
  for (const m of own.length > 0 ? own : COMMAND_MODULES) (await m.load())(program);
  return program;
}

const BAD_INPUT: ReadonlySet<MemgateErrorType> = new Set([
  'InvalidInput',
  'InvalidConfig',
  'EvictionBoundaryError',
]);

export async function main(argv: string[]): Promise<number> {
  try {
    // argv: node, the script, then the command (memgate has no options before it).
    await (await buildProgram(argv[2])).parseAsync(argv);
    // A command whose answer is "no" (verify) sets the exit code rather than throwing.
    return Number(process.exitCode ?? 0);
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof MemgateError) {
      console.error(`error [${err.type}]: ${err.message}`);
      // Bad input or configuration (the eviction boundary is a rule of the configuration).
      return BAD_INPUT.has(err.type) ? 2 : 1;
    }
    console.error(err);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv).then((code) => process.exit(code));
}
