/**
 * Notices when the files the secrets were read from change, for a reload
 * without a signal (CREDENTIAL_FILES_POLL_MS): Kubernetes updates a mounted
 * Secret by swapping a symlink and tells the process nothing, and a gateway
 * in a terminal keeps SIGHUP for the terminal's hangup. Polled rather than
 * fs.watch'ed, because a watch follows the old inode across that swap. A
 * change is reported once it reads the same at two polls in a row, so a
 * file caught half-written (an editor truncating it before writing) is
 * never what gets applied.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'

export interface FilesWatchOptions {
  /** The files to watch (the `_FILE`s of the secrets). */
  paths: readonly string[]
  intervalMs: number
  /** Called with the files whose new content held for two polls. */
  onChange: (changed: string[]) => void
  /** A file's content, or null when it cannot be read (default: the file system). */
  read?: ((path: string) => Buffer | null) | undefined
}

export class FilesWatch {
  readonly #o: FilesWatchOptions
  readonly #read: (path: string) => Buffer | null
  /** What each file held when last applied (at start, or at the change reported last). */
  readonly #applied = new Map<string, string | null>()
  /** What each file held at the previous poll. */
  readonly #previous = new Map<string, string | null>()
  #timer: NodeJS.Timeout | null = null

  constructor (options: FilesWatchOptions) {
    this.#o = options
    this.#read = options.read ?? readOrNull
  }

  /** Takes what the files hold now as applied, and polls from now on. */
  start (): void {
    for (const path of this.#o.paths) {
      const seen = this.#fingerprint(path)
      this.#applied.set(path, seen)
      this.#previous.set(path, seen)
    }
    if (this.#o.paths.length === 0) return
    this.#timer = setInterval(() => { this.poll() }, this.#o.intervalMs)
    this.#timer.unref()
  }

  /** One poll (the timer's; tests call it directly). */
  poll (): void {
    const changed: string[] = []
    for (const path of this.#o.paths) {
      const now = this.#fingerprint(path)
      const steady = now === this.#previous.get(path)
      this.#previous.set(path, now)
      if (steady && now !== this.#applied.get(path)) {
        this.#applied.set(path, now)
        changed.push(path)
      }
    }
    if (changed.length > 0) this.#o.onChange(changed)
  }

  close (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  #fingerprint (path: string): string | null {
    const content = this.#read(path)
    return content === null ? null : createHash('sha256').update(content).digest('base64url')
  }
}

function readOrNull (path: string): Buffer | null {
  try {
    return readFileSync(path)
  } catch {
    return null
  }
}
