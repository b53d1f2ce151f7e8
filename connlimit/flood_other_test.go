//go:build !linux

package connlimit

const floodChildEnv = "CONNLIMIT_FLOOD_CHILD"

// runFloodChild is never reached off Linux: no test starts a child.
func runFloodChild(string) int { return 2 }
