/**
 * The little of a WebSocket the client uses, declared structurally: the
 * project compiles without the DOM lib, and the same code must take a
 * browser's WebSocket, Node's global one or the `ws` package's.
 */

/** What a `message` event carries: text frames arrive as strings. */
export interface MessageEventLike { data: unknown }

/** What a `close` event carries. */
export interface CloseEventLike { code: number, reason: string }

/** An open (or opening) socket, as far as the client touches it. */
export interface WebSocketLike {
  readonly readyState: number
  send (data: string): void
  close (code?: number, reason?: string): void
  addEventListener (type: 'open', listener: () => void): void
  addEventListener (type: 'message', listener: (event: MessageEventLike) => void): void
  addEventListener (type: 'close', listener: (event: CloseEventLike) => void): void
  addEventListener (type: 'error', listener: (event: unknown) => void): void
  /** `ws` only: drops the connection without a close handshake (used on a dead peer). */
  terminate?: () => void
}

/**
 * A WebSocket constructor. The third argument is `ws`'s options object
 * (`{ headers }`): header auth needs a constructor that honours it, as `ws`
 * does; browsers ignore it (and use subprotocol or ticket auth).
 */
export type WebSocketCtor = new (url: string, protocols?: string | string[], options?: { headers?: Record<string, string> }) => WebSocketLike

/** readyState of an open socket (the same in every implementation). */
export const OPEN = 1
