/**
 * Whether no process has a given pid any more (kill(pid, 0) fails with
 * ESRCH). A pid that exists but belongs to another user (EPERM) is not gone.
 * Used where the gateway decides that a process it knows only by pid (a
 * previous gateway of this host) has ended.
 */
export function pidGone (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return false
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH'
  }
}
