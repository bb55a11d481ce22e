/**
 * claude-remote's gateway credential. A fixed one (CLAUDE_REMOTE_TOKEN)
 * never changes; one read from CLAUDE_REMOTE_TOKEN_FILE may be kept fresh
 * by something else (a Kubernetes projected token, a sidecar renewing a
 * JWT), so the file is read again whenever the gateway says the credential
 * in use is ending or no longer accepted, and its newer content is used
 * from then on, by the socket and by every REST call.
 */
import { readFileSync } from 'node:fs'

export class RemoteToken {
  #value: string
  /** The file it comes from; null for CLAUDE_REMOTE_TOKEN. */
  readonly file: string | null

  constructor (value: string, file: string | null = null) {
    this.#value = value
    this.file = file
  }

  /** The credential to send now. */
  get value (): string {
    return this.#value
  }

  /** Where it comes from, for messages. */
  get source (): string {
    return this.file === null ? 'CLAUDE_REMOTE_TOKEN' : `CLAUDE_REMOTE_TOKEN_FILE (${this.file})`
  }

  /**
   * Reads the file again. True when it now holds another usable token (in
   * use from now on); false when it holds the same one, or cannot be read
   * or used (the token in use stays: a file being rewritten is not an end).
   */
  reread (): boolean {
    if (this.file === null) return false
    let next: string
    try {
      next = readTokenFile(this.file)
    } catch {
      return false
    }
    if (next === '' || next === this.#value || tokenProblem(next) !== null) return false
    this.#value = next
    return true
  }
}

/** The token a file holds (surrounding whitespace, such as a final newline, is not part of it). */
export function readTokenFile (file: string): string {
  return readFileSync(file, 'utf8').trim()
}

/** Why `token` cannot be sent, or null. */
export function tokenProblem (token: string): string | null {
  // It goes into a header: a newline would be refused by fetch/ws with a less clear message.
  return /[\s]/.test(token) ? 'the gateway token contains whitespace' : null
}
