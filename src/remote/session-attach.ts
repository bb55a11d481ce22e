/**
 * How claude-remote gets attached to its gateway session and stays so:
 * which session (one it creates, or --resume's with its options checked),
 * the URL and token its controller socket opens with, the token's renewal
 * (credential-renewal.ts), and whether a refused upgrade or a revoked
 * credential's close is followed by another attempt (a newer token in the
 * file) or is final (exit 1, the reason on stderr). Apart from the bridge
 * because none of it turns on the session's lines.
 */
import type WebSocket from 'ws'
import type { RemoteArgs } from './argv.js'
import { closeCodes } from '../errors.js'
import { CredentialRenewal } from './credential-renewal.js'
import { GatewayHttpError, type GatewayApi } from './gateway-api.js'
import { CREATE_KEY_FIELD, newCreateKey, stopLostCreate } from './lost-create.js'
import type { RemoteEnv } from './remote-env.js'
import { ResumeMismatch, checkResumeOptions } from './resume-options.js'

export interface SessionAttachDeps {
  api: GatewayApi
  env: RemoteEnv
  args: RemoteArgs
  /** The live connection, if any. */
  socket: () => WebSocket | null
  /** Ends claude-remote with `code` at once. */
  exit: (code: number) => void
  io: { warn: (message: string) => void, debug: (message: string) => void }
  /** The bound on the create's answer (the API's default unless a test shortens it). */
  createTimeoutMs?: number | undefined
}

export class SessionAttach {
  readonly renewal: CredentialRenewal
  readonly #deps: SessionAttachDeps
  #id = ''
  #created = false

  constructor (deps: SessionAttachDeps) {
    this.#deps = deps
    this.renewal = new CredentialRenewal({
      token: deps.env.token,
      present: (frame) => {
        const ws = deps.socket()
        if (ws === null) return false
        ws.send(frame)
        return true
      },
      warn: deps.io.warn,
      debug: deps.io.debug
    })
  }

  /** The session's id; '' until it is known (or when its create or look-up failed). */
  get id (): string {
    return this.#id
  }

  /** True when claude-remote created the session (rather than attaching --resume's). */
  get created (): boolean {
    return this.#created
  }

  /** Creates the session or finds --resume's: resolves with null, or with the exit code of a failure (said on stderr). */
  async locate (): Promise<number | null> {
    const { api, args, io } = this.#deps
    // Names the create, so a session it made whose answer is lost can be found (lost-create.ts).
    const key = newCreateKey()
    try {
      if (args.resume === null) {
        const created = await api.createSession({ ...args.options, metadata: { [CREATE_KEY_FIELD]: key } }, this.#deps.createTimeoutMs)
        this.#id = String(created.id)
        this.#created = true
      } else {
        const existing = await api.getSession(args.resume)
        checkResumeOptions(existing, args.options)
        this.#id = String(existing.id)
      }
      return null
    } catch (err) {
      if (err instanceof ResumeMismatch) {
        io.warn(err.message)
        return 2
      }
      io.warn(err instanceof GatewayHttpError ? err.message : `could not reach the gateway: ${String(err)}`)
      if (args.resume === null && err instanceof GatewayHttpError && err.maybeArrived) await stopLostCreate(api, key, io.warn)
      return err instanceof GatewayHttpError && err.status === 400 ? 2 : 1
    }
  }

  /** The controller socket's URL; `after` (-1: none) asks for the session's frames after that seq. */
  url (after: number): string {
    const from = after >= 0 ? `&after=${after}` : ''
    return `${this.#deps.env.wsUrl}/v1/sessions/${encodeURIComponent(this.#id)}/ws?role=controller${from}`
  }

  /** The upgrade was refused: true when that is final (claude-remote exits 1). */
  refused (status: number): boolean {
    const { env: { token }, io } = this.#deps
    if (status === 401 && this.renewal.replaced()) {
      io.debug(`upgrade refused (HTTP 401); ${token.source} holds a newer token: reconnecting with it`)
      return false
    }
    if (status === 401 || status === 403 || status === 404) {
      io.warn(`the gateway refused the connection to session ${this.#id}: HTTP ${status}`)
      this.#deps.exit(1)
      return true
    }
    io.debug(`upgrade refused: HTTP ${status}`)
    return false
  }

  /** The connection closed: false when claude-remote ends instead of reconnecting. */
  closed (code: number, why: string): boolean {
    const { env: { token }, io } = this.#deps
    if (code !== closeCodes.credentialRevoked) return true
    if (this.renewal.replaced()) {
      io.debug(`${token.source} holds a newer token: reconnecting with it`)
      return true
    }
    // Reconnecting with the same token would be refused: say why now rather than after a 401.
    const renew = token.file === null ? 'set a valid one' : 'renew the file'
    io.warn(`the gateway no longer accepts ${token.source} (close ${code})${why === '' ? '' : `: ${why}`}; ${renew} and run again`)
    this.renewal.stop()
    this.#deps.exit(1)
    return false
  }
}
