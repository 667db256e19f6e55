package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
)

// executableDigest is the SHA-256 (hex) of the executable process pid
// runs: /proc/PID/exe where there is one, so that the digest is of what
// was started even if the file at path is replaced meanwhile; path
// otherwise. It reads the whole binary (tens of MB for a Go plugin), once
// per process start.
func executableDigest(pid int, path string) (string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		if f, err = os.Open(path); err != nil {
			return "", fmt.Errorf("plugin digest: %w", err)
		}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("plugin digest of %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
