import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** The state /proc/net/tcp gives a listening socket. */
const LISTEN = '0A';

/**
 * The TCP ports a process listens on, from /proc: the inodes of its sockets matched against
 * the listening sockets of its network namespace. For a server started on port 0, whose port
 * nothing records.
 */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed between the listing and the read
    }
    const socket = /^socket:\[(\d+)\]$/.exec(target);
    if (socket) inodes.add(socket[1]!);
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    const lines = readFileSync(`/proc/${pid}/net/${table}`, 'utf8').trim().split('\n').slice(1);
    for (const line of lines) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields[3] === LISTEN && inodes.has(fields[9]!)) ports.push(parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}
