package netprobe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Key identifies the network a model was measured on: the transport and,
// for every rank, its host and the addresses of its rails (without ports,
// which change from run to run). A cached model is only used for the same
// key.
type Key struct {
	Transport string     `json:"transport"`
	Hosts     []string   `json:"hosts"`
	Rails     [][]string `json:"rails"`
}

// ID is a short stable digest of the key, used in the cache file's name.
func (k Key) ID() string {
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (k Key) equal(o Key) bool {
	if k.Transport != o.Transport || !slices.Equal(k.Hosts, o.Hosts) || len(k.Rails) != len(o.Rails) {
		return false
	}
	for i := range k.Rails {
		if !slices.Equal(k.Rails[i], o.Rails[i]) {
			return false
		}
	}
	return true
}

// cacheVersion is the format of cache files, and of the probe that wrote
// them: a model from another version is not used (the probe runs
// again). 2: the segment probe no longer tests cuts through a machine,
// which found false segments on loopback.
const cacheVersion = 2

type cacheFile struct {
	Version int       `json:"version"`
	Key     Key       `json:"key"`
	Created time.Time `json:"created"`
	Result  *Result   `json:"result"`
}

// Cache errors.
var (
	ErrCacheMissing  = errors.New("netprobe: no cached model")
	ErrCacheCorrupt  = errors.New("netprobe: cached model is corrupt")
	ErrCacheMismatch = errors.New("netprobe: cached model is for another network")
)

// DefaultCacheDir is $HETCOMM_CACHE_DIR, or hetcomm under the user's cache
// directory.
func DefaultCacheDir() string {
	if d := os.Getenv("HETCOMM_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "hetcomm")
	}
	return filepath.Join(os.TempDir(), "hetcomm-cache")
}

// CachePath is the file a key's model is cached in.
func CachePath(dir string, k Key) string { return filepath.Join(dir, "model-"+k.ID()+".json") }

// LoadCache reads the model cached for k. It fails with ErrCacheMissing,
// ErrCacheCorrupt (unreadable, undecodable, invalid model, wrong size) or
// ErrCacheMismatch (measured on other hosts, rails or transport) rather
// than return anything doubtful.
func LoadCache(dir string, k Key) (*Result, error) {
	path := CachePath(dir, k)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrCacheMissing, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCacheCorrupt, path, err)
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCacheCorrupt, path, err)
	}
	if f.Version != cacheVersion {
		return nil, fmt.Errorf("%w: %s was written by probe version %d, this is %d", ErrCacheMissing, path, f.Version, cacheVersion)
	}
	if !f.Key.equal(k) {
		return nil, fmt.Errorf("%w: %s was measured on %v", ErrCacheMismatch, path, f.Key)
	}
	n := len(k.Hosts)
	if f.Result == nil || f.Result.Model == nil || f.Result.Model.Size() != n || len(f.Result.Offsets) != n {
		return nil, fmt.Errorf("%w: %s does not describe %d ranks", ErrCacheCorrupt, path, n)
	}
	if err := f.Result.Model.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCacheCorrupt, path, err)
	}
	return f.Result, nil
}

// SaveCache writes res as the model of k, atomically (a temporary file
// renamed into place), so a crash never leaves half a file.
func SaveCache(dir string, k Key, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netprobe: cache: %w", err)
	}
	b, err := json.MarshalIndent(cacheFile{Version: cacheVersion, Key: k, Created: time.Now().UTC(), Result: res}, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".model-*.tmp")
	if err != nil {
		return fmt.Errorf("netprobe: cache: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("netprobe: cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("netprobe: cache: %w", err)
	}
	return os.Rename(tmp.Name(), CachePath(dir, k))
}

// Mode says where a run's model comes from.
type Mode string

// Probing modes.
const (
	ModeFull   Mode = "full"   // always probe (and refresh the cache)
	ModeCached Mode = "cached" // use the cached model for this network, probe if there is none
	ModeOff    Mode = "off"    // never probe: a model file, or a uniform model
	// ModePairwise always probes, every ordered pair in a tournament
	// (MethodPairwise), and refreshes the cache.
	ModePairwise Mode = "pairwise"
)

// ParseMode maps "full", "cached", "off" or "pairwise" to a Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeFull, ModeCached, ModeOff, ModePairwise:
		return m, nil
	}
	return "", fmt.Errorf("netprobe: unknown probing mode %q (want full, cached, off or pairwise)", s)
}

// Directory provides every rank with the same model: in ModeCached rank 0
// looks for a cached model for key and, if it finds a sound one, sends it
// to everyone; otherwise the ranks probe (Probe) and rank 0 caches the
// result in dir. It is collective. note, if set, hears why a cache was not
// used.
func Directory(ctx context.Context, p Port, mode Mode, cfg Config, dir string, key Key, note func(string)) (*Result, error) {
	var decision []byte
	if p.Rank() == 0 {
		decision = []byte("probe")
		if mode == ModeCached {
			res, err := LoadCache(dir, key)
			switch {
			case err == nil:
				if decision, err = json.Marshal(res); err != nil {
					return nil, err
				}
			case note != nil && !errors.Is(err, ErrCacheMissing):
				note(err.Error() + "; probing again")
			}
		}
	}
	decision, err := p.Bcast(ctx, 0, decision)
	if err != nil {
		return nil, err
	}
	if string(decision) != "probe" {
		res, err := DecodeResult(decision, p.Size())
		if err != nil {
			return nil, err
		}
		res.Seconds = 0
		return res, nil
	}
	if mode == ModePairwise {
		cfg.Method = MethodPairwise
	}
	res, err := Probe(ctx, p, cfg)
	if err != nil {
		return nil, err
	}
	if p.Rank() == 0 && dir != "" {
		if err := SaveCache(dir, key, res); err != nil && note != nil {
			note("cannot cache the model: " + err.Error())
		}
	}
	return res, nil
}
