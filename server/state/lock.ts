// lock.ts - the lock that lets several language servers (one per window of a workspace)
// share one per-workspace folder. A writer holds it only for a few file operations (write
// a history file, read-modify-write workspace.json, move legacy state), never while the
// engine works, so a second window waits milliseconds, not turns. The lock is a file created
// with O_EXCL holding `pid host token`. It is broken when its process is gone (same host),
// when it is older than LOCK_STALE_MS (a holder never keeps it that long), and when it is
// empty or unreadable for longer than EMPTY_GRACE_MS (a holder writes its line right after
// creating the file; an empty one was left by a write that failed, e.g. on a full disk).
// A holder whose line cannot be written removes the file at once.
//
// Waiting never blocks the event loop: the wait is a chain of timers, bounded by
// LOCK_WAIT_MS, after which the write is refused with a LockBusy that names the holder, so
// k3/status and completions are answered meanwhile. The work done under the lock (`fn`) is
// synchronous, so nothing else in this process runs while it is held; holders in this
// process queue, in order.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { processAlive } from './files';

/** Longest wait for another holder before a write is refused. */
export const LOCK_WAIT_MS = 3000;
/** A lock older than this was left by a holder that died or hung: broken. */
export const LOCK_STALE_MS = 10_000;
/** An empty or unreadable lock older than this was left by a write that failed: broken. */
export const EMPTY_GRACE_MS = 1000;
const RETRY_MS = 5;

/** How the holder's line is written: a seam for tests that cannot fill a real file system
 * (test/server/store-lock.test.ts mounts a tiny tmpfs where it may). */
export const lockFileIo = {
  write: (fd: number, buf: Buffer, offset: number, length: number): number => fs.writeSync(fd, buf, offset, length),
};

export class LockBusy extends Error {
  constructor(
    readonly file: string,
    readonly holder: string,
  ) {
    super(`another window of this workspace (${holder}) held ${file} for longer than ${LOCK_WAIT_MS} ms`);
    this.name = 'LockBusy';
  }
}

/** What a lock file says about its holder; `pid` undefined when it says nothing readable. */
interface Holder {
  content: string;
  pid: number | undefined;
  host: string;
  ageMs: number;
}

export class StoreLock {
  private readonly token = crypto.randomBytes(8).toString('hex');
  /** The holders of this process, one after another. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly file: string) {}

  /** Runs fn with the lock held, after the holders of this process before it. Rejects with
   * LockBusy when another process keeps the lock past LOCK_WAIT_MS, and with whatever fn
   * or the file system throws. */
  hold<T>(fn: () => T): Promise<T> {
    const run = this.queue.then(async () => {
      await this.acquire();
      try {
        return fn();
      } finally {
        this.release();
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async acquire(): Promise<void> {
    const content = `${process.pid} ${os.hostname()} ${this.token}\n`;
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      if (this.tryCreate(content)) return;
      const held = this.readHolder();
      if (held && this.isStale(held)) {
        this.breakStale(held.content);
        continue;
      }
      if (Date.now() >= deadline) {
        throw new LockBusy(this.file, held?.pid !== undefined ? `process ${held.pid} on ${held.host}` : 'a window that left no name');
      }
      await new Promise<void>((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  /** Creates the lock holding `content`; false when another holder has it. A line that
   * cannot be written (ENOSPC, EIO) takes the file away again before the error goes up. */
  private tryCreate(content: string): boolean {
    let fd: number;
    try {
      fd = fs.openSync(this.file, 'wx');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
    try {
      const buf = Buffer.from(content);
      for (let n = 0; n < buf.length; ) n += lockFileIo.write(fd, buf, n, buf.length - n);
    } catch (e) {
      fs.closeSync(fd);
      fs.rmSync(this.file, { force: true });
      throw e;
    }
    fs.closeSync(fd);
    return true;
  }

  /** The holder the lock file names; undefined when there is no lock (released since). */
  private readHolder(): Holder | undefined {
    let ageMs: number;
    try {
      ageMs = Date.now() - fs.lstatSync(this.file).mtimeMs;
    } catch {
      return undefined; // released between the open and the look: try again
    }
    let content: string;
    try {
      content = fs.readFileSync(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      return { content: '', pid: undefined, host: '', ageMs }; // a folder, no permission: unreadable
    }
    const [pid, host] = content.trim().split(' ');
    const n = Number(pid);
    return { content, pid: Number.isInteger(n) && n > 0 ? n : undefined, host: host ?? '', ageMs };
  }

  private isStale(h: Holder): boolean {
    if (h.ageMs > LOCK_STALE_MS) return true;
    if (h.pid === undefined) return h.ageMs > EMPTY_GRACE_MS;
    return h.host === os.hostname() && !processAlive(h.pid);
  }

  /** Removes a stale lock, unless another process replaced it since it was read. */
  private breakStale(seen: string): void {
    const aside = `${this.file}.broken-${this.token}`;
    try {
      fs.renameSync(this.file, aside);
    } catch {
      return; // someone else broke or released it
    }
    try {
      if (readOrEmpty(aside) !== seen) fs.linkSync(aside, this.file); // a fresh lock: put it back
    } catch {
      // A newer lock exists already; ours was the stale one after all.
    } finally {
      fs.rmSync(aside, { force: true, recursive: true });
    }
  }

  private release(): void {
    try {
      if (fs.readFileSync(this.file, 'utf8').includes(this.token)) fs.rmSync(this.file, { force: true });
    } catch {
      // Already gone (broken as stale by another window after a very long hold).
    }
  }
}

/** A file's text, '' when it cannot be read (as readHolder records an unreadable lock). */
function readOrEmpty(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
