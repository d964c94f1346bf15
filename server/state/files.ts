// files.ts - the file operations the per-workspace store is built from, each safe against
// what another process or a hostile folder can put in its way: an atomic write that never
// leaves its temporary file behind, a bounded read that refuses anything but a regular
// file without ever blocking (a FIFO named `x.json` would hang a plain readFileSync), the
// liveness of the process a temporary or saved-state file names, and a sweep of temporary
// files whose writer is gone. It knows nothing about what the files contain.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';

/** Most bytes of one history or workspace file read back (a conversation at the context
 * limit is a few MB of JSON; anything past this is not one of ours). */
export const MAX_STORED_FILE_BYTES = 64 * 1024 ** 2;

/** Writes data to file atomically: a temporary file beside it (named `.tmp-PID-RANDOM`, so a
 * sweep can tell whose it is), every byte written (short writes continued), fsync, rename.
 * On any failure the temporary file is removed and the error rethrown; the old file, if
 * any, is untouched. */
export function writeFileAtomic(file: string, data: string | Buffer): void {
  const tmp = `${file}.tmp-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const fd = fs.openSync(tmp, 'wx');
  try {
    try {
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      // A write may be short (a file-size limit, a full disk): go on until all of it is
      // written or the next write fails.
      for (let n = 0; n < buf.length; ) n += fs.writeSync(fd, buf, n, buf.length - n);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

/** The text of `file`, or why it cannot be one of the store's files: not a regular file
 * (a FIFO, a device, a folder), larger than `maxBytes`, or unreadable. The file is opened
 * non-blocking, so a FIFO or a device answers at once instead of hanging the server. */
export function readRegularFile(file: string, maxBytes = MAX_STORED_FILE_BYTES): { text: string } | { problem: string } {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    return { problem: `cannot be opened (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` };
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return { problem: `is not a regular file (${kindOf(st)})` };
    if (st.size > maxBytes) return { problem: `has ${st.size} bytes, more than the ${maxBytes} a stored file may have` };
    const buf = Buffer.alloc(st.size);
    let n = 0;
    while (n < st.size) {
      const got = fs.readSync(fd, buf, n, st.size - n, n);
      if (got === 0) break;
      n += got;
    }
    return { text: buf.subarray(0, n).toString('utf8') };
  } catch (e) {
    return { problem: `cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` };
  } finally {
    fs.closeSync(fd);
  }
}

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a file';
}

/** Whether `path` is a regular file (a symlink to one counts); false for anything else or
 * nothing. */
export function isRegularFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** What an entry is, without following links: 'missing' when there is none. */
export function entryKind(p: string): 'missing' | 'folder' | 'file' | 'other' {
  try {
    const st = fs.lstatSync(p);
    return st.isDirectory() ? 'folder' : st.isFile() ? 'file' : 'other';
  } catch {
    return 'missing';
  }
}

/** Whether a process with this id runs on this machine (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The writer's process id in a temporary file's name (ours: `.tmp-PID-HEX`; the engine's
 * saved states: `.tmp-PID`), or undefined when the name is not a temporary file's. */
export function tempFileOwner(name: string): number | undefined {
  const m = /\.tmp-(\d+)(?:-[0-9a-f]+)?$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** Removes the temporary files in `dir` whose writer no longer runs (a write cut by a
 * crash or a kill). Files of live processes, this one included, are writes in progress and
 * stay. Returns the names removed. */
export function sweepTempFiles(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const pid = tempFileOwner(name);
    if (pid === undefined || pid === process.pid || processAlive(pid)) continue;
    try {
      fs.rmSync(`${dir}/${name}`, { force: true });
      removed.push(name);
    } catch {
      // Another window swept it first, or the folder is read-only: nothing to do.
    }
  }
  return removed;
}

/** A file's identity as last seen: a change by anyone (a write renames a new file in) gives
 * another signature. */
export function signature(p: string): string | undefined {
  try {
    const st = fs.statSync(p);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return undefined;
  }
}

/** A short description of a file-system error for messages: the code and the path. */
export function describeFsError(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err?.code) return `${err.code}${err.path ? ` on ${err.path}` : ''}`;
  return err?.message ?? String(e);
}

/** The same for people: one sentence per cause, so two operations that fail for one
 * reason read the same. */
export function explainFsError(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  const where = err?.path ?? 'the folder';
  switch (err?.code) {
    case 'EEXIST':
    case 'ENOTDIR':
      return `a file is in the way of the folder ${where}`;
    case 'EACCES':
    case 'EPERM':
      return `${where} may not be written (${err.code})`;
    case 'EROFS':
      return `${where} is on a read-only file system`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `the disk holding ${where} is full (${err.code})`;
    default:
      return describeFsError(e);
  }
}
