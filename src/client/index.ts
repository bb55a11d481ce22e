/**
 * claude-gateway/client: a typed client for the gateway's HTTP API and
 * session WebSockets, for browsers and Node 20 (docs/CLIENT.md).
 */
export { GatewayClient, type GatewayClientOptions } from './gateway-client.js'
export { SessionConnection } from './session-connection.js'
export { GatewayRequestError, ControlRequestError, ConnectionError } from './errors.js'
export { backoffDelay, backoffSettings, BACKOFF_DEFAULTS, type BackoffSettings } from './backoff.js'
export { closeVerdict, type CloseVerdict } from './close-policy.js'
export { allowDecision, denyDecision, alwaysAllowDecision } from './permissions.js'
export type * from './connection-types.js'
export type * from './frames.js'
export type * from './rest-types.js'
export type { WebSocketLike, WebSocketCtor, MessageEventLike, CloseEventLike } from './websocket-like.js'
