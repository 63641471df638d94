package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
)

// NewSecret returns a fresh random job secret, hex encoded.
func NewSecret() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("bootstrap: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// readSecretFile reads a job secret from a file that only its owner (and
// group) may read.
func readSecretFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &EnvError{Var: EnvSecretFile, Msg: err.Error()}
	}
	if st.Mode().Perm()&0o004 != 0 {
		return nil, &EnvError{Var: EnvSecretFile, Msg: fmt.Sprintf("%s is world-readable (chmod 600 it)", path)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &EnvError{Var: EnvSecretFile, Msg: err.Error()}
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return nil, &EnvError{Var: EnvSecretFile, Msg: path + " is empty"}
	}
	return []byte(s), nil
}

// JobID is the 64-bit id of a job name that every link's handshake
// carries: connections from another job are refused.
func JobID(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return h.Sum64()
}

// linkSecret derives the key the links authenticate with from the job
// secret.
func linkSecret(secret []byte) []byte {
	sum := sha256.Sum256(append([]byte("hetcomm job secret\x00"), secret...))
	return sum[:]
}
