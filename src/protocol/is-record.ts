/**
 * The one test for "a JSON object" (not null, not an array) that the
 * gateway, the control plane and claude-remote apply to parsed frames.
 */
export function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
