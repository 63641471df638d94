//go:build !linux

package chaos

import (
	"errors"
	"math/rand/v2"
)

// attack needs raw sockets and /proc (Linux).
func attack(pids []int, total int, r *rand.Rand) (int, error) {
	return 0, errors.New("spoofing needs Linux (raw sockets, /proc)")
}
